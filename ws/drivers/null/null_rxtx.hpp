// SPDX-License-Identifier: BSD-3-Clause
// net_null hot path. RX hands out fresh mbufs of a fixed length from the queue's pool (the work
// DPDK's null PMD does: allocate, set lengths); TX counts and frees what it is given.
#pragma once
#include <cstring>

#include "ws/core/mbuf.hpp"
#include "ws/port/port.hpp"

namespace ws::null_pmd {

struct alignas(cache_line_bytes) RxQueue : QueueBase {
  PktmbufPool* pool = nullptr;
  const std::uint8_t* template_packet = nullptr;  // copy=1: bytes written into each packet
  std::uint16_t packet_bytes = 64;
  std::uint16_t port = 0;
  bool no_rx = false;
  RxQueueCounters counters;

  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    if (no_rx) [[unlikely]]
      return 0;
    if (!pool->raw_alloc_bulk(std::span<Mbuf*>(pkts, n))) [[unlikely]] {
      counters.nombuf.add(n);
      return 0;
    }
    for (std::uint16_t i = 0; i < n; ++i) {
      Mbuf* m = pkts[i];
      // Free mbufs already have next == nullptr, nb_segs == 1, refcnt == 1 (see raw_alloc_bulk).
      m->data_off = m->headroom_default;
      m->data_len = packet_bytes;
      m->pkt_len = packet_bytes;
      m->port = port;
      m->ol_flags = 0;
      m->packet_type = 0;
      m->vlan_tci = 0;
      m->tx_offload = 0;
      if (template_packet) std::memcpy(m->data(), template_packet, packet_bytes);
    }
    counters.packets.add(n);
    counters.bytes.add(std::uint64_t{n} * packet_bytes);
    return n;
  }
};

struct alignas(cache_line_bytes) TxQueue : QueueBase {
  std::uint8_t* sink = nullptr;  // copy=1: packet bytes are copied here before the free
  std::uint16_t packet_bytes = 64;
  TxQueueCounters counters;

  std::uint16_t tx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    std::uint64_t bytes = 0;
    for (std::uint16_t i = 0; i < n; ++i) {
      bytes += pkts[i]->pkt_len;
      if (sink) [[unlikely]]
        std::memcpy(sink, pkts[i]->data(), std::min<std::uint32_t>(packet_bytes, pkts[i]->data_len));
    }
    mbuf_free_bulk(std::span<Mbuf* const>(pkts, n));
    counters.packets.add(n);
    counters.bytes.add(bytes);
    return n;
  }
};

}  // namespace ws::null_pmd
