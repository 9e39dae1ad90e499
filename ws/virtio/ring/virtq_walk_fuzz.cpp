// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target for the device-side descriptor walkers (split and packed): the input is the
// guest's memory (rings, tables, buffers) plus a mode byte. No crash, no UB, and every segment
// a walk returns lies inside one region; refusals always leave the queue broken.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "ws/virtio/ring/packed_device.hpp"
#include "ws/virtio/ring/split_device.hpp"

namespace {

using namespace ws::virtio;

constexpr std::size_t region_bytes = 16 * 1024;
constexpr std::uint64_t guest_a = 0x1000;
constexpr std::uint64_t guest_b = guest_a + region_bytes;  // adjacent in guest space, not on the host

struct Region {
  std::unique_ptr<std::byte[]> host{new std::byte[region_bytes]};
};

template <class C>
void check_segments(const C& c, const Region& a, const Region& b) {
  if (c.segments > c.seg.size() || c.readable > c.segments) std::abort();
  for (std::uint16_t i = 0; i < c.segments; ++i) {
    const Segment& s = c.seg[i];
    const bool in_a = s.host >= a.host.get() && s.host + s.len <= a.host.get() + region_bytes;
    const bool in_b = s.host >= b.host.get() && s.host + s.len <= b.host.get() + region_bytes;
    if (!in_a && !in_b) std::abort();
    volatile std::uint8_t sink = 0;
    if (s.len > 0) sink = std::to_integer<std::uint8_t>(s.host[s.len - 1]);  // ASan checks the bound
    (void)sink;
  }
}

template <class Device>
void run(Device& dev, QueueHealth& health, const Region& a, const Region& b, bool packed) {
  typename Device::ChainT c;
  for (int i = 0; i < 64; ++i) {
    const Pop r = dev.pop(c);
    if (r == Pop::empty) break;
    if (r == Pop::broken) {
      if (!health.broken() || health.total() != 1) std::abort();
      if (dev.pop(c) != Pop::broken) std::abort();
      break;
    }
    check_segments(c, a, b);
    if constexpr (requires { dev.push_used(c.id, 0u, c.ring_descs); }) {
      dev.push_used(c.id, static_cast<std::uint32_t>(c.writable_bytes), c.ring_descs);
    } else {
      dev.push_used(c.id, static_cast<std::uint32_t>(c.writable_bytes));
      dev.flush_used();
    }
    (void)dev.needs_notify();
    (void)packed;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::uint8_t mode = data[0];
  const bool packed = mode & 1;
  const bool indirect = mode & 2;
  const bool event_idx = mode & 4;
  const std::uint16_t base = static_cast<std::uint16_t>(data[1] | ((mode & 0x80) ? 0x8000 : 0));
  data += 2;
  size -= 2;
  Region a, b;
  std::memset(a.host.get(), 0, region_bytes);
  std::memset(b.host.get(), 0, region_bytes);
  std::memcpy(a.host.get(), data, size < region_bytes ? size : region_bytes);
  if (size > region_bytes) std::memcpy(b.host.get(), data + region_bytes, std::min(size - region_bytes, region_bytes));

  GuestMemory mem;
  if (!mem.add({guest_a, guest_a, region_bytes, a.host.get()}) ||
      !mem.add({guest_b, guest_b, region_bytes, b.host.get()}))
    std::abort();
  QueueHealth health;
  if (packed) {
    PackedRing ring;
    ring.size = 1u + ((mode >> 3) & 0xf) * 4;  // 1..61, not only powers of two
    ring.desc = reinterpret_cast<PackedDesc*>(a.host.get());
    ring.driver_event = reinterpret_cast<EventSuppress*>(a.host.get() + 1024);
    ring.device_event = reinterpret_cast<EventSuppress*>(a.host.get() + 1028);
    if (!check_packed_ring(ring)) std::abort();
    PackedDevice<16> dev;
    dev.init(ring, &mem, &health, indirect, event_idx, static_cast<std::uint16_t>(base % ring.size | (base & 0x8000)));
    run(dev, health, a, b, true);
  } else {
    SplitRing ring;
    ring.size = 1u << ((mode >> 3) & 0x7);  // 1..128
    ring.desc = reinterpret_cast<SplitDesc*>(a.host.get());
    ring.avail = reinterpret_cast<std::uint16_t*>(a.host.get() + 2048);
    ring.used = reinterpret_cast<std::uint16_t*>(a.host.get() + 2048 + 512);
    if (!check_split_ring(ring)) std::abort();
    SplitDevice<16> dev;
    dev.init(ring, &mem, &health, indirect, event_idx);  // resumes at the used index the input holds
    run(dev, health, a, b, false);
  }
  return 0;
}
