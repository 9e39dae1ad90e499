// SPDX-License-Identifier: BSD-3-Clause
// net_virtio: the virtio-net driver on the virtio 1.x PCI transport (PCI 1af4:1041, and
// 1af4:1000 through its modern interface), the same queues as virtio_user. Devices are given by
// PCI address: -a 0000:00:05.0[,packed_vq=1,mrg_rxbuf=1,csum=0,...].
#pragma once
#include <cstdint>
#include <memory>

#include "ws/port/driver.hpp"

namespace ws {

std::unique_ptr<Driver> make_virtio_pci_driver();

// The queue pairs a virtio-net PCI device lets us use, and where its control queue is. With MQ
// (and CTRL_VQ) the control queue follows every pair the device has, at 2 * max_virtqueue_pairs
// (virtio 1.2 §5.1.2), which for the 0x8000 pairs §5.1.4 allows is 0x10000: beyond the 16 bits of
// queue_select and num_queues (§4.1.4.3). A device whose control queue is not below num_queues
// cannot take VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET; it runs with its first pair, which it uses by
// default (§5.1.6.5.5).
struct VirtioPciQueues {
  std::uint16_t pairs = 1;       // at most `most`, every queue of them below num_queues
  bool ctrl = false;             // a control queue to enable more than one pair
  std::uint16_t ctrl_index = 0;  // where it is, when `ctrl`
};
// mq: MQ and CTRL_VQ negotiated; max_pairs: the device's max_virtqueue_pairs (1..0x8000);
// num_queues: its common configuration's; most: the pairs a port takes. Pure.
VirtioPciQueues virtio_pci_queues(bool mq, std::uint16_t max_pairs, std::uint16_t num_queues, std::uint16_t most);

}  // namespace ws
