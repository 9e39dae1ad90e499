// SPDX-License-Identifier: BSD-3-Clause
// Arena: one block of shareable memory (a memfd, on hugetlb pages when the machine has them)
// from which packet buffers and rings are carved. A vhost-user peer maps the same memory by the
// fd, so the arena holds nothing a peer must not read or write: no pointer of ours (mbuf headers
// are in PrivateMemory), and its size is sealed so that a peer cannot shrink it under us.
// IOVA, the address a device is given for DMA: the virtual address (virtual devices), the
// address at which an IOMMU maps the arena (a device on vfio-pci: the arena is mapped whole, in
// one piece, at an IOVA chosen inside the IOMMU's aperture, which our virtual addresses may lie
// above), or the physical address of hugetlb pages (a PCI device on uio_pci_generic, which has
// no IOMMU), learnt from /proc/self/pagemap.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ws/core/result.hpp"

namespace ws {

/// Whether an arena is backed by 2 MiB huge pages.
enum class HugePolicy {
  automatic,  ///< hugetlb if free huge pages cover the size, else plain pages
  never,      ///< --no-huge
  required,   ///< fail if hugetlb cannot back the arena
};

/// What a DMA address means (DPDK's --iova-mode).
enum class IovaMode {
  va,  ///< IOVA = virtual address
  pa,  ///< IOVA = physical address: hugetlb pages only (they do not move), pagemap read as root
};

/// What Arena::create maps.
struct ArenaOptions {
  std::string name = "wirespeed";           ///< Names the memfd (seen in /proc/PID/maps) and errors.
  std::size_t size_bytes = 0;               ///< Bytes to map, > 0; rounded up to the page size.
  HugePolicy huge = HugePolicy::automatic;  ///< Page size policy.
  IovaMode iova = IovaMode::va;             ///< What iova() returns: virtual or physical addresses.
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
  int fd() const { return fd_; }                     ///< The memfd, for sharing with a vhost-user peer (SET_MEM_TABLE).
  const std::string& name() const { return name_; }  ///< The name given at creation.
  /// True when [p, p + len) lies inside the arena.
  bool contains(const void* p, std::size_t len) const;

  /// How devices address this memory: virtual addresses (va) or physical ones (pa).
  IovaMode iova_mode() const { return iova_mode_; }
  /// The address a device uses for `p` (inside the arena). In pa mode each huge page is
  /// physically contiguous, so a block that does not cross a page boundary is contiguous for the
  /// device too: allocate() never makes a block of at most one page cross one.
  std::uint64_t iova(const void* p) const noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    if (iova_mode_ == IovaMode::va) return a + iova_offset_;
    const std::size_t off = a - reinterpret_cast<std::uintptr_t>(base_);
    return page_iova_[off >> page_shift_] + (off & (page_ - 1));
  }
  /// va mode: an IOMMU maps the arena's first byte at `iova`, the rest after it in order; from
  /// now on iova() gives those addresses. Called before anything is carved (mbufs keep theirs).
  void set_iova_base(std::uint64_t iova) noexcept { iova_offset_ = iova - reinterpret_cast<std::uintptr_t>(base_); }
  /// Whether IOVAs are contiguous across the whole arena (va mode), so objects may cross pages.
  bool iova_contiguous() const { return iova_mode_ == IovaMode::va; }

 private:
  Arena(std::string name, int fd, std::byte* base, std::size_t size, std::size_t page, bool huge);
  Result<void> learn_physical_addresses();

  std::string name_;
  int fd_;
  std::byte* base_;
  std::size_t size_;
  std::size_t page_;
  bool huge_;
  IovaMode iova_mode_ = IovaMode::va;
  std::uint64_t iova_offset_ = 0;  // va mode: IOVA - virtual address (wraps; 0 without an IOMMU)
  unsigned page_shift_ = 0;
  std::vector<std::uint64_t> page_iova_;  // pa mode: physical address of each page
  mutable std::mutex mutex_;
  std::size_t used_ = 0;
};

/// Memory of this process alone: an anonymous private mapping, with no fd that a peer could be
/// handed. Mbuf headers live here, so that a peer that maps an Arena (a vhost-user backend) sees
/// packet data and rings but never one of our pointers.
class PrivateMemory {
 public:
  /// Maps `size_bytes` (rounded up to the page size), populated, on 2 MiB huge pages when `huge`
  /// and some are free, else on 4 KiB pages (transparent huge pages where the kernel allows).
  /// `what` names the memory in errors.
  static Result<std::unique_ptr<PrivateMemory>> create(std::size_t size_bytes, bool huge, std::string_view what);
  ~PrivateMemory();
  PrivateMemory(const PrivateMemory&) = delete;
  PrivateMemory& operator=(const PrivateMemory&) = delete;

  std::byte* base() const { return base_; }         ///< First byte of the mapping.
  std::size_t size_bytes() const { return size_; }  ///< Bytes mapped.
  bool huge() const { return huge_; }               ///< True when on 2 MiB huge pages.

 private:
  PrivateMemory(std::byte* base, std::size_t size, bool huge) : base_(base), size_(size), huge_(huge) {}
  std::byte* base_;
  std::size_t size_;
  bool huge_;
};

/// Free 2 MiB huge pages on the machine (0 when hugetlbfs is not configured).
std::size_t free_huge_pages_2m();

/// The physical address of the page holding `p` (a mapped, populated page) from `pagemap` (a
/// /proc/PID/pagemap file): bits 0-54 of its 64-bit entry are the page frame number, and read as
/// zero without CAP_SYS_ADMIN. `what` names the memory in errors.
Result<std::uint64_t> physical_address(const void* p, const std::string& pagemap, std::string_view what);

/// "va" or "pa".
std::string_view iova_mode_name(IovaMode m);

}  // namespace ws
