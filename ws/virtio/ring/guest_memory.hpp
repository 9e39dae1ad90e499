// SPDX-License-Identifier: BSD-3-Clause
// The frontend's memory as the device sees it: up to 8 regions (vhost-user's limit), each a
// guest-address range mapped at a host pointer. translate() is the one gate every descriptor
// address goes through: a range is accepted only when it lies inside ONE region.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "ws/core/result.hpp"

namespace ws::virtio {

struct MemRegion {
  std::uint64_t guest_addr = 0;  // guest physical (descriptor addresses)
  std::uint64_t user_addr = 0;   // frontend virtual (vhost-user ring addresses)
  std::uint64_t size = 0;
  std::byte* host = nullptr;  // where we mapped it
};

class GuestMemory {
 public:
  static constexpr std::size_t max_regions = 8;

  // Adds a region. Refuses zero size, guest/user/host range overflow, overlap with an existing
  // region (guest or user space) and a ninth region; the message names the region. Control path.
  Result<void> add(const MemRegion& region);
  void clear() noexcept { count_ = 0; }

  // Host pointer for [addr, addr+len) when it lies inside one region; nullptr otherwise
  // (including addr+len overflow). A zero length still needs addr inside a region.
  // Thread-safe for readers while nobody calls add/clear (regions change only while rings stop).
  std::byte* translate(std::uint64_t addr, std::uint64_t len) const noexcept {
    for (std::size_t i = 0; i < count_; ++i) {
      const MemRegion& r = regions_[i];
      if (addr < r.guest_addr) continue;
      const std::uint64_t off = addr - r.guest_addr;  // no overflow: addr >= guest_addr
      if (off >= r.size) continue;
      if (len > r.size - off)
        return nullptr;  // crosses this region's end: refused, even if
                         // the next region is adjacent
      return r.host + off;
    }
    return nullptr;
  }
  // The same for frontend virtual addresses (vhost-user SET_VRING_ADDR).
  std::byte* translate_user(std::uint64_t addr, std::uint64_t len) const noexcept;

  std::size_t size() const noexcept { return count_; }
  const MemRegion& operator[](std::size_t i) const noexcept { return regions_[i]; }

 private:
  std::array<MemRegion, max_regions> regions_{};
  std::size_t count_ = 0;
};

}  // namespace ws::virtio
