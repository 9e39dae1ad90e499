// SPDX-License-Identifier: BSD-3-Clause
// net_virtio: the virtio-net driver on the virtio 1.x PCI transport (PCI 1af4:1041, and
// 1af4:1000 through its modern interface), the same queues as virtio_user. Devices are given by
// PCI address: -a 0000:00:05.0[,packed_vq=1,mrg_rxbuf=1,csum=0,...].
#pragma once
#include <memory>

#include "ws/port/driver.hpp"

namespace ws {

std::unique_ptr<Driver> make_virtio_pci_driver();

}  // namespace ws
