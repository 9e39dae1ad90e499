// SPDX-License-Identifier: BSD-3-Clause
// net_ring: ports over in-process rings of mbuf pointers.
//   net_ring0                       TX queue q loops back to RX queue q (as DPDK's net_ring)
//   net_ring1,peer=net_ring0        a pair: each port's TX is the other's RX
//   net_ring2,rx_ring=a,tx_ring=b   over named rings, shared with any port naming them
#pragma once
#include <memory>

#include "ws/port/driver.hpp"

namespace ws {

std::unique_ptr<Driver> make_ring_driver();

}  // namespace ws
