// SPDX-License-Identifier: BSD-3-Clause
// Packed virtqueue (virtio 1.2 §2.8): one descriptor ring both sides write, wrap counters instead
// of indices, event suppression areas. The layout both sides share; the device side is in
// packed_device.hpp, the driver side in packed_driver.hpp.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>

#include "ws/core/result.hpp"
#include "ws/virtio/ring/virtqueue.hpp"

namespace ws::virtio {

struct PackedDesc {  // §2.8.13
  std::uint64_t addr;
  std::uint32_t len;
  std::uint16_t id;
  std::uint16_t flags;
};
static_assert(sizeof(PackedDesc) == 16);

struct EventSuppress {  // §2.8.10
  static constexpr std::uint16_t enable = 0;
  static constexpr std::uint16_t disable = 1;
  static constexpr std::uint16_t desc = 2;  // with EVENT_IDX: notify at off_wrap
  std::uint16_t off_wrap;
  std::uint16_t flags;
};
static_assert(sizeof(EventSuppress) == 4);

struct PackedRing {
  std::uint32_t size = 0;                 // 1..32768, any value
  PackedDesc* desc = nullptr;             // 16-byte aligned; both sides write
  EventSuppress* driver_event = nullptr;  // driver writes, device reads; 4-aligned
  EventSuppress* device_event = nullptr;  // device writes, driver reads; 4-aligned
};

constexpr std::size_t packed_desc_bytes(std::uint32_t n) { return 16u * n; }

Result<void> check_packed_ring(const PackedRing& ring);

// §2.8.1: available when AVAIL equals the wrap counter and USED differs; used when both equal it.
// One mask and one compare: the two bits tested one by one cost the hot loops 7 instructions.
constexpr std::uint16_t packed_avail_bits(bool wrap) noexcept { return wrap ? desc_flag::avail : desc_flag::used; }
constexpr std::uint16_t packed_used_bits(bool wrap) noexcept { return wrap ? desc_flag::avail | desc_flag::used : 0; }
constexpr std::uint16_t packed_wrap_flags(std::uint16_t flags) noexcept {
  return flags & (desc_flag::avail | desc_flag::used);
}
constexpr bool packed_avail(std::uint16_t flags, bool wrap) noexcept {
  return packed_wrap_flags(flags) == packed_avail_bits(wrap);
}
constexpr bool packed_used(std::uint16_t flags, bool wrap) noexcept {
  return packed_wrap_flags(flags) == packed_used_bits(wrap);
}

}  // namespace ws::virtio
