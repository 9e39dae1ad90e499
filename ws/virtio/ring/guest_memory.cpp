// SPDX-License-Identifier: BSD-3-Clause
// GuestMemory: region table checks (control path).
#include "ws/virtio/ring/guest_memory.hpp"

#include <cstdint>
#include <limits>

namespace ws::virtio {
namespace {

bool overflows(std::uint64_t start, std::uint64_t size) {
  return size > std::numeric_limits<std::uint64_t>::max() - start;
}
bool overlap(std::uint64_t a, std::uint64_t a_size, std::uint64_t b, std::uint64_t b_size) {
  return a < b + b_size && b < a + a_size;  // both ends checked for overflow before
}

}  // namespace

Result<void> GuestMemory::add(const MemRegion& r) {
  if (count_ == max_regions) return fail("guest memory: region {} refused: at most {} regions", count_, max_regions);
  if (r.size == 0) return fail("guest memory: region {} has size 0, expected > 0", count_);
  if (r.host == nullptr) return fail("guest memory: region {} is not mapped", count_);
  const auto host = reinterpret_cast<std::uintptr_t>(r.host);
  if (overflows(r.guest_addr, r.size) || overflows(r.user_addr, r.size) || overflows(host, r.size))
    return fail("guest memory: region {} (guest {:#x}, user {:#x}, size {:#x}) overflows the address space", count_,
                r.guest_addr, r.user_addr, r.size);
  for (std::size_t i = 0; i < count_; ++i) {
    const MemRegion& o = regions_[i];
    if (overlap(r.guest_addr, r.size, o.guest_addr, o.size) || overlap(r.user_addr, r.size, o.user_addr, o.size))
      return fail("guest memory: region {} (guest {:#x}, size {:#x}) overlaps region {} (guest {:#x}, size {:#x})",
                  count_, r.guest_addr, r.size, i, o.guest_addr, o.size);
  }
  regions_[count_++] = r;
  return {};
}

std::byte* GuestMemory::translate_user(std::uint64_t addr, std::uint64_t len) const noexcept {
  for (std::size_t i = 0; i < count_; ++i) {
    const MemRegion& r = regions_[i];
    if (addr < r.user_addr) continue;
    const std::uint64_t off = addr - r.user_addr;
    if (off >= r.size) continue;
    if (len > r.size - off) return nullptr;
    return r.host + off;
  }
  return nullptr;
}

}  // namespace ws::virtio
