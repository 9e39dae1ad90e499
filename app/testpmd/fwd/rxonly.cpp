// SPDX-License-Identifier: BSD-3-Clause
// rxonly: receive bursts and free them (counted as consumed).
#include "app/testpmd/fwd/engine.hpp"
#include "ws/net/ptype.hpp"

namespace ws::testpmd {
namespace {

// --rx-ptype-counts: classify each packet (ws/net/ptype.hpp) and count its classes, in the order
// of ptype_class_names. Counted per burst, then added to the stream's counters.
void count_ptypes(Stream& s, Mbuf** pkts, std::uint16_t n) noexcept {
  std::array<std::uint32_t, ptype_class_names.size()> c{};
  for (std::uint16_t i = 0; i < n; ++i) {
    const std::uint32_t t = classify(*pkts[i]).packet_type;
    const std::uint32_t l2 = t & ptype::l2_mask;
    ++c[l2 == ptype::l2_ether_arp                                    ? 1
        : (l2 == ptype::l2_ether_vlan || l2 == ptype::l2_ether_qinq) ? 2
        : l2 != 0                                                    ? 0
                                                                     : 10];
    if (ptype::is_ipv4(t)) ++c[3];
    if (ptype::is_ipv6(t)) ++c[4];
    switch (t & ptype::l4_mask) {
      case ptype::l4_tcp:
        ++c[5];
        break;
      case ptype::l4_udp:
        ++c[6];
        break;
      case ptype::l4_icmp:
        ++c[7];
        break;
      case ptype::l4_frag:
        ++c[8];
        break;
      default:
        break;
    }
    if ((t & ptype::tunnel_mask) == ptype::tunnel_vxlan) ++c[9];
  }
  for (std::size_t k = 0; k < c.size(); ++k)
    if (c[k]) s.ptypes[k].add(c[k]);
}

std::uint16_t rxonly_forward(Stream& s) noexcept {
  Mbuf* pkts[max_burst_slots];
  const std::uint16_t n = s.rx_port->rx_burst(s.rx_queue, pkts, s.config->burst);
  record_rx_burst(s, n);
  if (n == 0) return 0;
  s.rx_packets.add(n);
  s.consumed.add(n);
  if (s.config->rx_ptype_counts) [[unlikely]]
    count_ptypes(s, pkts, n);
  mbuf_free_bulk(std::span<Mbuf* const>(pkts, n));
  return n;
}

}  // namespace

Engine rxonly_engine() { return make_engine<&rxonly_forward>("rxonly"); }

}  // namespace ws::testpmd
