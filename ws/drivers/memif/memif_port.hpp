// SPDX-License-Identifier: BSD-3-Clause
// net_memif: the shared-memory packet interface of VPP, libmemif and DPDK's net_memif, in either
// role, with DPDK 22.11's device keys:
//   net_memif0,role=server,socket=/tmp/memif.sock,socket-abstract=no,id=0,rsize=10,bsize=2048
#pragma once
#include <memory>

#include "ws/port/driver.hpp"

namespace ws {

std::unique_ptr<Driver> make_memif_driver();

}  // namespace ws
