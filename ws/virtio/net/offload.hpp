// SPDX-License-Identifier: BSD-3-Clause
// Offload flags through the virtio-net header (virtio 1.2 §5.1.6.2, §5.1.6.4): what a sender's
// mbuf asks for (TX checksum, TSO) becomes NEEDS_CSUM / gso_type / gso_size in the header, and a
// received header becomes mbuf flags. Used by both sides (vhost enqueue/dequeue, virtio_user
// TX/RX) in their offload variants only: a ring without negotiated offloads never calls these.
//
// Behaviour follows DPDK 22.11 where it interoperates:
// - TX (lib/vhost virtio_enqueue_offload, virtio PMD virtqueue_xmit_offload): IPv4 header
//   checksum computed in software (virtio has no IP checksum offload); an L4 checksum request
//   becomes NEEDS_CSUM with csum_start = l2+l3 and the pseudo-header sum in the L4 field; TSO
//   becomes gso_type TCPV4/TCPV6, gso_size = tso_segsz, hdr_len = l2+l3+l4.
// - RX (lib/vhost vhost_dequeue_offload in compliant mode, plus net_vhost's rx_sw_csum): a
//   NEEDS_CSUM packet gets its checksum completed in software and rx_l4_cksum_good; DATA_VALID on
//   TCP/UDP gives rx_l4_cksum_good; a GSO packet keeps its size and gets rx_lro with tso_segsz
//   (DPDK's RTE_MBUF_F_RX_LRO).
// - RX in legacy mode (lib/vhost vhost_dequeue_offload_legacy, net_vhost's legacy-ol-flags=1):
//   the header's requests stay requests, for the port the application forwards the packet to:
//   NEEDS_CSUM at csum_start = l2+l3 becomes tx_tcp_cksum / tx_udp_cksum, GSO TCPV4/6 becomes
//   tx_tcp_seg with tso_segsz and l4_len; l2_len, l3_len and tx_ipv4/tx_ipv6 are set. As DPDK, a
//   request that does not match the packet leaves l2_len, l3_len and ol_flags zero; so do the
//   two DPDK maps that have no flag here: SCTP checksum and UDP GSO.
#pragma once
#include <cstdint>

#include "ws/core/mbuf.hpp"
#include "ws/virtio/features.hpp"
#include "ws/virtio/net/net_hdr.hpp"

namespace ws::virtio {

// Which header offloads the peer accepted, for one direction; fixed when a ring starts.
struct HdrOffloads {
  bool csum = false;  // NEEDS_CSUM may be sent (peer's CSUM for driver TX, GUEST_CSUM for device TX)
  bool tso4 = false;  // gso_type TCPV4 may be sent
  bool tso6 = false;  // gso_type TCPV6 may be sent

  bool any() const noexcept { return csum || tso4 || tso6; }
  // What a driver (virtio_user) may send to the device, from the negotiated features.
  static constexpr HdrOffloads driver_tx(std::uint64_t f) noexcept {
    return {has(f, feature::csum), has(f, feature::csum) && has(f, feature::host_tso4),
            has(f, feature::csum) && has(f, feature::host_tso6)};
  }
  // What a device (vhost) may send to the driver.
  static constexpr HdrOffloads device_tx(std::uint64_t f) noexcept {
    return {has(f, feature::guest_csum), has(f, feature::guest_csum) && has(f, feature::guest_tso4),
            has(f, feature::guest_csum) && has(f, feature::guest_tso6)};
  }
};

// Fills `h` (zeroed by the caller; num_buffers untouched) from m's TX requests. The requests stay
// on m and a second call gives the same result (a packet the ring had no room for is retried).
// Requests the peer did not accept are done in software (checksums); a TSO request the peer
// cannot take returns false (the caller drops and counts it: segmentation changes the packet
// count and has its own call, gso_segment). Headers must sit in the first segment.
bool tx_offload_to_net_hdr_slow(Mbuf& m, NetHdr& h, HdrOffloads peer) noexcept;
inline constexpr std::uint64_t tx_header_requests =
    mbuf_flag::tx_ip_cksum | mbuf_flag::tx_l4_mask | mbuf_flag::tx_tcp_seg;
inline bool tx_offload_to_net_hdr(Mbuf& m, NetHdr& h, HdrOffloads peer) noexcept {
  if ((m.ol_flags & tx_header_requests) == 0) [[likely]]
    return true;  // inline: a packet that asks for nothing pays one test
  return tx_offload_to_net_hdr_slow(m, h, peer);
}

// Applies a received, already validated (check_net_hdr) header to m: completes a partial
// checksum in software, sets rx_l4_cksum_good for DATA_VALID, rx_lro + tso_segsz for GSO.
// Headers it cannot parse leave m's flags alone (the data is delivered as is).
void rx_net_hdr_to_offload_slow(const NetHdr& h, Mbuf& m) noexcept;
inline void rx_net_hdr_to_offload(const NetHdr& h, Mbuf& m) noexcept {
  if (h.flags == 0 && h.gso_type == NetHdr::gso_none) [[likely]]
    return;  // inline: a header that says nothing costs one test
  rx_net_hdr_to_offload_slow(h, m);
}

// Legacy mode (see the top of this file): a received header's checksum/GSO requests become TX
// requests on m (tx_tcp_cksum / tx_udp_cksum, tx_tcp_seg + tso_segsz, l2/l3/l4 lengths), for an
// application that forwards m to a port able to do them. The checksum field is left as sent.
void rx_net_hdr_to_legacy_offload_slow(const NetHdr& h, Mbuf& m) noexcept;
inline void rx_net_hdr_to_legacy_offload(const NetHdr& h, Mbuf& m) noexcept {
  if (h.flags == 0 && h.gso_type == NetHdr::gso_none) [[likely]]
    return;  // as DPDK's vhost_dequeue_offload: an empty header leaves m alone
  rx_net_hdr_to_legacy_offload_slow(h, m);
}

}  // namespace ws::virtio
