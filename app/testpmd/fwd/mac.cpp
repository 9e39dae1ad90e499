// SPDX-License-Identifier: BSD-3-Clause
// mac: receive a burst, rewrite the Ethernet source (TX port's MAC) and destination (peer MAC).
#include "app/testpmd/fwd/engine.hpp"

namespace ws::testpmd {
namespace {

std::uint16_t mac_forward(Stream& s) noexcept {
  const MacAddress& dst = s.config->peer_mac[s.tx_port_id];
  const MacAddress& src = s.config->port_mac[s.tx_port_id];
  return receive_edit_send(s, [&](Mbuf** pkts, std::uint16_t n) {
    for (std::uint16_t i = 0; i < n; ++i) {
      if (i + 1 < n) prefetch0(pkts[i + 1]->data());
      auto* eth = pkts[i]->data<EtherHdr>();
      eth->dst = dst;
      eth->src = src;
      set_tx_fields(pkts[i]);
    }
  });
}

}  // namespace

Engine mac_engine() { return make_engine<&mac_forward>("mac"); }

}  // namespace ws::testpmd
