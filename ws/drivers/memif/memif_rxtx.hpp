// SPDX-License-Identifier: BSD-3-Clause
// net_memif hot path: one queue per ring, copying between mbufs and the ring's buffers, in
// bursts. The queue's state (where the ring and buffers are, the index we own, the index of the
// peer's we last accepted) lives in our private memory; the ring's header and descriptors are
// the peer's to scribble on, so every index and descriptor is read once, into a local, and
// checked before use:
//   - the peer's index may move forward by at most what the ring allows (a head or tail that
//     jumps breaks the ring);
//   - server: a descriptor's region, offset and length must fall inside a region the client
//     added (the regions' bounds are our copy, taken when they were mapped);
//   - client: the buffers are ours, found by slot number, never through the descriptor's region
//     and offset; a length the server wrote must fit the buffer.
// A broken ring receives and sends nothing more; the control thread sees it, logs it once and
// takes the link down (the connection goes; a client comes back with fresh rings).
#pragma once
#include <atomic>
#include <cstdint>

#include "ws/core/burst_gate.hpp"
#include "ws/core/copy.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/drivers/memif/memif_proto.hpp"
#include "ws/port/port.hpp"
#include "ws/virtio/vhost_user/notifier.hpp"

namespace ws::memif_pmd {

using memif::Desc;
using memif::RingHeader;

/// Why a ring broke (xstats rx_qN_<name>, tx_qN_<name>).
enum class RingError : std::uint8_t { index_jump, bad_region, bad_buffer, bad_length, long_chain, count };
inline constexpr const char* ring_error_name(RingError e) noexcept {
  constexpr const char* names[] = {"index_jump", "bad_region", "bad_buffer", "bad_length", "long_chain"};
  return names[static_cast<int>(e)];
}

/// A region as we mapped it: its bounds, our copy.
struct Region {
  std::byte* base = nullptr;
  std::uint64_t size = 0;
};

// A descriptor chain may not span more slots than this (a packet of 64 KiB in 2 KiB buffers is 32).
inline constexpr std::uint16_t max_chain = 64;

/// One ring as a queue runs it. The control thread fills it while the gate is closed.
struct alignas(cache_line_bytes) MemifRing {
  BurstGate gate{false};
  RingHeader* header = nullptr;
  Desc* desc = nullptr;
  std::uint16_t mask = 0;
  std::uint16_t mine = 0;  // the index we own: the client's head, the server's tail
  std::uint16_t seen = 0;  // client: the server's tail as we last took it
  // Server: the client's regions. Client: the ring's first buffer and the buffers' size.
  const Region* regions = nullptr;
  std::uint16_t region_count = 0;
  std::uint32_t buffer_bytes = 0;
  std::uint32_t buffer_offset = 0;  // client: offset of the first buffer in region 0
  std::byte* buffers = nullptr;
  std::atomic<bool> broken{false};
  std::atomic<std::uint8_t> first_error{0};
  std::atomic<std::uint32_t> first_detail{0};
  Counter errors[static_cast<int>(RingError::count)];

  std::uint16_t size() const noexcept { return static_cast<std::uint16_t>(mask + 1u); }
  std::uint16_t load_peer_head() const noexcept {
    // acquire: the descriptors and buffers the client wrote before it moved head.
    return std::atomic_ref<std::uint16_t>(header->head).load(std::memory_order_acquire);
  }
  std::uint16_t load_peer_tail() const noexcept {
    return std::atomic_ref<std::uint16_t>(header->tail).load(std::memory_order_acquire);
  }
  void publish_head(std::uint16_t v) noexcept {
    // release: our descriptors and buffers before the server sees head move.
    std::atomic_ref<std::uint16_t>(header->head).store(v, std::memory_order_release);
  }
  void publish_tail(std::uint16_t v) noexcept {
    std::atomic_ref<std::uint16_t>(header->tail).store(v, std::memory_order_release);
  }
  // One descriptor, read once (two aligned 8-byte loads: the peer may be writing it).
  Desc load_desc(std::uint16_t slot) const noexcept {
    auto* words = reinterpret_cast<std::uint64_t*>(&desc[slot & mask]);
    const std::uint64_t a = std::atomic_ref<std::uint64_t>(words[0]).load(std::memory_order_relaxed);
    const std::uint64_t b = std::atomic_ref<std::uint64_t>(words[1]).load(std::memory_order_relaxed);
    Desc d;
    __builtin_memcpy(&d, &a, 8);
    __builtin_memcpy(reinterpret_cast<std::byte*>(&d) + 8, &b, 8);
    return d;
  }
  void store_desc(std::uint16_t slot, const Desc& d) noexcept { __builtin_memcpy(&desc[slot & mask], &d, sizeof d); }

  // Server: the bytes a descriptor names, or nullptr (and the ring broken) when they are not all
  // inside one of the client's regions.
  std::byte* translate(const Desc& d, std::uint32_t len) noexcept {
    if (d.region >= region_count) [[unlikely]]
      return fail(RingError::bad_region, d.region);
    const Region& r = regions[d.region];
    if (std::uint64_t{d.offset} + len > r.size) [[unlikely]]
      return fail(RingError::bad_buffer, d.offset);
    return r.base + d.offset;
  }
  // Client: slot's buffer, by its number alone.
  std::byte* own_buffer(std::uint16_t slot) const noexcept {
    return buffers + std::size_t{buffer_bytes} * (slot & mask);
  }
  Desc own_desc(std::uint16_t slot, std::uint32_t len, std::uint16_t flags) const noexcept {
    return {flags, 0, len, buffer_offset + buffer_bytes * (slot & mask), 0};
  }

  [[gnu::cold]] std::byte* fail(RingError e, std::uint32_t detail) noexcept {
    errors[static_cast<int>(e)].add(1);
    if (!broken.load(std::memory_order_relaxed)) {
      first_error.store(static_cast<std::uint8_t>(e), std::memory_order_relaxed);
      first_detail.store(detail, std::memory_order_relaxed);
      broken.store(true, std::memory_order_release);  // with first_error: the control thread logs both
    }
    return nullptr;
  }
  bool enter() noexcept {
    if (!gate.enter()) return false;
    if (broken.load(std::memory_order_relaxed)) [[unlikely]] {
      gate.leave();
      return false;
    }
    return true;
  }
};

// Copies packet `m` (any number of segments) into `dst`, which holds pkt_len bytes.
inline void gather(std::byte* dst, const Mbuf* m) noexcept {
  for (; m != nullptr; m = m->next) {
    copy_bytes(dst, m->data(), m->data_len);
    dst += m->data_len;
  }
}

// Copies `len` bytes at `src` to the end of packet `head`, chaining mbufs from `pool` when the
// last one is full; false when the pool ran dry.
[[gnu::cold, gnu::noinline]] bool append_bytes(Mbuf* head, const std::byte* src, std::uint32_t len,
                                               PktmbufPool& pool) noexcept;

/// RX: the server's from a C2S ring, the client's from an S2C ring.
template <bool Server>
struct alignas(cache_line_bytes) MemifRx : QueueBase {
  MemifRing ring;
  PktmbufPool* pool = nullptr;
  std::uint16_t port = 0;
  RxQueueCounters counters;
  // RX interrupts asked for (Port::rx_intr_enable): the ring's MASK_INT is clear, and a ring
  // attached meanwhile starts so.
  std::atomic<bool> armed{false};

  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept;
  // Polling lcore, between bursts: on clears MEMIF_RING_FLAG_MASK_INT, so that the peer writes
  // the ring's eventfd when it fills slots, and returns whether slots were filled before the
  // peer could see it (the caller must not wait then); off sets it again. A ring not attached
  // has nothing to arm: attach() follows `armed`.
  bool set_interrupt(bool on) noexcept {
    armed.store(on, std::memory_order_relaxed);
    if (!ring.enter()) return false;
    std::atomic_ref<std::uint16_t>(ring.header->flags)
        .store(on ? 0 : memif::ring_flag_mask_int, std::memory_order_relaxed);
    bool pending = false;
    if (on) {
      std::atomic_thread_fence(std::memory_order_seq_cst);  // the flag before the peer's index (see MemifTx)
      pending = Server ? ring.load_peer_head() != ring.mine : ring.load_peer_tail() != ring.seen;
    }
    ring.gate.leave();
    return pending;
  }

 private:
  // The slots [from, to) the peer has filled, or -1 (ring broken) when its index jumped.
  std::int32_t filled(std::uint16_t& from, std::uint16_t& to) noexcept;
  // The packet starting at `slot` (chained descriptors), into `m`; slots taken, 0 when its last
  // descriptor is not there yet, -1 when the ring broke or the pool ran dry (`m` freed).
  std::int32_t take_chain(std::uint16_t slot, std::uint16_t end, Mbuf* m) noexcept;
  const std::byte* source(std::uint16_t slot, const Desc& d) noexcept {
    if constexpr (Server) {
      return ring.translate(d, d.length);
    } else {
      if (d.length > ring.buffer_bytes) [[unlikely]]
        return ring.fail(RingError::bad_length, d.length);
      return ring.own_buffer(slot);
    }
  }
  void release(std::uint16_t slot) noexcept;
};

/// TX: the client's into a C2S ring, the server's into an S2C ring.
template <bool Server>
struct alignas(cache_line_bytes) MemifTx : QueueBase {
  MemifRing ring;
  TxQueueCounters counters;
  // The peer's interrupt: the ring's eventfd, written by the notifier's thread (the peer shares
  // its open file description, see notifier.hpp) when the peer's MASK_INT is clear.
  virtio::Notifier* notifier = nullptr;
  std::uint32_t notify_slot = 0;

  std::uint16_t tx_burst(Mbuf** pkts, std::uint16_t n) noexcept;

 private:
  // Slots the peer left us to fill, from ring.mine; -1 (ring broken) when its index jumped.
  std::int32_t free_slots() noexcept;
  // Packet m into the slots from `slot` on (at most `room`); slots used, 0 when it does not fit,
  // -1 when a descriptor was bad.
  std::int32_t put(const Mbuf* m, std::uint16_t slot, std::uint16_t room) noexcept;
};

// ---- RX ----

template <bool Server>
std::int32_t MemifRx<Server>::filled(std::uint16_t& from, std::uint16_t& to) noexcept {
  if constexpr (Server) {
    // C2S: the client's head; we own tail (ring.mine) and took everything before it.
    from = ring.mine;
    to = ring.load_peer_head();
    const auto avail = static_cast<std::uint16_t>(to - from);
    if (avail > ring.size()) [[unlikely]] {
      ring.fail(RingError::index_jump, to);
      return -1;
    }
    return avail;
  } else {
    // S2C: the server's tail may reach our head (ring.mine), never pass it.
    from = ring.seen;
    to = ring.load_peer_tail();
    const auto avail = static_cast<std::uint16_t>(to - from);
    if (avail > static_cast<std::uint16_t>(ring.mine - from)) [[unlikely]] {
      ring.fail(RingError::index_jump, to);
      return -1;
    }
    return avail;
  }
}

template <bool Server>
void MemifRx<Server>::release(std::uint16_t slot) noexcept {
  if constexpr (Server) {
    ring.mine = slot;
    ring.publish_tail(slot);
  } else {
    // Every slot taken goes back to the server at once, refilled with an empty buffer.
    ring.seen = slot;
    const auto head_end = static_cast<std::uint16_t>(slot + ring.size());
    std::uint16_t h = ring.mine;
    for (; h != head_end; ++h) ring.store_desc(h, ring.own_desc(h, ring.buffer_bytes, 0));
    ring.mine = h;
    ring.publish_head(h);
  }
}

template <bool Server>
std::int32_t MemifRx<Server>::take_chain(std::uint16_t slot, std::uint16_t end, Mbuf* m) noexcept {
  std::uint16_t s = slot;
  for (std::uint16_t k = 0;; ++k) {
    if (s == end) return 0;  // the packet's last descriptor is still to come
    if (k == max_chain) [[unlikely]] {
      ring.fail(RingError::long_chain, k);
      mbuf_free(m);
      return -1;
    }
    const Desc d = ring.load_desc(s);
    const std::byte* src = source(s, d);
    if (src == nullptr || !append_bytes(m, src, d.length, *pool)) [[unlikely]] {
      if (src != nullptr) counters.nombuf.add(1);
      mbuf_free(m);
      return -1;
    }
    ++s;
    if (!(d.flags & memif::desc_flag_next)) return static_cast<std::uint16_t>(s - slot);
  }
}

template <bool Server>
std::uint16_t MemifRx<Server>::rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
  if (!ring.enter()) return 0;
  std::uint16_t slot, end;
  const std::int32_t avail = filled(slot, end);
  if (avail <= 0) {
    if constexpr (!Server) {
      if (avail == 0 && ring.mine != static_cast<std::uint16_t>(slot + ring.size())) release(slot);
    }
    ring.gate.leave();
    return 0;
  }
  const auto want = static_cast<std::uint16_t>(avail < n ? avail : n);
  if (!pool->alloc_bulk(std::span<Mbuf*>(pkts, want))) [[unlikely]] {
    counters.nombuf.add(1);
    ring.gate.leave();
    return 0;
  }
  std::uint16_t got = 0;
  std::uint16_t lost = 0;
  std::uint64_t bytes = 0;
  while (got < want && slot != end) {
    Mbuf* m = pkts[got];
    m->port = port;
    const Desc d = ring.load_desc(slot);
    if (!(d.flags & memif::desc_flag_next) && d.length <= std::uint32_t{m->tailroom()}) [[likely]] {
      const std::byte* src = source(slot, d);
      if (src == nullptr) [[unlikely]]
        break;
      copy_bytes(m->data(), src, d.length);
      m->data_len = static_cast<std::uint16_t>(d.length);
      m->pkt_len = d.length;
      ++slot;
    } else {
      const std::int32_t used = take_chain(slot, end, m);
      if (used == 0) break;  // its last descriptor is still to come: m goes back with the rest
      if (used < 0) {
        lost = 1;  // take_chain freed m
        break;
      }
      slot = static_cast<std::uint16_t>(slot + used);
    }
    bytes += m->pkt_len;
    ++got;
  }
  release(slot);
  ring.gate.leave();
  if (got + lost < want) mbuf_free_bulk(std::span<Mbuf* const>(pkts + got + lost, want - got - lost));
  counters.packets.add(got);
  counters.bytes.add(bytes);
  return got;
}

// ---- TX ----

template <bool Server>
std::int32_t MemifTx<Server>::free_slots() noexcept {
  if constexpr (Server) {
    // S2C: the client handed over the slots up to its head.
    const std::uint16_t head = ring.load_peer_head();
    const auto room = static_cast<std::uint16_t>(head - ring.mine);
    if (room > ring.size()) [[unlikely]] {
      ring.fail(RingError::index_jump, head);
      return -1;
    }
    return room;
  } else {
    // C2S: the server's tail moves from where we last saw it up to our head, never past.
    const std::uint16_t tail = ring.load_peer_tail();
    if (static_cast<std::uint16_t>(tail - ring.seen) > static_cast<std::uint16_t>(ring.mine - ring.seen)) [[unlikely]] {
      ring.fail(RingError::index_jump, tail);
      return -1;
    }
    ring.seen = tail;
    return ring.size() - static_cast<std::uint16_t>(ring.mine - tail);
  }
}

template <bool Server>
std::int32_t MemifTx<Server>::put(const Mbuf* m, std::uint16_t slot, std::uint16_t room) noexcept {
  std::uint32_t left = m->pkt_len;
  const Mbuf* seg = m;
  std::uint32_t seg_off = 0;
  for (std::uint16_t used = 0;; ++used) {
    if (used == room || used == max_chain) return 0;  // does not fit now
    const auto s = static_cast<std::uint16_t>(slot + used);
    std::uint32_t cap = ring.buffer_bytes;
    std::byte* dst;
    Desc d{};
    if constexpr (Server) {
      d = ring.load_desc(s);  // the client's buffer: region, offset, capacity in length
      dst = ring.translate(d, d.length);
      if (dst == nullptr) [[unlikely]]
        return -1;
      cap = d.length;
    } else {
      dst = ring.own_buffer(s);
    }
    const std::uint32_t chunk = left < cap ? left : cap;
    for (std::uint32_t done = 0; done < chunk;) {  // gather from the segments
      const std::uint32_t n = std::min<std::uint32_t>(chunk - done, seg->data_len - seg_off);
      copy_bytes(dst + done, seg->data() + seg_off, n);
      done += n;
      seg_off += n;
      if (seg_off == seg->data_len && seg->next != nullptr) seg = seg->next, seg_off = 0;
    }
    left -= chunk;
    const std::uint16_t flags = left != 0 ? memif::desc_flag_next : 0;
    if constexpr (Server) {
      d.length = chunk;
      d.flags = flags;
      ring.store_desc(s, d);
    } else {
      ring.store_desc(s, ring.own_desc(s, chunk, flags));
    }
    if (left == 0) return used + 1;
  }
}

template <bool Server>
std::uint16_t MemifTx<Server>::tx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
  if (!ring.enter()) {
    counters.full.add(n);
    return 0;
  }
  std::int32_t room = free_slots();
  std::uint16_t slot = ring.mine;
  std::uint16_t sent = 0;
  std::uint64_t bytes = 0;
  for (; sent < n && room > 0; ++sent) {
    const Mbuf* m = pkts[sent];
    std::int32_t used;
    if (m->next == nullptr && m->data_len <= ring.buffer_bytes && !Server) [[likely]] {
      copy_bytes(ring.own_buffer(slot), m->data(), m->data_len);
      ring.store_desc(slot, ring.own_desc(slot, m->data_len, 0));
      used = 1;
    } else {
      used = put(m, slot, static_cast<std::uint16_t>(room));
      if (used <= 0) break;
    }
    bytes += m->pkt_len;
    slot = static_cast<std::uint16_t>(slot + used);
    room -= used;
  }
  ring.mine = slot;
  if constexpr (Server) {
    ring.publish_tail(slot);
  } else {
    ring.publish_head(slot);
  }
  if (sent != 0) {
    // The index before the peer's flag, as MemifRx::set_interrupt orders the flag before the
    // index: one of the two sees the other's store, so a peer going to sleep is woken.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const std::uint16_t flags = std::atomic_ref<std::uint16_t>(ring.header->flags).load(std::memory_order_relaxed);
    if (!(flags & memif::ring_flag_mask_int) && notifier != nullptr) notifier->signal(notify_slot);
  }
  ring.gate.leave();
  mbuf_free_bulk(std::span<Mbuf* const>(pkts, sent));
  if (sent < n) counters.full.add(n - sent);
  counters.packets.add(sent);
  counters.bytes.add(bytes);
  return sent;
}

}  // namespace ws::memif_pmd
