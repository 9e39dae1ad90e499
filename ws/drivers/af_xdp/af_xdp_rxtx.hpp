// SPDX-License-Identifier: BSD-3-Clause
// net_af_xdp hot path (Documentation/networking/af_xdp.rst): RX takes descriptors from the RX
// ring, copies each frame into an mbuf and hands the frame straight back on the fill ring; TX
// copies packets into free UMEM frames, posts them on the TX ring, and recycles frames from the
// completion ring. Wakeups only when the kernel asks (XDP_USE_NEED_WAKEUP); with preferred busy
// polling an empty RX poll calls recvfrom() so the kernel runs the queue's NAPI in our context.
//
// Offloaded queue rules: the XDP program may send a frame that arrived on interface queue i to
// port queue N. The kernel delivers a frame only to a socket bound to the queue it arrived on,
// so queue N also reads the RX ring of one more socket per other queue i, bound to queue i and
// sharing its UMEM and fill ring (MovedRx). The fill ring has one producer, queue i: queue N
// copies the frame and hands its address back to queue i through a single-producer
// single-consumer ring, and queue i puts it on its fill ring.
#pragma once
#include <sys/socket.h>
#include <xdp/xsk.h>

#include <atomic>
#include <cstring>

#include "ws/core/mbuf.hpp"
#include "ws/core/ring.hpp"
#include "ws/port/port.hpp"

namespace ws::af_xdp_pmd {

// Frames the XDP program moved to this port queue from another interface queue: the RX ring of
// a socket bound to that queue, the owner's UMEM, and the ring back to the owner (which holds
// every frame of that UMEM's RX half, so it never fills).
struct MovedRx {
  xsk_ring_cons rx{};
  std::uint8_t* umem = nullptr;
  Ring<std::uint64_t>* back = nullptr;
};

struct alignas(cache_line_bytes) RxQueue : QueueBase {
  xsk_ring_cons rx{};
  xsk_ring_prod fill{};
  std::uint8_t* umem = nullptr;
  int fd = -1;
  PktmbufPool* pool = nullptr;
  std::uint16_t port = 0;
  // Frames waiting to go back on the fill ring: the kernel publishes its fill-ring consumer
  // index lazily, so the ring may briefly look fuller than it is.
  std::uint64_t* stash = nullptr;  // capacity: every RX frame
  std::uint32_t stashed = 0;
  bool busy_poll = false;
  // Offloaded queue rules (see the top of the file): read only while *moving, which the port
  // sets before the XDP program moves its first frame.
  const std::atomic<bool>* moving = nullptr;
  MovedRx* moved = nullptr;  // moved_count rings, one per other interface queue
  std::uint32_t moved_count = 0;
  Ring<std::uint64_t>** returns = nullptr;  // return_count rings of this UMEM's frames coming back
  std::uint32_t return_count = 0;
  RxQueueCounters counters;

  void refill(const std::uint64_t* addrs, std::uint32_t n) noexcept {
    std::uint32_t idx = 0;
    const std::uint32_t room = xsk_prod_nb_free(&fill, n);
    const std::uint32_t put = std::min(room, n);
    if (put && xsk_ring_prod__reserve(&fill, put, &idx) == put) {
      for (std::uint32_t i = 0; i < put; ++i) *xsk_ring_prod__fill_addr(&fill, idx + i) = addrs[i];
      xsk_ring_prod__submit(&fill, put);
    } else {
      std::memmove(stash + stashed, addrs, sizeof(std::uint64_t) * n);
      stashed += n;
      return;
    }
    if (put < n) {
      std::memmove(stash + stashed, addrs + put, sizeof(std::uint64_t) * (n - put));
      stashed += n - put;
    }
  }

  // Copies the `got` frames at idx of `ring` (in `base`) into the mbufs at pkts, allocated
  // already, and releases them from the ring; their UMEM addresses go to addrs. Returns the
  // mbufs kept (pkts is compacted).
  std::uint32_t copy_in(xsk_ring_cons& ring, std::uint8_t* base, std::uint32_t idx, std::uint32_t got, Mbuf** pkts,
                        std::uint64_t* addrs) noexcept {
    std::uint64_t bytes = 0;
    std::uint32_t kept = 0;
    for (std::uint32_t i = 0; i < got; ++i) {
      const xdp_desc* d = xsk_ring_cons__rx_desc(&ring, idx + i);
      addrs[i] = xsk_umem__extract_addr(d->addr);
      Mbuf* m = pkts[i];
      m->data_off = m->headroom_default;
      if (d->len > static_cast<std::uint32_t>(m->buf_len - m->data_off)) [[unlikely]] {
        // A frame larger than the mbuf's room (--mbuf-size below the UMEM frame): dropped and
        // counted, never cut short.
        counters.errors.add(1);
        pool->mempool().put(m);
        continue;
      }
      const auto len = static_cast<std::uint16_t>(d->len);
      std::memcpy(m->data(), xsk_umem__get_data(base, d->addr), len);
      m->data_len = len;
      m->pkt_len = len;
      m->ol_flags = 0;
      m->packet_type = 0;
      m->vlan_tci = 0;
      m->tx_offload = 0;
      m->port = port;
      pkts[kept++] = m;
      bytes += len;
    }
    xsk_ring_cons__release(&ring, got);
    counters.packets.add(kept);
    counters.bytes.add(bytes);
    return kept;
  }

  // Frames of this queue's UMEM that other port queues took: back on the fill ring.
  void take_back() noexcept {
    std::uint64_t addrs[mbuf_max_burst];
    for (std::uint32_t r = 0; r < return_count; ++r)
      if (const std::uint32_t k = returns[r]->dequeue_burst(std::span(addrs)); k) refill(addrs, k);
  }

  // Frames the XDP program moved here from other interface queues; each goes back to its owner.
  std::uint32_t take_moved(Mbuf** pkts, std::uint32_t n) noexcept {
    std::uint32_t kept = 0;
    for (std::uint32_t s = 0; s < moved_count && kept < n; ++s) {
      MovedRx& from = moved[s];
      std::uint32_t idx = 0;
      const std::uint32_t got = xsk_ring_cons__peek(&from.rx, n - kept, &idx);
      if (got == 0) continue;
      if (!pool->raw_alloc_bulk(std::span<Mbuf*>(pkts + kept, got))) [[unlikely]] {
        xsk_ring_cons__cancel(&from.rx, got);
        counters.nombuf.add(got);
        break;
      }
      std::uint64_t addrs[mbuf_max_burst];
      kept += copy_in(from.rx, from.umem, idx, got, pkts + kept, addrs);
      from.back->enqueue_burst(std::span<const std::uint64_t>(addrs, got));
    }
    return kept;
  }

  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    if (stashed) [[unlikely]] {
      std::uint64_t retry[mbuf_max_burst * 4];
      const std::uint32_t k = std::min<std::uint32_t>(stashed, mbuf_max_burst * 4);
      stashed -= k;
      std::memcpy(retry, stash + stashed, sizeof(std::uint64_t) * k);
      refill(retry, k);
    }
    const bool moving_now = moving != nullptr && moving->load(std::memory_order_relaxed);
    if (moving_now) [[unlikely]]
      take_back();
    std::uint32_t idx = 0;
    const std::uint32_t got = xsk_ring_cons__peek(&rx, n, &idx);
    if (got == 0) {
      // The kernel sleeps until woken when the fill ring ran dry (need-wakeup mode); busy
      // polling needs the call to run the NAPI context at all.
      if (busy_poll || xsk_ring_prod__needs_wakeup(&fill)) ::recvfrom(fd, nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
      return moving_now ? static_cast<std::uint16_t>(take_moved(pkts, n)) : 0;
    }
    if (!pool->raw_alloc_bulk(std::span<Mbuf*>(pkts, got))) [[unlikely]] {
      xsk_ring_cons__cancel(&rx, got);  // the frames stay in the ring for the next call
      counters.nombuf.add(got);
      return 0;
    }
    std::uint64_t addrs[mbuf_max_burst];
    std::uint32_t kept = copy_in(rx, umem, idx, got, pkts, addrs);
    refill(addrs, got);  // every frame we took goes straight back
    if (moving_now && kept < n) [[unlikely]]
      kept += take_moved(pkts + kept, n - kept);
    return static_cast<std::uint16_t>(kept);
  }
};

struct alignas(cache_line_bytes) TxQueue : QueueBase {
  xsk_ring_prod tx{};
  xsk_ring_cons comp{};
  std::uint8_t* umem = nullptr;
  int fd = -1;
  std::uint32_t frame_bytes = 0;
  std::uint64_t* free_frames = nullptr;  // stack of UMEM addresses not in flight
  std::uint32_t free_count = 0;
  TxQueueCounters counters;

  void reclaim() noexcept {
    std::uint32_t idx = 0;
    const std::uint32_t done = xsk_ring_cons__peek(&comp, mbuf_max_burst, &idx);
    for (std::uint32_t i = 0; i < done; ++i) free_frames[free_count++] = *xsk_ring_cons__comp_addr(&comp, idx + i);
    if (done) xsk_ring_cons__release(&comp, done);
  }

  // Takes what fits in free frames and TX slots; oversized packets are taken and counted as errors.
  std::uint16_t tx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    reclaim();
    std::uint32_t want = std::min<std::uint32_t>(n, free_count);
    std::uint32_t idx = 0;
    if (want == 0 || xsk_ring_prod__reserve(&tx, want, &idx) != want) [[unlikely]] {
      if (xsk_ring_prod__needs_wakeup(&tx)) ::sendto(fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0);
      counters.full.add(n);
      return 0;
    }
    std::uint32_t posted = 0;
    std::uint64_t bytes = 0;
    for (std::uint32_t i = 0; i < want; ++i) {
      Mbuf* m = pkts[i];
      if (m->pkt_len > frame_bytes) [[unlikely]] {
        counters.errors.add(1);
        continue;
      }
      const std::uint64_t addr = free_frames[--free_count];
      std::uint8_t* dst = static_cast<std::uint8_t*>(xsk_umem__get_data(umem, addr));
      for (const Mbuf* s = m; s; s = s->next) {
        std::memcpy(dst, s->data(), s->data_len);
        dst += s->data_len;
      }
      xdp_desc* d = xsk_ring_prod__tx_desc(&tx, idx + posted);
      d->addr = addr;
      d->len = m->pkt_len;
      ++posted;
      bytes += m->pkt_len;
    }
    tx.cached_prod -= want - posted;  // give back the slots of oversized packets
    xsk_ring_prod__submit(&tx, posted);
    // Copy mode always needs the kick; zero-copy drivers only when they ask.
    if (xsk_ring_prod__needs_wakeup(&tx)) ::sendto(fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0);
    mbuf_free_bulk(std::span<Mbuf* const>(pkts, want));
    if (want < n) counters.full.add(n - want);
    counters.packets.add(posted);
    counters.bytes.add(bytes);
    return static_cast<std::uint16_t>(want);
  }
};

}  // namespace ws::af_xdp_pmd
