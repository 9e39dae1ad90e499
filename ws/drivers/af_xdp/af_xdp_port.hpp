// SPDX-License-Identifier: BSD-3-Clause
// net_af_xdp: AF_XDP sockets through libxdp/libbpf, one per queue, UMEM in a ws::Arena, with
// our XDP program (xdp_fast_drop.bpf.c) deciding per packet: drop in the driver or redirect to
// the socket.
//   net_af_xdp0,iface=veth1,start_queue=0,queue_count=2,xdp_mode=native,xdp_prog=redirect_all
#pragma once
#include <memory>

#include "ws/port/driver.hpp"

namespace ws {

std::unique_ptr<Driver> make_af_xdp_driver();

}  // namespace ws
