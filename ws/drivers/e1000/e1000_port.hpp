// SPDX-License-Identifier: BSD-3-Clause
// net_e1000_em: a poll-mode driver for the Intel 82574L (PCI 8086:10d3, QEMU's e1000e), one RX
// and one TX queue, legacy descriptors, checksum offloads both ways. Devices are given by PCI
// address: -a 0000:00:02.0[,link_wait_ms=5000].
#pragma once
#include <memory>

#include "ws/port/driver.hpp"

namespace ws {

std::unique_ptr<Driver> make_e1000_driver();

}  // namespace ws
