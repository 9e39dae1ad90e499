// SPDX-License-Identifier: BSD-3-Clause
// icmpecho: answer ARP requests and ICMP echo requests (ping) on the port they arrived on, as
// dpdk-testpmd's icmpecho mode; everything else is consumed. With --icmpecho-ip=[PORT,]A.B.C.D
// only that address is answered (the port "owns" it); without, every address is (DPDK's behaviour).
#include <cstring>

#include "app/testpmd/fwd/engine.hpp"
#include "ws/net/checksum.hpp"
#include "ws/net/headers.hpp"

namespace ws::testpmd {
namespace {

constexpr std::uint16_t arp_op_request = 1;  // RFC 826
constexpr std::uint16_t arp_op_reply = 2;
constexpr std::uint8_t icmp_echo_request = 8;  // RFC 792
constexpr std::uint8_t icmp_echo_reply = 0;

// Turns an ARP request for `our_ip_be` (0: any) into the reply; false if it is not one to answer.
bool arp_reply(std::uint8_t* l3, std::uint32_t l3_len, EtherHdr* eth, const MacAddress& mac,
               std::uint32_t our_ip_be) noexcept {
  if (l3_len < sizeof(ArpHdr)) return false;
  auto* arp = reinterpret_cast<ArpHdr*>(l3);
  if (arp->opcode_be != to_be16(arp_op_request) || arp->hw_len != 6 || arp->proto_len != 4 ||
      arp->proto_type_be != to_be16(ether_type_ipv4))
    return false;
  if (our_ip_be != 0 && arp->target_ip_be != our_ip_be) return false;
  arp->opcode_be = to_be16(arp_op_reply);
  const std::uint32_t asked = arp->target_ip_be;
  std::memcpy(arp->target_mac, arp->sender_mac, 6);
  arp->target_ip_be = arp->sender_ip_be;
  std::memcpy(arp->sender_mac, mac.bytes.data(), 6);
  arp->sender_ip_be = asked;
  eth->dst = eth->src;
  eth->src = mac;
  return true;
}

// Turns an ICMP echo request to `our_ip_be` (0: any) into the reply; false otherwise.
bool icmp_reply(std::uint8_t* l3, std::uint32_t l3_len, EtherHdr* eth, const MacAddress& mac,
                std::uint32_t our_ip_be) noexcept {
  if (l3_len < sizeof(Ipv4Hdr)) return false;
  auto* ip = reinterpret_cast<Ipv4Hdr*>(l3);
  const std::uint32_t ihl = (ip->version_ihl & 0x0f) * 4u;
  if ((ip->version_ihl >> 4) != 4 || ihl < sizeof(Ipv4Hdr) || l3_len < ihl + sizeof(IcmpHdr)) return false;
  if (ip->next_proto_id != ip_proto_icmp) return false;
  if ((from_be16(ip->fragment_offset_be) & (ipv4_flag_more_fragments | ipv4_fragment_offset_mask)) != 0) return false;
  if (our_ip_be != 0 && ip->dst_addr_be != our_ip_be) return false;
  auto* icmp = reinterpret_cast<IcmpHdr*>(l3 + ihl);
  if (icmp->type != icmp_echo_request || icmp->code != 0) return false;
  // Swapping the addresses leaves the IPv4 checksum as it was; the ICMP type changes one
  // 16-bit word (type, code), updated incrementally (RFC 1624).
  const std::uint32_t src = ip->src_addr_be;
  ip->src_addr_be = ip->dst_addr_be;
  ip->dst_addr_be = src;
  const std::uint16_t old_word = to_be16(static_cast<std::uint16_t>(icmp_echo_request << 8));
  icmp->type = icmp_echo_reply;
  icmp->cksum = cksum_update16(icmp->cksum, old_word, to_be16(static_cast<std::uint16_t>(icmp_echo_reply << 8)));
  eth->dst = eth->src;
  eth->src = mac;
  return true;
}

std::uint16_t icmpecho_forward(Stream& s) noexcept {
  Mbuf* pkts[max_burst_slots];
  Mbuf* replies[max_burst_slots];
  const std::uint16_t n = s.rx_port->rx_burst(s.rx_queue, pkts, s.config->burst);
  record_rx_burst(s, n);
  if (n == 0) return 0;
  s.rx_packets.add(n);
  const MacAddress& mac = s.config->port_mac[s.rx_port_id];
  const std::uint32_t our_ip = s.config->icmpecho_ip_be[s.rx_port_id];
  std::uint16_t out = 0;
  std::uint16_t ignored = 0;
  for (std::uint16_t i = 0; i < n; ++i) {
    Mbuf* m = pkts[i];
    bool answer = false;
    if (m->data_len >= sizeof(EtherHdr)) {
      auto* eth = m->data<EtherHdr>();
      std::uint8_t* l3 = m->data() + sizeof(EtherHdr);
      std::uint32_t l3_len = m->data_len - sizeof(EtherHdr);
      std::uint16_t type = from_be16(eth->ether_type_be);
      if (type == ether_type_vlan && l3_len >= sizeof(VlanHdr)) {  // one 802.1Q tag, kept in the reply
        type = from_be16(reinterpret_cast<VlanHdr*>(l3)->ether_type_be);
        l3 += sizeof(VlanHdr);
        l3_len -= sizeof(VlanHdr);
      }
      if (type == ether_type_arp)
        answer = arp_reply(l3, l3_len, eth, mac, our_ip);
      else if (type == ether_type_ipv4)
        answer = icmp_reply(l3, l3_len, eth, mac, our_ip);
    }
    if (answer) {
      set_tx_fields(m);
      replies[out++] = m;
    } else {
      pkts[ignored++] = m;
    }
  }
  if (ignored) {
    s.consumed.add(ignored);
    mbuf_free_bulk(std::span<Mbuf* const>(pkts, ignored));
  }
  if (out == 0) return n;
  // Replies leave through the port the requests came in on (dpdk-testpmd does the same).
  send_burst(s, s.rx_port, replies, out);
  return n;
}

}  // namespace

Engine icmpecho_engine() { return make_engine<&icmpecho_forward>("icmpecho"); }

}  // namespace ws::testpmd
