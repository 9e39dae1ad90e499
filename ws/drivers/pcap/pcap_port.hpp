// SPDX-License-Identifier: BSD-3-Clause
// net_pcap: ports over libpcap, as DPDK's pcap PMD.
//   net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap     replay a file (pcap or pcapng), write a file
//   net_pcap0,rx_pcap=in.pcap,infinite_rx=1          replay endlessly (held in memory)
//   net_pcap0,iface=eth0 | rx_iface=A,tx_iface=B     live capture / injection on interfaces
#pragma once
#include <memory>

#include "ws/port/driver.hpp"

namespace ws {

std::unique_ptr<Driver> make_pcap_driver();

}  // namespace ws
