// SPDX-License-Identifier: BSD-3-Clause
// Software segmentation (TSO/GSO) of TCP/IPv4, TCP/IPv6 and UDP packets: each output segment is
// a fresh header mbuf followed by indirect mbufs sharing the input's payload (no payload copy).
// Driven by Mbuf::tso_segsz, l2/l3/l4_len and ol_flags (tx_tcp_seg, or gso_flag::tx_udp_seg).
#pragma once
#include <cstdint>
#include <span>

#include "ws/core/mbuf.hpp"
#include "ws/core/result.hpp"

namespace ws {

namespace gso_flag {
// UDP segmentation request, DPDK's RTE_MBUF_F_TX_UDP_SEG bit. Kept here until mbuf_flag has it.
// Segments are whole UDP datagrams of tso_segsz payload bytes each (Linux UDP_SEGMENT), not IP
// fragments.
inline constexpr std::uint64_t tx_udp_seg = 1ULL << 42;
}  // namespace gso_flag

struct GsoPools {
  PktmbufPool* header;    // direct mbufs for the copied headers
  PktmbufPool* indirect;  // mbufs attached to the input's buffers
  // true: compute the IPv4 header and TCP/UDP checksums here. false: leave them to the TX port
  // as DPDK's GSO does (tx_ip_cksum / tx_*_cksum set, the L4 field holding the pseudo-header sum).
  bool sw_checksums = true;
};

// Why segmentation was refused (nothing was allocated; the input is untouched and still owned
// by the caller).
enum class GsoError { bad_headers, too_many_segments, no_mbufs };

// Split `pkt` into segments of at most tso_segsz payload bytes, written to `out`; returns their
// count. IPv4 ids count up from the input's, TCP sequence numbers advance by the payload sent,
// FIN/PSH stay on the last segment and CWR on the first; IPv4 header and TCP/UDP checksums are
// computed in software (or requested from the port, see GsoPools) and the segmentation request
// is cleared. On success the
// input's reference is consumed (its buffers live on through the segments). A packet that needs
// no split is returned alone in out[0] (checksums still applied). No locks; allocates only from
// the given pools; safe on any lcore that owns `pkt`.
std::expected<std::uint16_t, GsoError> gso_segment(Mbuf* pkt, const GsoPools& pools, std::span<Mbuf*> out) noexcept;

}  // namespace ws
