// SPDX-License-Identifier: BSD-3-Clause
// Extended statistics under DPDK 22.11's names: the generic ones rte_ethdev gives every port,
// and the per-queue traffic classes (multicast, broadcast, RFC 2819 size bins) that DPDK's
// virtio PMD and vhost library count, with one counting helper for every driver that has them.
#pragma once
#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ws/core/mbuf.hpp"
#include "ws/port/stats.hpp"

namespace ws {

/// v[q], or 0 past v's end (a per-queue PortStats vector of a port with fewer queues).
inline std::uint64_t queue_stat(const std::vector<std::uint64_t>& v, std::size_t q) noexcept {
  return q < v.size() ? v[q] : 0;
}

/// rte_ethdev's generic xstats of `s`: the eight port totals, then, with `per_queue` (DPDK's
/// RTE_ETH_DEV_AUTOFILL_QUEUE_XSTATS, set by every vdev PMD but virtio's), rx_qN_packets,
/// rx_qN_bytes, rx_qN_errors for each RX queue and tx_qN_packets, tx_qN_bytes for each TX queue.
/// rx_qN_errors is rte_eth_stats' q_errors[N], as in DPDK: the vdev PMDs fill it with queue N's
/// failed transmissions.
inline std::vector<XStat> generic_xstats(const PortStats& s, bool per_queue) {
  std::vector<XStat> out = {{"rx_good_packets", s.ipackets}, {"tx_good_packets", s.opackets},
                            {"rx_good_bytes", s.ibytes},     {"tx_good_bytes", s.obytes},
                            {"rx_missed_errors", s.imissed}, {"rx_errors", s.ierrors},
                            {"tx_errors", s.oerrors},        {"rx_mbuf_allocation_errors", s.rx_nombuf}};
  if (!per_queue) return out;
  for (std::size_t q = 0; q < s.q_ipackets.size(); ++q) {
    out.push_back({fmt::format("rx_q{}_packets", q), s.q_ipackets[q]});
    out.push_back({fmt::format("rx_q{}_bytes", q), queue_stat(s.q_ibytes, q)});
    out.push_back({fmt::format("rx_q{}_errors", q), queue_stat(s.q_errors, q)});
  }
  for (std::size_t q = 0; q < s.q_opackets.size(); ++q) {
    out.push_back({fmt::format("tx_q{}_packets", q), s.q_opackets[q]});
    out.push_back({fmt::format("tx_q{}_bytes", q), queue_stat(s.q_obytes, q)});
  }
  return out;
}

/// A queue's multicast and broadcast packets and RFC 2819 size bins, as DPDK's virtio PMD and
/// vhost library count them (virtnet_stats, virtqueue_stats). The polling lcore counts a whole
/// burst at once (count()); any thread reads.
struct PacketClassCounters {
  static constexpr std::size_t bins = 8;
  Counter multicast;        ///< group destination other than broadcast
  Counter broadcast;        ///< ff:ff:ff:ff:ff:ff
  Counter size_bins[bins];  ///< < 64, 64, 65-127, 128-255, 256-511, 512-1023, 1024-1518, > 1518

  /// The bin of a pkt_len, as DPDK: undersize (< 64), 64, then powers of two to 1023, 1024-1518
  /// and the rest.
  static constexpr std::size_t bin(std::uint32_t len) noexcept {
    if (len >= 1024) return 6 + (len > 1518);
    if (len <= 64) return len >> 6;
    return static_cast<std::size_t>(std::bit_width(len)) - 5;
  }

  /// Counts pkts[0, n) and returns how many were not null: null entries (packets a TX burst
  /// dropped) are skipped. One pass over the
  /// burst with local sums, then one store per counter that moved: per packet, only its length and
  /// first destination byte are read (all six for a group address); the burst just touched both.
  std::uint32_t count(Mbuf* const* pkts, std::uint32_t n) noexcept {
    std::uint32_t sums[bins + 2] = {};  // the bins, multicast, broadcast
    std::uint32_t counted = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      const Mbuf* m = pkts[i];
      if (m == nullptr) [[unlikely]]
        continue;
      ++counted;
      ++sums[bin(m->pkt_len)];
      const std::uint8_t* dst = m->data<std::uint8_t>();
      if (dst[0] & 1) [[unlikely]]
        ++sums[bins + (is_broadcast(dst) ? 1 : 0)];
    }
    for (std::size_t b = 0; b < bins; ++b)
      if (sums[b] != 0) size_bins[b].add(sums[b]);
    if (sums[bins] != 0) multicast.add(sums[bins]);
    if (sums[bins + 1] != 0) broadcast.add(sums[bins + 1]);
    return counted;
  }

  /// Appends DPDK's names, `prefix` ("rx_q0_") first: multicast_packets, broadcast_packets,
  /// undersize_packets, size_64_packets ... size_1519_max_packets.
  void append_xstats(std::vector<XStat>& out, std::string_view prefix) const {
    static constexpr std::string_view names[bins] = {
        "undersize_packets",    "size_64_packets",       "size_65_127_packets",    "size_128_255_packets",
        "size_256_511_packets", "size_512_1023_packets", "size_1024_1518_packets", "size_1519_max_packets"};
    out.push_back({fmt::format("{}multicast_packets", prefix), multicast.read()});
    out.push_back({fmt::format("{}broadcast_packets", prefix), broadcast.read()});
    for (std::size_t b = 0; b < bins; ++b) out.push_back({fmt::format("{}{}", prefix, names[b]), size_bins[b].read()});
  }

 private:
  static bool is_broadcast(const std::uint8_t* d) noexcept { return (d[0] & d[1] & d[2] & d[3] & d[4] & d[5]) == 0xff; }
};

/// DPDK's good_packets and good_bytes of a queue (prefix "rx_q0_"), the names virtio and vhost
/// report beside the generic rx_qN_packets.
inline void append_good_xstats(std::vector<XStat>& out, std::string_view prefix, std::uint64_t packets,
                               std::uint64_t bytes) {
  out.push_back({fmt::format("{}good_packets", prefix), packets});
  out.push_back({fmt::format("{}good_bytes", prefix), bytes});
}

}  // namespace ws
