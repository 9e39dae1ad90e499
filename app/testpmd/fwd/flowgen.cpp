// SPDX-License-Identifier: BSD-3-Clause
// flowgen: generate UDP flows with varying destination addresses; with --flowgen-clones=N each
// new mbuf is sent N more times by raising its reference count instead of building N packets.
// Received packets are counted and freed. Addresses and sizes follow dpdk-testpmd's flowgen.
#include <cstring>

#include "app/testpmd/fwd/engine.hpp"

namespace ws::testpmd {
namespace {

constexpr std::uint32_t ip_src = (10u << 24) | (254u << 16);
constexpr std::uint32_t ip_dst = (10u << 24) | (253u << 16);
constexpr MacAddress eth_src{{0x00, 0x01, 0x02, 0x03, 0x04, 0x00}};
constexpr MacAddress eth_dst{{0x00, 0x01, 0x02, 0x03, 0x04, 0x01}};

void write_packet(Mbuf* m, std::uint16_t size, std::uint32_t flow) noexcept {
  m->data_off = m->headroom_default;
  m->data_len = size;
  m->pkt_len = size;
  m->nb_segs = 1;
  m->ol_flags = 0;
  m->packet_type = 0;
  set_tx_fields(m);
  auto* eth = m->data<EtherHdr>();
  eth->dst = eth_dst;
  eth->src = eth_src;
  eth->ether_type_be = to_be16(ether_type_ipv4);
  auto* ip = reinterpret_cast<Ipv4Hdr*>(eth + 1);
  *ip = Ipv4Hdr{};
  ip->version_ihl = 0x45;
  ip->ttl = 64;
  ip->next_proto_id = ip_proto_udp;
  ip->total_length_be = to_be16(static_cast<std::uint16_t>(size - sizeof(EtherHdr)));
  ip->src_addr_be = to_be32(ip_src);
  ip->dst_addr_be = to_be32(ip_dst + flow);
  ip->hdr_checksum = ipv4_header_checksum(*ip);
  auto* udp = reinterpret_cast<UdpHdr*>(ip + 1);
  udp->src_port_be = to_be16(1000);
  udp->dst_port_be = to_be16(1001);
  udp->dgram_len_be = to_be16(static_cast<std::uint16_t>(size - sizeof(EtherHdr) - sizeof(Ipv4Hdr)));
  udp->dgram_cksum = 0;
}

std::uint16_t flowgen_forward(Stream& s) noexcept {
  Mbuf* pkts[max_burst_slots];
  const FwdConfig& c = *s.config;
  const std::uint16_t nrx = s.rx_port->rx_burst(s.rx_queue, pkts, c.burst);
  record_rx_burst(s, nrx);
  if (nrx) {
    s.rx_packets.add(nrx);
    s.consumed.add(nrx);
    mbuf_free_bulk(std::span<Mbuf* const>(pkts, nrx));
  }
  // dpdk-testpmd subtracts the 4-byte FCS from the configured length.
  const auto size = static_cast<std::uint16_t>(c.tx_pkt_length - 4);
  const std::uint16_t clones_max = std::min(c.flowgen_clones, c.burst);
  std::uint32_t flow = s.next_flow;
  std::uint16_t n = 0;
  std::uint16_t clones = 0;
  std::uint16_t refs = 0;  // of pkt, in this burst
  Mbuf* pkt = nullptr;
  for (; n < c.burst; ++n) {
    if (n == 0 || clones == 0) {
      if (pkt) pkt->refcnt.store(refs, std::memory_order_relaxed);
      clones = clones_max;
      if (!s.pool->raw_alloc_bulk(std::span<Mbuf*>(&pkt, 1))) [[unlikely]] {
        pkt = nullptr;
        break;
      }
      write_packet(pkt, size, flow);
      refs = 1;
    } else {
      --clones;
      ++refs;
    }
    pkts[n] = pkt;
    if (++flow >= c.flowgen_flows) flow = 0;
  }
  // Each clone is one more reference, counted here and stored once per mbuf, with no atomic
  // read-modify-write: the mbuf is ours alone until tx_burst publishes it.
  if (pkt) pkt->refcnt.store(refs, std::memory_order_relaxed);
  if (n == 0) return nrx;
  s.generated.add(n);
  const std::uint16_t sent = s.tx_port->tx_burst(s.tx_queue, pkts, n);
  record_tx_burst(s, sent);
  s.tx_packets.add(sent);
  if (sent < n) [[unlikely]] {
    // Back out the flow counter for what was not sent, as dpdk-testpmd does.
    flow = (flow + c.flowgen_flows - (n - sent) % c.flowgen_flows) % c.flowgen_flows;
    drop_unsent(s, pkts, n, sent);
  }
  s.next_flow = flow;
  return static_cast<std::uint16_t>(n + nrx);
}

}  // namespace

Engine flowgen_engine() { return make_engine<&flowgen_forward>("flowgen"); }

}  // namespace ws::testpmd
