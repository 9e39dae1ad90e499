// SPDX-License-Identifier: BSD-3-Clause
// virtio_user: a virtio-net frontend in this process, talking vhost-user to a backend over a unix
// socket; rings and packet buffers live in our Arena, shared with the backend by its memfd. Or over
// the kernel's vhost-net and a tap (DPDK's exception path).
//   virtio_user0,path=/tmp/vhost0,queues=1,queue_size=256,packed_vq=0,in_order=1,mrg_rxbuf=1,server=0
//   virtio_user0,path=/dev/vhost-net,iface=tap0,queues=2,csum=1,tso=1
#pragma once
#include <memory>

#include "ws/port/driver.hpp"

namespace ws {

std::unique_ptr<Driver> make_virtio_user_driver();

}  // namespace ws
