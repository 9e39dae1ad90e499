// rxonly: receive bursts and free them (counted as consumed).
#include "app/testpmd/fwd/engine.hpp"

namespace ws::testpmd {
namespace {

std::uint16_t rxonly_forward(Stream& s) noexcept {
  Mbuf* pkts[max_burst_slots];
  const std::uint16_t n = s.rx_port->rx_burst(s.rx_queue, pkts, s.config->burst);
  if (n == 0) return 0;
  s.rx_packets.add(n);
  s.consumed.add(n);
  mbuf_free_bulk(std::span<Mbuf* const>(pkts, n));
  return n;
}

}  // namespace

Engine rxonly_engine() { return make_engine<&rxonly_forward>("rxonly"); }

}  // namespace ws::testpmd
