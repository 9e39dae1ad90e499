// SPDX-License-Identifier: BSD-3-Clause
// net_vhost: a vhost-user backend port. A control thread serves the unix socket (server by
// default, client=1 connects and reconnects); lcores poll the frontend's rings.
//   net_vhost0,iface=/tmp/vhost0,queues=1,client=0
#pragma once
#include <memory>

#include "ws/port/driver.hpp"

namespace ws {

std::unique_ptr<Driver> make_vhost_driver();

}  // namespace ws
