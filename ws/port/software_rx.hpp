// SPDX-License-Identifier: BSD-3-Clause
// The RX queue a port puts behind a driver's when it does enabled RX offloads in software
// (private to ws/port: Port::start() sets it up, software_rx.cpp runs it): the VLAN filter
// drops tagged packets of VLANs not let in, VLAN strip moves the tag into Mbuf::vlan_tci.
#pragma once
#include <cstdint>

#include "ws/core/mbuf.hpp"
#include "ws/port/burst.hpp"
#include "ws/port/port.hpp"
#include "ws/port/stats.hpp"

namespace ws {

struct alignas(cache_line_bytes) SoftwareRxQueue : QueueBase {
  BurstEntry driver;                   // the driver's own burst function and queue
  const VlanFilter* filter = nullptr;  // the port's filter (rx_offload::vlan_filter)
  Counter filtered;                    // tagged packets dropped by the filter (written by the polling lcore)
};

// SoftwareRxQueue's burst function (software_rx.cpp); Filter and Strip are chosen once at
// start, so a port that only strips never looks up the filter.
template <bool Filter, bool Strip>
std::uint16_t software_offload_rx(QueueBase* q, Mbuf** pkts, std::uint16_t n) noexcept;

}  // namespace ws
