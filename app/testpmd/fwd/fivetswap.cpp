// SPDX-License-Identifier: BSD-3-Clause
// 5tswap: dpdk-testpmd's five-tuple swap. Each packet goes back with its Ethernet addresses,
// IPv4/IPv6 addresses and TCP/UDP ports swapped (a reflector). Swapping fields within the
// pseudo-header and the L4 header leaves every checksum valid (RFC 1071 §2: the sum commutes).
#include <cstring>

#include "app/testpmd/fwd/engine.hpp"
#include "ws/net/headers.hpp"
#include "ws/net/ptype.hpp"

namespace ws::testpmd {
namespace {

inline void swap_bytes(std::uint8_t* a, std::uint8_t* b, std::size_t n) noexcept {
  std::uint8_t t[16];
  std::memcpy(t, a, n);
  std::memcpy(a, b, n);
  std::memcpy(b, t, n);
}

// Swap what the first segment holds; a layer that does not fit in it stays as is.
inline void swap_five_tuple(Mbuf* m) noexcept {
  classify_outer(*m);
  const std::uint32_t t = m->packet_type;
  if (t == 0) return;
  std::uint8_t* p = m->data();
  swap_bytes(p, p + 6, 6);
  const std::uint32_t l3_off = m->l2_len;
  std::uint8_t* l3 = p + l3_off;
  if (ptype::is_ipv4(t) && l3_off + sizeof(Ipv4Hdr) <= m->data_len)
    swap_bytes(l3 + 12, l3 + 16, 4);
  else if (ptype::is_ipv6(t) && l3_off + sizeof(Ipv6Hdr) <= m->data_len)
    swap_bytes(l3 + 8, l3 + 24, 16);
  else
    return;
  const std::uint32_t l4 = t & ptype::l4_mask;
  const std::uint32_t l4_off = l3_off + m->l3_len;
  if ((l4 == ptype::l4_tcp || l4 == ptype::l4_udp) && l4_off + 4 <= m->data_len)
    swap_bytes(p + l4_off, p + l4_off + 2, 2);
}

std::uint16_t fivetswap_forward(Stream& s) noexcept {
  Mbuf* pkts[max_burst_slots];
  const std::uint16_t n = s.rx_port->rx_burst(s.rx_queue, pkts, s.config->burst);
  record_rx_burst(s, n);
  if (n == 0) return 0;
  s.rx_packets.add(n);
  for (std::uint16_t i = 0; i < n; ++i) {
    if (i + 1 < n) prefetch0(pkts[i + 1]->data());
    swap_five_tuple(pkts[i]);
    pkts[i]->ol_flags &= mbuf_flag::indirect;
  }
  send_burst(s, s.tx_port, pkts, n);
  return n;
}

}  // namespace

Engine fivetswap_engine() { return make_engine<&fivetswap_forward>("5tswap"); }

}  // namespace ws::testpmd
