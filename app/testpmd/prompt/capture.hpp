// SPDX-License-Identifier: BSD-3-Clause
// Live capture: a receive proxy in front of a port that writes what it receives (optionally
// only what a tcpdump-syntax filter, compiled by libpcap, accepts) to a pcapng file. It sits in
// the streams only while a capture runs, so the forwarding loop carries no capture check.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "ws/port/port.hpp"

namespace ws::testpmd {

struct CaptureCounts {
  std::uint64_t received = 0;  // packets the proxy received
  std::uint64_t written = 0;   // packets the filter accepted and the file got
};

// Compiles `filter` (empty: everything) and opens `path` with a section header and one
// interface description (the port's name and driver, nanosecond timestamps).
Result<std::unique_ptr<Port>> make_capture_port(Port& real, const std::string& path, const std::string& filter);
// The counts of a port made by make_capture_port (zeros for any other port).
CaptureCounts capture_counts(const Port& capture);
// The file a capture port writes.
std::string capture_path(const Port& capture);

}  // namespace ws::testpmd
