// SPDX-License-Identifier: BSD-3-Clause
// Arena: one block of shareable memory (a memfd, on hugetlb pages when the machine has them)
// from which pools and rings are carved. A vhost-user peer maps the same memory by the fd;
// virtual devices use IOVA = virtual address.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "ws/core/result.hpp"

namespace ws {

/// Whether an arena is backed by 2 MiB huge pages.
enum class HugePolicy {
  automatic,  ///< hugetlb if free huge pages cover the size, else plain pages
  never,      ///< --no-huge
  required,   ///< fail if hugetlb cannot back the arena
};

/// What Arena::create maps.
struct ArenaOptions {
  std::string name = "wirespeed";          ///< Names the memfd (seen in /proc/PID/maps) and errors.
  std::size_t size_bytes = 0;              ///< Bytes to map, > 0; rounded up to the page size.
  HugePolicy huge = HugePolicy::automatic;  ///< Page size policy.
};

/// One block of shareable memory, mapped once and never grown; pools and rings are carved from
/// it and live until it is destroyed.
class Arena {
 public:
  /// Creates and maps the memory (populated, so the hot path never faults).
  static Result<std::unique_ptr<Arena>> create(const ArenaOptions& options);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  /// Carve `size` bytes aligned to `align` (a power of two). Thread-safe. Memory is zeroed.
  Result<void*> allocate(std::size_t size, std::size_t align, std::string_view what);

  std::byte* base() const { return base_; }          ///< First byte of the mapping.
  std::size_t size_bytes() const { return size_; }   ///< Bytes mapped.
  std::size_t used_bytes() const;                    ///< Bytes carved so far. Thread-safe.
  std::size_t page_bytes() const { return page_; }   ///< Page size backing it: 4 KiB or 2 MiB.
  bool huge() const { return huge_; }                ///< True when on 2 MiB huge pages.
  int fd() const { return fd_; }  ///< The memfd, for sharing with a vhost-user peer (SET_MEM_TABLE).
  const std::string& name() const { return name_; }  ///< The name given at creation.
  /// True when [p, p + len) lies inside the arena.
  bool contains(const void* p, std::size_t len) const;

 private:
  Arena(std::string name, int fd, std::byte* base, std::size_t size, std::size_t page, bool huge);

  std::string name_;
  int fd_;
  std::byte* base_;
  std::size_t size_;
  std::size_t page_;
  bool huge_;
  mutable std::mutex mutex_;
  std::size_t used_ = 0;
};

/// Free 2 MiB huge pages on the machine (0 when hugetlbfs is not configured).
std::size_t free_huge_pages_2m();

}  // namespace ws
