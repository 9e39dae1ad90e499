// "set verbose N": a receive-only proxy port that takes each burst from a real port's queue and
// prints the packets' headers (as dpdk-testpmd's verbose RX dump). Streams are pointed at it only
// when verbose > 0, so the ordinary forwarding loop carries no verbose check.
#pragma once
#include <memory>

#include "ws/port/port.hpp"

namespace ws::testpmd {

// A started proxy receiving from `real`'s RX queues; `real` must outlive it.
std::unique_ptr<Port> make_verbose_rx_port(Port& real, unsigned level);

}  // namespace ws::testpmd
