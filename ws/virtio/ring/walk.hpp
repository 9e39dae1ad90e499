// SPDX-License-Identifier: BSD-3-Clause
// Device-side chain building shared by split and packed walkers: every descriptor is a copy
// (each field fetched once from guest memory), checked, then translated through GuestMemory.
#pragma once
#include <cstdint>

#include "ws/virtio/ring/guest_memory.hpp"
#include "ws/virtio/ring/virtqueue.hpp"

namespace ws::virtio::detail {

struct DescCopy {
  std::uint64_t addr;
  std::uint32_t len;
  std::uint16_t flags;
  std::uint16_t next_or_id;  // split: next; packed: buffer id
};

inline bool aligned8(const void* p) noexcept { return (reinterpret_cast<std::uintptr_t>(p) & 7) == 0; }

template <class C>
inline void clear(C& c) noexcept {
  c.ring_descs = 0;
  c.readable = 0;
  c.segments = 0;
  c.readable_bytes = 0;
  c.writable_bytes = 0;
}

// Appends a checked copy to the chain; on refusal reports the reason and returns false.
template <class C>
inline bool append(C& c, const GuestMemory& mem, const DescCopy& d, QueueHealth& health) noexcept {
  const bool write = (d.flags & desc_flag::write) != 0;
  if (c.segments == c.seg.size()) [[unlikely]] {
    health.report(QueueError::too_many_segments);
    return false;
  }
  if (!write && c.segments != c.readable) [[unlikely]] {  // virtio 1.2 §2.7.4.2: readable first
    health.report(QueueError::read_after_write);
    return false;
  }
  std::byte* host = mem.translate(d.addr, d.len);
  if (host == nullptr) [[unlikely]] {
    health.report(QueueError::bad_address);
    return false;
  }
  c.seg[c.segments++] = Segment{host, d.len};
  if (write) {
    c.writable_bytes += d.len;
  } else {
    ++c.readable;
    c.readable_bytes += d.len;
  }
  return true;
}

// Maps an indirect table (virtio 1.2 §2.7.5.3 / §2.8.19) after checking its length against the
// ring size; returns its entry count, or 0 after reporting.
inline std::uint32_t map_indirect(const GuestMemory& mem, const DescCopy& d, std::uint32_t ring_size,
                                  const std::byte*& table, QueueHealth& health) noexcept {
  if (d.len == 0 || d.len % 16 != 0 || d.len / 16 > ring_size) {
    health.report(QueueError::indirect_bad_length);
    return 0;
  }
  table = mem.translate(d.addr, d.len);
  if (table == nullptr || !aligned8(table)) {
    health.report(QueueError::bad_address);
    return 0;
  }
  return d.len / 16;
}

}  // namespace ws::virtio::detail
