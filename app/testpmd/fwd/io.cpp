// io: receive a burst and send it unchanged to the peer port.
#include "app/testpmd/fwd/engine.hpp"

namespace ws::testpmd {
namespace {

std::uint16_t io_forward(Stream& s) noexcept {
  Mbuf* pkts[max_burst_slots];
  const std::uint16_t n = s.rx_port->rx_burst(s.rx_queue, pkts, s.config->burst);
  if (n == 0) return 0;
  s.rx_packets.add(n);
  const std::uint16_t sent = s.tx_port->tx_burst(s.tx_queue, pkts, n);
  s.tx_packets.add(sent);
  drop_unsent(s, pkts, n, sent);
  return n;
}

}  // namespace

Engine io_engine() { return make_engine<&io_forward>("io"); }

}  // namespace ws::testpmd
