// net_vhost hot path: the port's RX queue takes chains from the frontend's TX ring and copies them
// into mbufs; its TX queue copies mbufs into the frontend's RX ring (one chain per packet, or
// several with MRG_RXBUF). Variants (split/packed x mergeable) are template instances picked when
// the ring starts; a burst never branches on a feature.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "ws/core/cpu.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/port/port.hpp"
#include "ws/virtio/net_hdr.hpp"
#include "ws/virtio/net_offload.hpp"
#include "ws/virtio/packed.hpp"
#include "ws/virtio/split.hpp"

namespace ws::vhost_pmd {

using virtio::DefaultChain;
using virtio::Pop;

struct RingSlot;
using DequeueFn = std::uint16_t (*)(RingSlot&, PktmbufPool&, RxQueueCounters&, Mbuf**, std::uint16_t) noexcept;
using EnqueueFn = std::uint16_t (*)(RingSlot&, TxQueueCounters&, Mbuf**, std::uint16_t) noexcept;

// Extra per-ring counters beyond the port's (xstats).
struct RingCounters {
  Counter bad_packet;   // chain shorter than the header, longer than 64 KiB, or a bad header
  Counter too_small;    // RX buffer chain too small for the packet (without MRG_RXBUF)
  Counter notify;       // interrupts sent through the call fd
};

// One virtqueue of the frontend as the backend runs it. The control thread starts and stops it
// (ring_started/ring_stopped); the polling lcore enters it around each burst.
struct alignas(cache_line_bytes) RingSlot {
  std::atomic<bool> ready{false};    // started (SET_VRING_KICK) and not stopped
  std::atomic<bool> enabled{false};  // SET_VRING_ENABLE; a disabled ring is not polled
  std::atomic<bool> busy{false};
  virtio::SplitDevice<> split;
  virtio::PackedDevice<> packed;
  DequeueFn dequeue = nullptr;
  EnqueueFn enqueue = nullptr;
  int call_fd = -1;  // our dup of the frontend's call eventfd
  virtio::HdrOffloads offload;  // what the frontend takes in our headers (offload variants only)
  virtio::QueueHealth health;
  RingCounters counters;
  DefaultChain chains[17];  // scratch: up to 17 chains for one mergeable 64 KiB packet

  // Polling lcore: false when the ring is not running (the burst then does nothing).
  bool enter() noexcept {
    // seq_cst store then seq_cst load, paired with stop()'s store of ready then load of busy:
    // either stop() sees us busy and waits, or we see ready == false.
    busy.store(true, std::memory_order_seq_cst);
    if (!ready.load(std::memory_order_seq_cst) || !enabled.load(std::memory_order_relaxed)) {
      busy.store(false, std::memory_order_release);
      return false;
    }
    return true;
  }
  void leave() noexcept { busy.store(false, std::memory_order_release); }  // pairs with stop()'s load
  // Control thread: after it returns, no lcore touches the ring until it is started again.
  void stop() noexcept {
    ready.store(false, std::memory_order_seq_cst);
    while (busy.load(std::memory_order_seq_cst)) cpu_pause();
  }
  void notify() noexcept {
    const std::uint64_t one = 1;
    if (call_fd >= 0) {
      counters.notify.add(1);
      [[maybe_unused]] auto r = ::write(call_fd, &one, sizeof one);
    }
  }
};

template <bool Packed>
inline auto& engine(RingSlot& s) noexcept {
  if constexpr (Packed) return s.packed; else return s.split;
}
template <bool Packed>
inline void push_used(RingSlot& s, const DefaultChain& c, std::uint32_t len) noexcept {
  if constexpr (Packed) s.packed.push_used(c.id, len, c.ring_descs); else s.split.push_used(c.id, len);
}

inline constexpr std::uint32_t max_packet_bytes = 65535 + virtio::net_hdr_bytes;

// Copies a readable chain (header first) into a chain of mbufs. Returns nullptr when the pool
// ran dry (counted by the caller) or the chain is malformed (counted here).
inline Mbuf* copy_from_chain(const DefaultChain& c, PktmbufPool& pool, RingSlot& slot, bool& nombuf,
                             virtio::NetHdr& hdr) noexcept {
  nombuf = false;
  if (c.readable_bytes < virtio::net_hdr_bytes || c.readable_bytes > max_packet_bytes) [[unlikely]] {
    slot.counters.bad_packet.add(1);
    return nullptr;
  }
  Mbuf* head = pool.alloc();
  if (head == nullptr) [[unlikely]] {
    nombuf = true;
    return nullptr;
  }
  const auto total = static_cast<std::uint32_t>(c.readable_bytes - virtio::net_hdr_bytes);
  // The header is copied once (double fetch) and checked against the packet behind it.
  std::uint32_t skip = virtio::net_hdr_bytes, hdr_got = 0;
  Mbuf* m = head;
  for (std::uint16_t i = 0; i < c.readable; ++i) {
    const std::byte* src = c.seg[i].host;
    std::uint32_t len = c.seg[i].len;
    if (skip > 0) {
      const std::uint32_t h = len < skip ? len : skip;
      std::memcpy(reinterpret_cast<std::byte*>(&hdr) + hdr_got, src, h);
      hdr_got += h;
      skip -= h;
      src += h;
      len -= h;
    }
    while (len > 0) {
      std::uint16_t room = m->tailroom();
      if (room == 0) {
        Mbuf* next = pool.alloc();
        if (next == nullptr) [[unlikely]] {
          mbuf_free(head);
          nombuf = true;
          return nullptr;
        }
        m->next = next;
        ++head->nb_segs;
        m = next;
        room = m->tailroom();
      }
      const std::uint16_t n = static_cast<std::uint16_t>(len < room ? len : room);
      std::memcpy(m->data() + m->data_len, src, n);
      m->data_len = static_cast<std::uint16_t>(m->data_len + n);
      src += n;
      len -= n;
    }
  }
  if (virtio::check_net_hdr(hdr, total) != virtio::NetHdrCheck::ok) [[unlikely]] {
    slot.counters.bad_packet.add(1);
    mbuf_free(head);
    return nullptr;
  }
  head->pkt_len = total;
  return head;
}

// Frontend TX ring -> mbufs (the port's rx_burst). Offload: the header's checksum/GSO fields
// become mbuf flags (net_offload.hpp).
template <bool Packed, bool Offload>
std::uint16_t dequeue(RingSlot& s, PktmbufPool& pool, RxQueueCounters& counters, Mbuf** pkts,
                      std::uint16_t n) noexcept {
  auto& dev = engine<Packed>(s);
  DefaultChain& c = s.chains[0];
  std::uint16_t got = 0, used = 0;
  std::uint64_t bytes = 0;
  while (got < n) {
    if (dev.pop(c) != Pop::chain) break;
    bool nombuf;
    virtio::NetHdr hdr;
    Mbuf* m = copy_from_chain(c, pool, s, nombuf, hdr);
    if (nombuf) [[unlikely]] {
      if constexpr (Packed) dev.unpop(c.ring_descs); else dev.unpop(1);
      counters.nombuf.add(1);
      break;
    }
    push_used<Packed>(s, c, 0);
    ++used;
    if (m == nullptr) [[unlikely]] {
      counters.errors.add(1);
      continue;
    }
    if constexpr (Offload) virtio::rx_net_hdr_to_offload(hdr, *m);
    bytes += m->pkt_len;
    pkts[got++] = m;
  }
  if (used > 0) {
    dev.flush_used();
    if (dev.needs_notify()) s.notify();
  }
  counters.packets.add(got);
  counters.bytes.add(bytes);
  return got;
}

// Copies `m` (header first) into the writable segments of chains[0..k).
inline void copy_to_chains(RingSlot& s, std::uint16_t k, const Mbuf* m, std::uint32_t* written,
                           virtio::NetHdr hdr) noexcept {
  hdr.num_buffers = k;
  const std::byte* src = reinterpret_cast<const std::byte*>(&hdr);
  std::uint32_t left = virtio::net_hdr_bytes;
  bool in_header = true;
  const Mbuf* seg = m;
  for (std::uint16_t ci = 0; ci < k; ++ci) {
    const DefaultChain& c = s.chains[ci];
    written[ci] = 0;
    for (std::uint16_t i = c.readable; i < c.segments; ++i) {
      std::byte* dst = c.seg[i].host;
      std::uint32_t room = c.seg[i].len;
      while (room > 0) {
        if (left == 0) {
          if (in_header) {
            in_header = false;
          } else {
            seg = seg->next;
          }
          while (seg != nullptr && seg->data_len == 0) seg = seg->next;
          if (seg == nullptr) return;
          src = reinterpret_cast<const std::byte*>(seg->data());
          left = seg->data_len;
        }
        const std::uint32_t n = left < room ? left : room;
        std::memcpy(dst, src, n);
        dst += n;
        src += n;
        left -= n;
        room -= n;
        written[ci] += n;
      }
    }
  }
}

// mbufs -> frontend RX ring (the port's tx_burst). The mbufs are freed: the data was copied.
// Offload: TX checksum/TSO requests go into the header (net_offload.hpp).
template <bool Packed, bool Mergeable, bool Offload>
std::uint16_t enqueue(RingSlot& s, TxQueueCounters& counters, Mbuf** pkts, std::uint16_t n) noexcept {
  auto& dev = engine<Packed>(s);
  std::uint16_t sent = 0, used = 0;
  std::uint64_t bytes = 0;
  constexpr std::uint16_t max_chains = Mergeable ? 17 : 1;
  for (; sent < n; ++sent) {
    Mbuf* m = pkts[sent];
    virtio::NetHdr hdr{};
    if constexpr (Offload) {
      if (!virtio::tx_offload_to_net_hdr(*m, hdr, s.offload)) [[unlikely]] {
        counters.errors.add(1);  // a request the frontend cannot take (TSO without GUEST_TSO)
        mbuf_free(m);
        pkts[sent] = nullptr;
        continue;
      }
    }
    const std::uint64_t need = std::uint64_t{m->pkt_len} + virtio::net_hdr_bytes;
    std::uint64_t room = 0;
    std::uint16_t k = 0;
    std::uint32_t descs = 0;
    while (room < need && k < max_chains) {
      if (dev.pop(s.chains[k]) != Pop::chain) break;
      room += s.chains[k].writable_bytes;
      descs += s.chains[k].ring_descs;
      ++k;
    }
    if (room < need) {
      if constexpr (Packed) dev.unpop(descs); else dev.unpop(k);
      if (k == max_chains || (k > 0 && !Mergeable)) [[unlikely]] {
        // The buffers offered are too small for this packet: drop it, keep the buffers.
        s.counters.too_small.add(1);
        counters.errors.add(1);
        mbuf_free(pkts[sent]);
        pkts[sent] = nullptr;
        continue;
      }
      break;  // ring empty (or broken): the rest stays with the caller
    }
    std::uint32_t written[17];
    copy_to_chains(s, k, m, written, hdr);
    for (std::uint16_t i = 0; i < k; ++i) push_used<Packed>(s, s.chains[i], written[i]);
    used = static_cast<std::uint16_t>(used + k);
    bytes += m->pkt_len;
  }
  if (used > 0) {
    dev.flush_used();
    if (dev.needs_notify()) s.notify();
  }
  std::uint16_t ok = 0;
  for (std::uint16_t i = 0; i < sent; ++i)
    if (pkts[i] != nullptr) ++ok;
  mbuf_free_bulk(std::span<Mbuf* const>(pkts, sent));  // nullptr entries: dropped above
  if (sent < n) counters.full.add(n - sent);
  counters.packets.add(ok);
  counters.bytes.add(bytes);
  return sent;
}

}  // namespace ws::vhost_pmd
