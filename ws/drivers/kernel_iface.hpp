// SPDX-License-Identifier: BSD-3-Clause
// Small control-path helpers shared by the drivers that sit on a kernel interface
// (net_af_packet, net_af_xdp, net_tap): the interface's hardware address.
#pragma once
#include <string>

#include "ws/core/result.hpp"
#include "ws/net/ether.hpp"

namespace ws {

// SIOCGIFHWADDR on `iface` in the caller's network namespace; the error says why not.
Result<MacAddress> kernel_interface_mac(const std::string& iface);

}  // namespace ws
