// SPDX-License-Identifier: BSD-3-Clause
// net_tap: a port over a Linux TAP interface, the kernel's network stack as the peer.
//   net_tap0,iface=dtap0,mac=02:00:00:00:00:01     queues > 1 open IFF_MULTI_QUEUE queues
#pragma once
#include <memory>

#include "ws/port/driver.hpp"

namespace ws {

std::unique_ptr<Driver> make_tap_driver();

}  // namespace ws
