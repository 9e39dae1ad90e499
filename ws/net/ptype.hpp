// SPDX-License-Identifier: BSD-3-Clause
// Packet-type classification: walks Ethernet, up to two VLAN tags, ARP, IPv4 (options), IPv6
// (extension headers), TCP, UDP, ICMP/ICMPv6 and VXLAN, and fills Mbuf::packet_type and the
// l2/l3/l4 lengths. Never reads outside the bytes it is given: a length field that points past
// the data, IHL < 5 or a non-first fragment stops the walk at the last layer that was sound.
#pragma once
#include <cstdint>
#include <span>

#include "ws/core/mbuf.hpp"
#include "ws/net/headers.hpp"

namespace ws {

/// Packet type bits; the values are DPDK's RTE_PTYPE_* so that users' knowledge carries over.
namespace ptype {
inline constexpr std::uint32_t unknown = 0;                       ///< Nothing recognised.
inline constexpr std::uint32_t l2_ether = 0x00000001;             ///< Ethernet.
inline constexpr std::uint32_t l2_ether_arp = 0x00000003;         ///< Ethernet carrying ARP.
inline constexpr std::uint32_t l2_ether_vlan = 0x00000006;        ///< Ethernet with one VLAN tag.
inline constexpr std::uint32_t l2_ether_qinq = 0x00000007;        ///< Ethernet with two VLAN tags.
inline constexpr std::uint32_t l2_mask = 0x0000000f;              ///< The L2 bits.
inline constexpr std::uint32_t l3_ipv4 = 0x00000010;              ///< IPv4 without options (IHL == 5)
inline constexpr std::uint32_t l3_ipv4_ext = 0x00000030;          ///< IPv4 with options
inline constexpr std::uint32_t l3_ipv6 = 0x00000040;              ///< IPv6 without extension headers.
inline constexpr std::uint32_t l3_ipv6_ext = 0x000000c0;          ///< IPv6 with extension headers
inline constexpr std::uint32_t l3_mask = 0x000000f0;              ///< The L3 bits.
inline constexpr std::uint32_t l4_tcp = 0x00000100;               ///< TCP.
inline constexpr std::uint32_t l4_udp = 0x00000200;               ///< UDP.
inline constexpr std::uint32_t l4_frag = 0x00000300;              ///< A fragment (the L4 header may be absent).
inline constexpr std::uint32_t l4_icmp = 0x00000500;              ///< ICMP or ICMPv6
inline constexpr std::uint32_t l4_nonfrag = 0x00000600;           ///< Another L4 protocol, not a fragment.
inline constexpr std::uint32_t l4_mask = 0x00000f00;              ///< The L4 bits.
inline constexpr std::uint32_t tunnel_vxlan = 0x00003000;         ///< VXLAN (UDP port 4789).
inline constexpr std::uint32_t tunnel_mask = 0x0000f000;          ///< The tunnel bits.
inline constexpr std::uint32_t inner_l2_ether = 0x00010000;       ///< Inner Ethernet.
inline constexpr std::uint32_t inner_l2_ether_vlan = 0x00020000;  ///< Inner Ethernet with a VLAN tag.
inline constexpr std::uint32_t inner_l2_mask = 0x000f0000;        ///< The inner L2 bits.
inline constexpr std::uint32_t inner_l3_ipv4 = 0x00100000;        ///< Inner IPv4 without options.
inline constexpr std::uint32_t inner_l3_ipv4_ext = 0x00200000;    ///< Inner IPv4 with options.
inline constexpr std::uint32_t inner_l3_ipv6 = 0x00300000;        ///< Inner IPv6.
inline constexpr std::uint32_t inner_l3_ipv6_ext = 0x00500000;    ///< Inner IPv6 with extension headers.
inline constexpr std::uint32_t inner_l3_mask = 0x00f00000;        ///< The inner L3 bits.
inline constexpr std::uint32_t inner_l4_tcp = 0x01000000;         ///< Inner TCP.
inline constexpr std::uint32_t inner_l4_udp = 0x02000000;         ///< Inner UDP.
inline constexpr std::uint32_t inner_l4_frag = 0x03000000;        ///< Inner fragment.
inline constexpr std::uint32_t inner_l4_icmp = 0x05000000;        ///< Inner ICMP or ICMPv6.
inline constexpr std::uint32_t inner_l4_nonfrag = 0x06000000;     ///< Inner other L4 protocol.
inline constexpr std::uint32_t inner_l4_mask = 0x0f000000;        ///< The inner L4 bits.

/// True for IPv4 with or without options.
constexpr bool is_ipv4(std::uint32_t t) { return (t & l3_mask) == l3_ipv4 || (t & l3_mask) == l3_ipv4_ext; }
/// True for IPv6 with or without extension headers.
constexpr bool is_ipv6(std::uint32_t t) { return (t & l3_mask) == l3_ipv6 || (t & l3_mask) == l3_ipv6_ext; }
}  // namespace ptype

/// What the walk found. Offsets are from the start of the frame. For a VXLAN packet the outer
/// lengths describe the outer Ethernet/IP and l2_len spans outer UDP + VXLAN + inner Ethernet,
/// as DPDK lays out tunnel offload lengths; without a tunnel the outer lengths are zero.
struct PacketInfo {
  std::uint32_t packet_type = 0;       ///< ptype::* bits.
  std::uint16_t l2_len = 0;            ///< Bytes of (inner) L2 header, VLAN tags included.
  std::uint16_t l3_len = 0;            ///< Bytes of (inner) L3 header, options and extensions included.
  std::uint16_t l4_len = 0;            ///< Bytes of (inner) L4 header.
  std::uint16_t outer_l2_len = 0;      ///< Tunnels: bytes of outer L2 header.
  std::uint16_t outer_l3_len = 0;      ///< Tunnels: bytes of outer L3 header.
  std::uint16_t l3_offset = 0;         ///< of the innermost L3 header that was parsed
  std::uint16_t l4_offset = 0;         ///< of the innermost L4 header (valid when l4_len != 0)
  std::uint8_t l4_proto = 0;           ///< IP protocol / IPv6 last next-header
  std::uint8_t vlan_count = 0;         ///< VLAN tags seen (0 to 2).
  std::uint16_t vlan_tci[2] = {0, 0};  ///< outer tag first
};

/// Headers are looked for within the first `max_header_bytes` of a packet; a multi-segment packet
/// whose first segment is shorter than that has its header bytes copied to a stack buffer first.
inline constexpr std::size_t max_header_bytes = 256;

/// Walk the headers in `frame` (one contiguous run of bytes). Pure function; thread-safe.
PacketInfo parse_packet(std::span<const std::uint8_t> frame, bool parse_tunnel = true) noexcept;

/// Classify an mbuf (any number of segments): sets packet_type, l2/l3/l4_len and for tunnels the
/// outer lengths (tso_segsz is cleared: meant for received packets); returns the full result. Touches only this packet;
/// no allocation.
PacketInfo classify(Mbuf& m, bool parse_tunnel = true) noexcept;

/// The per-packet variant for forwarding engines: outer headers only (no tunnel), the same
/// fields set as classify(m, false), no result returned.
void classify_outer(Mbuf& m) noexcept;

/// classify_outer, with the frame most forwarding runs carry parsed inline: Ethernet without
/// tags, IPv4 without options and not a fragment, UDP or TCP, all in the first segment. A few
/// straight-line loads and compares, no call; any other frame goes to classify_outer. The same
/// fields and values either way (ptype_test checks both over every frame it builds).
inline void classify_outer_fast(Mbuf& m) noexcept {
  constexpr std::uint32_t l3_off = sizeof(EtherHdr), l4_off = l3_off + sizeof(Ipv4Hdr);
  const std::uint8_t* p = m.data();
  if (m.data_len >= l4_off + sizeof(UdpHdr) && p[12] == 0x08 && p[13] == 0x00 && p[l3_off] == 0x45) {
    const auto total = static_cast<std::uint16_t>((p[l3_off + 2] << 8) | p[l3_off + 3]);
    const bool fragment =
        ((p[l3_off + 6] << 8 | p[l3_off + 7]) & (ipv4_flag_more_fragments | ipv4_fragment_offset_mask)) != 0;
    const std::uint8_t proto = p[l3_off + 9];
    std::uint32_t l4_len = 0;
    if (proto == ip_proto_udp) {
      l4_len = sizeof(UdpHdr);
    } else if (proto == ip_proto_tcp && m.data_len >= l4_off + sizeof(TcpHdr)) {
      l4_len = static_cast<std::uint32_t>(p[l4_off + 12] >> 4) * 4;
      if (l4_len < sizeof(TcpHdr) || m.data_len < l4_off + l4_len) l4_len = 0;
    }
    if (total >= sizeof(Ipv4Hdr) && !fragment && l4_len != 0) [[likely]] {
      m.packet_type = ptype::l2_ether | ptype::l3_ipv4 | (proto == ip_proto_udp ? ptype::l4_udp : ptype::l4_tcp);
      // l2_len, l3_len, l4_len in one store; tso_segsz and the outer lengths 0 (Mbuf::tx_offload).
      m.tx_offload = sizeof(EtherHdr) | (sizeof(Ipv4Hdr) << 7) | (std::uint64_t{l4_len} << 16);
      return;
    }
  }
  classify_outer(m);
}

/// Copy up to `out.size()` bytes from the start of packet `m` (walking its segments) into `out`;
/// returns how many were copied. For headers of multi-segment packets.
std::size_t copy_front(const Mbuf& m, std::span<std::uint8_t> out) noexcept;

}  // namespace ws
