// SPDX-License-Identifier: BSD-3-Clause
// net_ring hot path: RX dequeues mbuf pointers from a ring, TX enqueues them; no copies.
#pragma once
#include "ws/core/mbuf.hpp"
#include "ws/core/ring.hpp"
#include "ws/port/port.hpp"

namespace ws::ring_pmd {

using MbufRing = Ring<Mbuf*>;

// Byte counts need a read of every mbuf, which pointer rings otherwise never touch (DPDK's
// ring PMD counts no bytes), so they are off unless the device asks (count_bytes=1).
struct alignas(cache_line_bytes) RxQueue : QueueBase {
  MbufRing* ring = nullptr;
  bool count_bytes = false;
  RxQueueCounters counters;

  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    const auto got = static_cast<std::uint16_t>(ring->dequeue_burst(std::span<Mbuf*>(pkts, n)));
    counters.packets.add(got);
    if (count_bytes) [[unlikely]] {
      std::uint64_t bytes = 0;
      for (std::uint16_t i = 0; i < got; ++i) bytes += pkts[i]->pkt_len;
      counters.bytes.add(bytes);
    }
    return got;
  }
};

struct alignas(cache_line_bytes) TxQueue : QueueBase {
  MbufRing* ring = nullptr;
  bool count_bytes = false;
  TxQueueCounters counters;

  std::uint16_t tx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    const auto sent = static_cast<std::uint16_t>(ring->enqueue_burst(std::span<Mbuf* const>(pkts, n)));
    if (sent < n) [[unlikely]]
      counters.full.add(n - sent);
    counters.packets.add(sent);
    if (count_bytes) [[unlikely]] {
      std::uint64_t bytes = 0;
      for (std::uint16_t i = 0; i < sent; ++i) bytes += pkts[i]->pkt_len;
      counters.bytes.add(bytes);
    }
    return sent;
  }
};

}  // namespace ws::ring_pmd
