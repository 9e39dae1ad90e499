// mac: receive a burst, rewrite the Ethernet source (TX port's MAC) and destination (peer MAC).
#include "app/testpmd/fwd/engine.hpp"

namespace ws::testpmd {
namespace {

std::uint16_t mac_forward(Stream& s) noexcept {
  Mbuf* pkts[max_burst_slots];
  const std::uint16_t n = s.rx_port->rx_burst(s.rx_queue, pkts, s.config->burst);
  if (n == 0) return 0;
  s.rx_packets.add(n);
  const MacAddress& dst = s.config->peer_mac[s.tx_port_id];
  const MacAddress& src = s.config->port_mac[s.tx_port_id];
  for (std::uint16_t i = 0; i < n; ++i) {
    if (i + 1 < n) prefetch0(pkts[i + 1]->data());
    auto* eth = pkts[i]->data<EtherHdr>();
    eth->dst = dst;
    eth->src = src;
    set_tx_fields(pkts[i]);
  }
  const std::uint16_t sent = s.tx_port->tx_burst(s.tx_queue, pkts, n);
  s.tx_packets.add(sent);
  drop_unsent(s, pkts, n, sent);
  return n;
}

}  // namespace

Engine mac_engine() { return make_engine<&mac_forward>("mac"); }

}  // namespace ws::testpmd
