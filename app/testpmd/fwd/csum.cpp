// SPDX-License-Identifier: BSD-3-Clause
// csum: dpdk-testpmd's checksum-forward mode. Each packet is parsed (packet type, l2/l3/l4
// lengths); with --enable-rx-cksum its checksums are verified in software when the port gave
// no verdict, and bad ones counted; MAC addresses are rewritten as in mac mode; then the IPv4
// header and TCP/UDP checksums are recomputed in software, or requested from the TX port
// through ol_flags, per FwdConfig::csum of the TX port (`csum set ip|udp|tcp hw|sw <port>`);
// with `tso set <segsz> <port>`, larger TCP packets are handed to the port to segment.
#include <cstring>

#include "app/testpmd/fwd/engine.hpp"
#include "ws/net/checksum.hpp"
#include "ws/net/ptype.hpp"

namespace ws::testpmd {
namespace {

constexpr std::uint64_t rx_cksum_flags =
    mbuf_flag::rx_ip_cksum_good | mbuf_flag::rx_ip_cksum_bad | mbuf_flag::rx_l4_cksum_good | mbuf_flag::rx_l4_cksum_bad;

// Count what the port (or our software check) says about the received checksums.
inline void count_rx_verdict(Stream& s, Mbuf* m) noexcept {
  if (s.config->rx_cksum && (m->ol_flags & rx_cksum_flags) == 0) verify_checksums(*m);
  if (m->ol_flags & mbuf_flag::rx_ip_cksum_bad) s.rx_bad_ip_csum.add(1);
  if (m->ol_flags & mbuf_flag::rx_l4_cksum_bad) s.rx_bad_l4_csum.add(1);
}

// One parsed TCP or UDP packet whose checksum is to be recomputed or requested.
struct L4Packet {
  Mbuf* m;
  const std::uint8_t* l3;
  std::uint32_t l4_off;
  std::uint64_t flags;  // the TX flags gathered so far (IP version, IP checksum request)
  bool ipv4;
  bool tcp;

  std::uint32_t l4_len() const noexcept { return m->pkt_len - l4_off; }
  std::uint8_t* field() const noexcept {
    return m->data() + l4_off + (tcp ? offsetof(TcpHdr, cksum) : offsetof(UdpHdr, dgram_cksum));
  }
  std::uint32_t pseudo_sum() const noexcept {
    return ipv4 ? ipv4_pseudo_sum(*reinterpret_cast<const Ipv4Hdr*>(l3), l4_len())
                : ipv6_pseudo_sum(*reinterpret_cast<const Ipv6Hdr*>(l3), l4_len(), tcp ? ip_proto_tcp : ip_proto_udp);
  }
  std::uint64_t l4_request() const noexcept { return tcp ? mbuf_flag::tx_tcp_cksum : mbuf_flag::tx_udp_cksum; }
};

// A hw request: the L4 checksum field holds the pseudo-header sum, as NICs expect (DPDK's
// rte_ipv4_phdr_cksum).
inline void request_l4_cksum(const L4Packet& p) noexcept {
  const std::uint16_t ph = fold_sum(p.pseudo_sum());
  std::memcpy(p.field(), &ph, 2);
  p.m->ol_flags |= p.flags | p.l4_request();
}

// In software, over the old field (`stored`), which is taken out after.
inline void compute_l4_cksum(const L4Packet& p, std::uint16_t stored) noexcept {
  Mbuf* m = p.m;
  const std::uint32_t l4_len = p.l4_len();
  if (m->next == nullptr && p.l4_off + l4_len <= m->data_len && (p.flags & mbuf_flag::tx_ip_cksum) == 0) [[likely]] {
    // One segment: summed inline, as apply_tx_checksums (which walks segments) would; the same
    // result.
    auto c = static_cast<std::uint16_t>(
        ~fold_sum(std::uint64_t{raw_sum(m->data() + p.l4_off, l4_len)} + p.pseudo_sum() + (0xffffu - stored)));
    if (c == 0 && !p.tcp) c = 0xffff;  // RFC 768
    std::memcpy(p.field(), &c, 2);
    m->ol_flags |= p.flags;
    return;
  }
  m->ol_flags |= p.flags | p.l4_request();
  apply_tx_checksums(*m);  // clears the request it fulfils
}

inline void process_l4(const CsumConfig& cfg, const L4Packet& p) noexcept {
  Mbuf* m = p.m;
  if (p.tcp && cfg.tso_segsz && m->pkt_len > p.l4_off + m->l4_len + cfg.tso_segsz) {
    // Larger than a segment: the TX port segments it and fills every segment's checksums.
    m->tso_segsz = cfg.tso_segsz;
    m->ol_flags |= p.flags | mbuf_flag::tx_tcp_seg | (p.ipv4 ? mbuf_flag::tx_ip_cksum : 0);
    return;
  }
  std::uint16_t stored;
  std::memcpy(&stored, p.field(), 2);
  if (!p.tcp && stored == 0 && p.ipv4) {  // RFC 768: the sender chose no UDP checksum; keep it so
    m->ol_flags |= p.flags;
    return;
  }
  if (p.tcp ? cfg.tcp_hw : cfg.udp_hw)
    request_l4_cksum(p);
  else
    compute_l4_cksum(p, stored);
}

// Recompute (sw) or request (hw) the checksums of one parsed packet whose headers sit in its
// first segment.
inline void process_checksums(const CsumConfig& cfg, Mbuf* m) noexcept {
  const std::uint32_t pt = m->packet_type;
  const bool ipv4 = ptype::is_ipv4(pt);
  if (!ipv4 && !ptype::is_ipv6(pt)) return;
  const std::uint32_t l4_off = m->l2_len + m->l3_len;
  if (l4_off + m->l4_len > m->data_len) return;
  std::uint64_t flags = ipv4 ? mbuf_flag::tx_ipv4 : mbuf_flag::tx_ipv6;
  std::uint8_t* l3 = m->data() + m->l2_len;
  if (ipv4) {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(l3);
    if (cfg.ip_hw) {
      ip->hdr_checksum = 0;
      flags |= mbuf_flag::tx_ip_cksum;
    } else {
      ip->hdr_checksum = ipv4_cksum(*ip);  // sums over the old field and takes it out: no store stall
    }
  }
  const std::uint32_t l4 = pt & ptype::l4_mask;
  if (l4 != ptype::l4_tcp && l4 != ptype::l4_udp) {
    m->ol_flags |= flags;
    return;
  }
  process_l4(cfg, L4Packet{m, l3, l4_off, flags, ipv4, l4 == ptype::l4_tcp});
}

std::uint16_t csum_forward(Stream& s) noexcept {
  Mbuf* pkts[max_burst_slots];
  const std::uint16_t n = s.rx_port->rx_burst(s.rx_queue, pkts, s.config->burst);
  record_rx_burst(s, n);
  if (n == 0) return 0;
  s.rx_packets.add(n);
  const FwdConfig& cfg = *s.config;
  const MacAddress& src = cfg.port_mac[s.tx_port_id];
  const MacAddress& dst = cfg.peer_mac[s.tx_port_id];
  for (std::uint16_t i = 0; i < n; ++i) {
    if (i + 1 < n) prefetch0(pkts[i + 1]->data());
    Mbuf* m = pkts[i];
    classify_outer_fast(*m);
    count_rx_verdict(s, m);
    m->ol_flags &= mbuf_flag::indirect | mbuf_flag::rx_rss_hash;
    if (m->data_len >= sizeof(EtherHdr)) {
      std::memcpy(m->data(), dst.bytes.data(), 6);
      std::memcpy(m->data() + 6, src.bytes.data(), 6);
    }
    process_checksums(cfg.csum[s.tx_port_id], m);
  }
  send_burst(s, s.tx_port, pkts, n);
  return n;
}

}  // namespace

Engine csum_engine() { return make_engine<&csum_forward>("csum"); }

}  // namespace ws::testpmd
