// SPDX-License-Identifier: BSD-3-Clause
// net_null: a port with no wire. RX produces packets as fast as the pool allows, TX frees them.
// Device string: net_null0,size=64,copy=0,no-rx=0 (see README.md).
#pragma once
#include <memory>

#include "ws/port/driver.hpp"

namespace ws {

std::unique_ptr<Driver> make_null_driver();

}  // namespace ws
