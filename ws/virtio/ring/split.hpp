// SPDX-License-Identifier: BSD-3-Clause
// Split virtqueue (virtio 1.2 §2.7): the ring layout both sides share. The device side is in
// split_device.hpp, the driver side in split_driver.hpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ws/core/result.hpp"
#include "ws/virtio/ring/virtqueue.hpp"

namespace ws::virtio {

struct SplitDesc {  // §2.7.5
  std::uint64_t addr;
  std::uint32_t len;
  std::uint16_t flags;
  std::uint16_t next;
};
static_assert(sizeof(SplitDesc) == 16);

struct UsedElem {  // §2.7.8
  std::uint32_t id;
  std::uint32_t len;
};
static_assert(sizeof(UsedElem) == 8);

inline constexpr std::uint16_t avail_f_no_interrupt = 1;  // §2.7.7: driver asks for no interrupts
inline constexpr std::uint16_t used_f_no_notify = 1;      // §2.7.10: device asks for no kicks

// Bytes of each area for a ring of `n` entries (with the event-index words).
constexpr std::size_t split_desc_bytes(std::uint32_t n) { return 16u * n; }
constexpr std::size_t split_avail_bytes(std::uint32_t n) { return 2u * (3u + n); }
constexpr std::size_t split_used_bytes(std::uint32_t n) { return 6u + 8u * n; }

// Where the three areas are, in our address space. Who writes: desc and avail the driver,
// used the device.
struct SplitRing {
  std::uint32_t size = 0;          // power of two, <= 32768
  SplitDesc* desc = nullptr;       // 16-byte aligned
  std::uint16_t* avail = nullptr;  // [0] flags, [1] idx, [2, 2+size) ring, [2+size] used_event
  std::uint16_t* used = nullptr;   // [0] flags, [1] idx, then UsedElem[size], then avail_event; 4-aligned

  std::uint16_t* avail_idx() const noexcept { return avail + 1; }
  std::uint16_t* avail_ring() const noexcept { return avail + 2; }
  std::uint16_t* used_event() const noexcept { return avail + 2 + size; }
  std::uint16_t* used_idx() const noexcept { return used + 1; }
  UsedElem* used_ring() const noexcept { return reinterpret_cast<UsedElem*>(used + 2); }
  std::uint16_t* avail_event() const noexcept { return reinterpret_cast<std::uint16_t*>(used_ring() + size); }
};

// Checks size (power of two, 1..32768) and alignments (§2.7 table: 16, 2, 4). Control path.
Result<void> check_split_ring(const SplitRing& ring);

}  // namespace ws::virtio
