// SPDX-License-Identifier: BSD-3-Clause
// net_af_packet: ports over Linux packet sockets with memory-mapped rings, as DPDK's af_packet PMD.
//   net_af_packet0,iface=veth0,qpairs=2,blocksz=4096,framesz=2048,framecnt=512,qdisc_bypass=1
#pragma once
#include <memory>

#include "ws/port/driver.hpp"

namespace ws {

std::unique_ptr<Driver> make_af_packet_driver();

}  // namespace ws
