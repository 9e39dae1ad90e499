// SPDX-License-Identifier: BSD-3-Clause
// txonly: build bursts of UDP/IPv4 packets (lengths from --txpkts, one segment each) and send them.
#include <cstring>

#include "app/testpmd/fwd/engine.hpp"

namespace ws::testpmd {
namespace {

// Chains the extra segments --txpkts asks for onto `head`; false (head untouched) if the pool is empty.
bool add_segments(Stream& s, Mbuf* head) noexcept {
  const auto& lens = s.config->txpkts;
  Mbuf* segs[8];  // --txpkts takes at most 8 segments
  const auto extra = static_cast<std::uint16_t>(lens.size() - 1);
  if (!s.pool->raw_alloc_bulk(std::span<Mbuf*>(segs, extra))) return false;
  Mbuf* prev = head;
  for (std::uint16_t k = 0; k < extra; ++k) {
    Mbuf* seg = segs[k];
    seg->data_off = seg->headroom_default;
    seg->data_len = lens[k + 1];
    seg->ol_flags = 0;
    prev->next = seg;
    prev = seg;
  }
  head->nb_segs = static_cast<std::uint16_t>(lens.size());
  return true;
}

// --txonly-multi-flow, as dpdk-testpmd: each packet's IPv4 source is the destination address
// with an 8-bit counter in its third byte, plus the lcore id, so that a receiver's RSS spreads
// the flows. The UDP checksum is 0 (none), so only the IPv4 header's is redone.
void vary_flows(Stream& s, Mbuf** pkts, std::uint16_t n) noexcept {
  for (std::uint16_t i = 0; i < n; ++i) {
    Ipv4Hdr ip;
    std::uint8_t* at = pkts[i]->data() + sizeof(EtherHdr);
    std::memcpy(&ip, at, sizeof ip);
    ip.src_addr_be = to_be32((s.config->tx_ip_dst | (std::uint32_t{s.ip_var++} << 8)) + s.lcore_id);
    ip.hdr_checksum = 0;
    ip.hdr_checksum = ipv4_header_checksum(ip);
    std::memcpy(at, &ip, sizeof ip);
  }
}

std::uint16_t txonly_forward(Stream& s) noexcept {
  Mbuf* pkts[max_burst_slots];
  std::uint16_t n = s.config->burst;
  if (!s.pool->raw_alloc_bulk(std::span<Mbuf*>(pkts, n))) return 0;
  const bool multi_segment = s.config->txpkts.size() > 1;
  for (std::uint16_t i = 0; i < n; ++i) {
    Mbuf* m = pkts[i];
    m->data_off = m->headroom_default;
    m->data_len = s.config->txpkts[0];
    m->pkt_len = s.config->tx_pkt_length;
    m->ol_flags = 0;
    m->packet_type = 0;
    set_tx_fields(m);
    std::memcpy(m->data(), s.udp_header.data(), udp_header_bytes);
    if (multi_segment && !add_segments(s, m)) [[unlikely]] {
      // Pool empty: send what is built, return the rest unused.
      mbuf_free_bulk(std::span<Mbuf* const>(pkts + i, n - i));
      n = i;
      break;
    }
  }
  if (n == 0) return 0;
  if (s.config->txonly_multi_flow) vary_flows(s, pkts, n);
  s.generated.add(n);
  send_burst(s, s.tx_port, pkts, n);
  return n;
}

}  // namespace

Engine txonly_engine() { return make_engine<&txonly_forward>("txonly"); }

std::array<std::uint8_t, udp_header_bytes> udp_frame_header(const FwdConfig& config, std::uint16_t port,
                                                            std::uint32_t length) {
  std::array<std::uint8_t, udp_header_bytes> out{};
  EtherHdr eth{config.peer_mac[port], config.port_mac[port], to_be16(ether_type_ipv4)};
  Ipv4Hdr ip{};
  ip.version_ihl = 0x45;
  ip.ttl = 64;
  ip.next_proto_id = ip_proto_udp;
  ip.total_length_be = to_be16(static_cast<std::uint16_t>(length - sizeof(EtherHdr)));
  ip.src_addr_be = to_be32(config.tx_ip_src);
  ip.dst_addr_be = to_be32(config.tx_ip_dst);
  ip.hdr_checksum = ipv4_header_checksum(ip);
  UdpHdr udp{to_be16(config.tx_udp_src), to_be16(config.tx_udp_dst),
             to_be16(static_cast<std::uint16_t>(length - sizeof(EtherHdr) - sizeof(Ipv4Hdr))), 0};
  std::memcpy(out.data(), &eth, sizeof eth);
  std::memcpy(out.data() + sizeof eth, &ip, sizeof ip);
  std::memcpy(out.data() + sizeof eth + sizeof ip, &udp, sizeof udp);
  return out;
}

}  // namespace ws::testpmd
