// SPDX-License-Identifier: BSD-3-Clause
// The TX queue a port puts in front of a driver's when it does enabled offloads in software
// (private to ws/port: Port::start() sets it up, software_tx.cpp runs it).
#pragma once
#include <cstdint>

#include "ws/core/mbuf.hpp"
#include "ws/port/burst.hpp"
#include "ws/port/stats.hpp"

namespace ws {

// A TX queue whose enabled offloads the device lacks: the port's software offloads run before
// the driver's burst function, which it wraps. Set up by Port::start().
struct alignas(cache_line_bytes) SoftwareTxQueue : QueueBase {
  BurstEntry driver;                    // the driver's own burst function and queue
  PktmbufPool* segment_pool = nullptr;  // software TSO's header and indirect mbufs
  bool sw_checksums = true;             // segments' checksums in software (device lacks them)
  Counter dropped;                      // packets (or segments) taken but not sent: bad headers, no mbufs, queue full
};

// SoftwareTxQueue's burst function (ws/port/software_tx.cpp); Checksum: VLAN and checksum
// requests are done in software; Segment: TSO requests are. Chosen once at start: a port
// without software TSO never tests for it per packet.
template <bool Checksum, bool Segment>
std::uint16_t software_offload_tx(QueueBase* q, Mbuf** pkts, std::uint16_t n) noexcept;

}  // namespace ws
