// SPDX-License-Identifier: BSD-3-Clause
// The drivers wirespeed ships, registered explicitly (no static constructors).
#pragma once
#include "ws/port/driver.hpp"

namespace ws {

/// Adds every driver this build has (net_null, net_ring, net_pcap, net_af_packet, net_tap,
/// net_af_xdp when built, net_vhost, net_virtio_user) to `registry`.
void register_builtin_drivers(DriverRegistry& registry);

}  // namespace ws
