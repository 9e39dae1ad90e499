// SPDX-License-Identifier: BSD-3-Clause
// Registration list of built-in drivers.
#include "ws/drivers/builtin.hpp"

#include "ws/drivers/af_packet/af_packet_port.hpp"
#include "ws/drivers/e1000/e1000_port.hpp"
#ifdef WS_HAVE_AF_XDP
#include "ws/drivers/af_xdp/af_xdp_port.hpp"
#endif
#include "ws/drivers/memif/memif_port.hpp"
#include "ws/drivers/null/null_port.hpp"
#include "ws/drivers/pcap/pcap_port.hpp"
#include "ws/drivers/ring/ring_port.hpp"
#include "ws/drivers/tap/tap_port.hpp"
#include "ws/drivers/vhost/vhost_port.hpp"
#include "ws/drivers/virtio_pci/virtio_pci_port.hpp"
#include "ws/drivers/virtio_user/virtio_user_port.hpp"

namespace ws {

void register_builtin_drivers(DriverRegistry& registry) {
  registry.add(make_null_driver());
  registry.add(make_ring_driver());
  registry.add(make_pcap_driver());
  registry.add(make_af_packet_driver());
  registry.add(make_tap_driver());
#ifdef WS_HAVE_AF_XDP
  registry.add(make_af_xdp_driver());
#endif
  registry.add(make_vhost_driver());
  registry.add(make_virtio_user_driver());
  registry.add(make_memif_driver());
  registry.add(make_e1000_driver());
  registry.add(make_virtio_pci_driver());
}

}  // namespace ws
