// SPDX-License-Identifier: BSD-3-Clause
// Virtio feature bits (virtio 1.2 §6 reserved bits, §5.1.3 net device bits) and the set each
// side of wirespeed offers. Features are a 64-bit mask; `has(mask, bit)` reads one.
#pragma once
#include <cstdint>

namespace ws::virtio {

namespace feature {
// Net device (virtio 1.2 §5.1.3).
inline constexpr unsigned csum = 0;        // device handles partial checksums
inline constexpr unsigned guest_csum = 1;  // driver handles partial checksums
inline constexpr unsigned mtu = 3;
inline constexpr unsigned mac = 5;
inline constexpr unsigned guest_tso4 = 7;  // driver takes TCPv4 GSO packets
inline constexpr unsigned guest_tso6 = 8;
inline constexpr unsigned host_tso4 = 11;  // device takes TCPv4 GSO packets
inline constexpr unsigned host_tso6 = 12;
inline constexpr unsigned mrg_rxbuf = 15;  // num_buffers in the header (§5.1.6.3.2)
inline constexpr unsigned status = 16;
inline constexpr unsigned ctrl_vq = 17;
inline constexpr unsigned mq = 22;
// Reserved / transport bits (virtio 1.2 §6).
inline constexpr unsigned notify_on_empty = 24;
inline constexpr unsigned any_layout = 27;
inline constexpr unsigned indirect_desc = 28;      // §2.7.5.3 / §2.8.19
inline constexpr unsigned event_idx = 29;          // §2.7.7 / §2.8.10
inline constexpr unsigned protocol_features = 30;  // vhost-user only (not a virtio bit)
inline constexpr unsigned version_1 = 32;
inline constexpr unsigned access_platform = 33;
inline constexpr unsigned ring_packed = 34;  // §2.8
inline constexpr unsigned in_order = 35;     // §2.7.9 / §2.8.20
}  // namespace feature

constexpr std::uint64_t bit(unsigned b) noexcept { return std::uint64_t{1} << b; }
constexpr bool has(std::uint64_t mask, unsigned b) noexcept { return (mask & bit(b)) != 0; }

// The ring and header choices a driver's device string makes (packed_vq, in_order, mrg_rxbuf,
// event_idx, csum, tso): the same keys with the same meaning on every transport.
struct DriverChoices {
  bool packed = false, in_order = true, mrg = true, event_idx = true, csum = false, tso = false;
};

// The feature bits those choices ask for. Each transport adds its own (PCI: mac, status,
// ctrl_vq, mq, access_platform; vhost-user: mq with more than one queue pair).
constexpr std::uint64_t driver_features(const DriverChoices& c) noexcept {
  std::uint64_t want = bit(feature::version_1);
  if (c.packed) want |= bit(feature::ring_packed);
  if (c.in_order) want |= bit(feature::in_order);
  if (c.mrg) want |= bit(feature::mrg_rxbuf);
  if (c.event_idx) want |= bit(feature::event_idx);
  if (c.csum) want |= bit(feature::csum) | bit(feature::guest_csum);
  if (c.csum && c.tso)
    want |= bit(feature::host_tso4) | bit(feature::host_tso6) | bit(feature::guest_tso4) | bit(feature::guest_tso6);
  return want;
}

// What our vhost backend offers a frontend. The frontend may accept any subset; bits outside it
// are refused at SET_FEATURES.
// Header offloads as DPDK's vhost library offers them (net_vhost strips HOST_TSO4/6 unless
// tso=1). EVENT_IDX: interrupts go out when the driver's used_event (split) or descriptor event
// (packed) asks; as we poll, our own kick requests stay where the ring started (split: one kick
// per 65536 buffers at most).
inline constexpr std::uint64_t header_offloads = bit(feature::csum) | bit(feature::guest_csum) |
                                                 bit(feature::host_tso4) | bit(feature::host_tso6) |
                                                 bit(feature::guest_tso4) | bit(feature::guest_tso6);
inline constexpr std::uint64_t backend_offered =
    header_offloads | bit(feature::event_idx) | bit(feature::mrg_rxbuf) | bit(feature::mq) | bit(feature::ctrl_vq) |
    bit(feature::mac) | bit(feature::status) | bit(feature::any_layout) | bit(feature::indirect_desc) |
    bit(feature::protocol_features) | bit(feature::version_1) | bit(feature::ring_packed) | bit(feature::in_order);

// Features without which we refuse to run: legacy (pre-1.0) layouts are not supported.
inline constexpr std::uint64_t required = bit(feature::version_1);

// Device status bits (virtio 1.2 §2.1).
namespace status {
inline constexpr std::uint8_t acknowledge = 1;
inline constexpr std::uint8_t driver = 2;
inline constexpr std::uint8_t driver_ok = 4;
inline constexpr std::uint8_t features_ok = 8;
inline constexpr std::uint8_t needs_reset = 64;
inline constexpr std::uint8_t failed = 128;
}  // namespace status

}  // namespace ws::virtio
