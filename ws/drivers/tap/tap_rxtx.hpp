// SPDX-License-Identifier: BSD-3-Clause
// net_tap hot path: one read() per received frame and one writev() per sent frame on the queue's
// TAP file descriptor (non-blocking), as DPDK's tap PMD; the kernel copies in both directions.
#pragma once
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "ws/core/mbuf.hpp"
#include "ws/port/port.hpp"

namespace ws::tap_pmd {

inline constexpr std::uint16_t max_tx_segments = 16;

struct alignas(cache_line_bytes) RxQueue : QueueBase {
  int fd = -1;
  PktmbufPool* pool = nullptr;
  std::uint16_t port = 0;
  RxQueueCounters counters;

  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    std::uint16_t got = 0;
    std::uint64_t bytes = 0;
    while (got < n) {
      Mbuf* m = nullptr;
      if (!pool->raw_alloc_bulk(std::span<Mbuf*>(&m, 1))) [[unlikely]] {
        counters.nombuf.add(1);
        break;
      }
      m->data_off = m->headroom_default;
      const ssize_t len = ::read(fd, m->data(), m->buf_len - m->data_off);
      if (len <= 0) {  // EAGAIN: nothing pending
        pool->mempool().put(m);
        if (len < 0 && errno != EAGAIN) [[unlikely]]
          counters.errors.add(1);
        break;
      }
      m->data_len = static_cast<std::uint16_t>(len);
      m->pkt_len = static_cast<std::uint32_t>(len);
      m->ol_flags = 0;
      m->packet_type = 0;
      m->vlan_tci = 0;
      m->tx_offload = 0;
      m->port = port;
      pkts[got++] = m;
      bytes += static_cast<std::uint64_t>(len);
    }
    counters.packets.add(got);
    counters.bytes.add(bytes);
    return got;
  }
};

struct alignas(cache_line_bytes) TxQueue : QueueBase {
  int fd = -1;
  TxQueueCounters counters;

  // Takes every packet: written, or counted as an error (the kernel refused it) and freed.
  std::uint16_t tx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    std::uint16_t sent = 0;
    std::uint64_t bytes = 0;
    for (std::uint16_t i = 0; i < n; ++i) {
      if (pkts[i]->nb_segs > max_tx_segments) [[unlikely]] {  // writev takes the whole frame or nothing
        counters.errors.add(1);
        continue;
      }
      iovec iov[max_tx_segments];
      int segs = 0;
      for (Mbuf* s = pkts[i]; s && segs < max_tx_segments; s = s->next, ++segs) iov[segs] = {s->data(), s->data_len};
      if (::writev(fd, iov, segs) < 0) [[unlikely]] {
        counters.errors.add(1);
        continue;
      }
      ++sent;
      bytes += pkts[i]->pkt_len;
    }
    mbuf_free_bulk(std::span<Mbuf* const>(pkts, n));
    counters.packets.add(sent);
    counters.bytes.add(bytes);
    return n;
  }
};

}  // namespace ws::tap_pmd
