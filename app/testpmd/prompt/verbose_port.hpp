// SPDX-License-Identifier: BSD-3-Clause
// "set verbose N": a proxy port in front of a real one that prints the headers of each burst it
// passes on, as dpdk-testpmd's RX/TX dump callbacks: "port P/queue Q: received|sent N packets"
// and a line per packet. Streams are pointed at it only when verbose > 0, so the ordinary
// forwarding loop carries no verbose check.
#pragma once
#include <memory>

#include "ws/port/port.hpp"

namespace ws::testpmd {

// dpdk-testpmd's levels: 1 prints what is received, 2 what is sent, 3 and more both.
bool verbose_prints_rx(unsigned level);
bool verbose_prints_tx(unsigned level);

// A started proxy receiving from and sending to `real`'s queues (as configured now), printing
// each burst; `real` must outlive it.
std::unique_ptr<Port> make_verbose_port(Port& real);

}  // namespace ws::testpmd
