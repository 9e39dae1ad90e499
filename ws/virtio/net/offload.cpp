// SPDX-License-Identifier: BSD-3-Clause
// Offload flags to and from the virtio-net header; see net_offload.hpp for the DPDK behaviour
// each direction follows.
#include "ws/virtio/net/offload.hpp"

#include <cstddef>
#include <cstring>

#include "ws/net/checksum.hpp"
#include "ws/net/headers.hpp"
#include "ws/net/ptype.hpp"

namespace ws::virtio {

bool tx_offload_to_net_hdr_slow(Mbuf& m, NetHdr& h, HdrOffloads peer) noexcept {
  const std::uint64_t f = m.ol_flags;
  const bool tso = (f & mbuf_flag::tx_tcp_seg) != 0;
  const bool ipv6 = (f & mbuf_flag::tx_ipv6) != 0;
  if (tso && (m.tso_segsz == 0 || !(ipv6 ? peer.tso6 : peer.tso4))) return false;
  if (!peer.csum) return apply_tx_checksums(m);  // the peer cannot complete checksums: do them here
  const std::uint64_t l4 = tso ? mbuf_flag::tx_tcp_cksum : (f & mbuf_flag::tx_l4_mask);
  const bool tcp = l4 == mbuf_flag::tx_tcp_cksum;
  const std::uint32_t l4_off = m.l2_len + m.l3_len;
  const std::uint32_t l4_hdr = l4 == 0 ? 0 : (tcp ? sizeof(TcpHdr) : sizeof(UdpHdr));
  if (m.l3_len == 0 || l4_off + l4_hdr > m.data_len || l4_off > m.pkt_len) return false;
  if (tso && (m.l4_len < sizeof(TcpHdr) || l4_off + m.l4_len > m.data_len)) return false;  // hdr_len must hold
  std::uint8_t* l3 = m.data() + m.l2_len;
  if (f & mbuf_flag::tx_ip_cksum) {  // no IP checksum offload in virtio: in software, as DPDK's vhost
    auto* ip = reinterpret_cast<Ipv4Hdr*>(l3);
    ip->hdr_checksum = ipv4_cksum(*ip);
  }
  if (l4 == mbuf_flag::tx_tcp_cksum || l4 == mbuf_flag::tx_udp_cksum) {
    // The field holds the pseudo-header sum (not complemented); the peer sums from csum_start to
    // the end and stores the complement there (virtio 1.2 §5.1.6.2). Full length, as Linux.
    const std::uint32_t l4_len = m.pkt_len - l4_off;
    const std::uint8_t proto = tcp ? ip_proto_tcp : ip_proto_udp;
    const std::uint16_t ph = ipv6 ? fold_sum(ipv6_pseudo_sum(*reinterpret_cast<const Ipv6Hdr*>(l3), l4_len, proto))
                                  : fold_sum(ipv4_pseudo_sum(*reinterpret_cast<const Ipv4Hdr*>(l3), l4_len));
    const std::size_t field = tcp ? offsetof(TcpHdr, cksum) : offsetof(UdpHdr, dgram_cksum);
    std::memcpy(m.data() + l4_off + field, &ph, 2);
    h.flags = NetHdr::f_needs_csum;
    h.csum_start = static_cast<std::uint16_t>(l4_off);
    h.csum_offset = static_cast<std::uint16_t>(field);
  }
  if (tso) {
    h.gso_type = ipv6 ? NetHdr::gso_tcpv6 : NetHdr::gso_tcpv4;
    h.gso_size = m.tso_segsz;
    h.hdr_len = static_cast<std::uint16_t>(l4_off + m.l4_len);
  }
  return true;
}

void rx_net_hdr_to_offload_slow(const NetHdr& h, Mbuf& m) noexcept {
  if (h.flags & NetHdr::f_needs_csum) {
    // Complete the partial checksum (net_vhost's rx_sw_csum, DPDK's default when the application
    // did not ask for RX checksum offload): delivered packets carry a valid checksum.
    const std::uint32_t field = std::uint32_t{h.csum_start} + h.csum_offset;
    if (field + 2 > m.data_len || h.csum_start > m.pkt_len) return;  // field outside the first segment
    std::uint16_t c = static_cast<std::uint16_t>(~fold_sum(mbuf_raw_sum(m, h.csum_start, m.pkt_len - h.csum_start)));
    if (c == 0) c = 0xffff;  // same value in one's complement; UDP's "no checksum" avoided
    std::memcpy(m.data() + field, &c, 2);
    m.ol_flags |= mbuf_flag::rx_l4_cksum_good;
  } else if (h.flags & NetHdr::f_data_valid) {
    classify_outer(m);
    const std::uint32_t l4 = m.packet_type & ptype::l4_mask;
    if (l4 == ptype::l4_tcp || l4 == ptype::l4_udp) m.ol_flags |= mbuf_flag::rx_l4_cksum_good;
  }
  const std::uint8_t gso = h.gso_type & static_cast<std::uint8_t>(~NetHdr::gso_ecn);
  if (gso == NetHdr::gso_tcpv4 || gso == NetHdr::gso_tcpv6) {
    m.tso_segsz = h.gso_size;  // after classify_outer, which clears it
    m.ol_flags |= mbuf_flag::rx_lro;
  }
}

// DPDK's vhost_dequeue_offload_legacy, with our packet parser for its parse_headers.
void rx_net_hdr_to_legacy_offload_slow(const NetHdr& h, Mbuf& m) noexcept {
  auto refuse = [&m] {  // DPDK's "error:" label
    m.l2_len = 0;
    m.l3_len = 0;
    m.ol_flags = 0;
  };
  const PacketInfo p = parse_packet({m.data(), m.data_len}, false);
  const bool v4 = ptype::is_ipv4(p.packet_type), v6 = ptype::is_ipv6(p.packet_type);
  const bool tcp = p.l4_proto == ip_proto_tcp, udp = p.l4_proto == ip_proto_udp;
  const std::uint32_t l4_off = std::uint32_t{p.l2_len} + p.l3_len;
  // Both requests need an IP header and a whole TCP or UDP header in the first segment.
  if ((!v4 && !v6) || (!tcp && !udp) || l4_off + (tcp ? sizeof(TcpHdr) : sizeof(UdpHdr)) > m.data_len) return refuse();
  m.l2_len = p.l2_len;
  m.l3_len = p.l3_len;
  m.ol_flags |= v4 ? mbuf_flag::tx_ipv4 : mbuf_flag::tx_ipv6;
  if (h.flags == NetHdr::f_needs_csum) {  // DPDK compares the whole byte
    if (h.csum_start != l4_off) return refuse();
    if (tcp && h.csum_offset == offsetof(TcpHdr, cksum))
      m.ol_flags |= mbuf_flag::tx_tcp_cksum;
    else if (udp && h.csum_offset == offsetof(UdpHdr, dgram_cksum))
      m.ol_flags |= mbuf_flag::tx_udp_cksum;
    else
      return refuse();  // includes SCTP's offset: no SCTP checksum request here
  }
  if (h.gso_type != NetHdr::gso_none) {
    const std::uint8_t gso = h.gso_type & static_cast<std::uint8_t>(~NetHdr::gso_ecn);
    if (h.gso_size == 0 || !tcp || (gso != NetHdr::gso_tcpv4 && gso != NetHdr::gso_tcpv6))
      return refuse();  // includes UDP GSO: no UDP segmentation request here
    const auto* th = reinterpret_cast<const TcpHdr*>(m.data() + l4_off);
    const std::uint32_t tcp_len = (th->data_off & 0xf0u) >> 2;
    if (tcp_len < sizeof(TcpHdr) || l4_off + tcp_len > m.data_len) return refuse();
    m.ol_flags |= mbuf_flag::tx_tcp_seg;
    m.tso_segsz = h.gso_size;
    m.l4_len = tcp_len;
  }
}

}  // namespace ws::virtio
