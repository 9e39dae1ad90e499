// SPDX-License-Identifier: BSD-3-Clause
// The virtio-net header (virtio 1.2 §5.1.6): 12 bytes with VERSION_1 (num_buffers always
// present), in front of every packet on both RX and TX. Validation for headers a peer wrote.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>

namespace ws::virtio {

struct NetHdr {
  static constexpr std::uint8_t f_needs_csum = 1;
  static constexpr std::uint8_t f_data_valid = 2;
  static constexpr std::uint8_t gso_none = 0;
  static constexpr std::uint8_t gso_tcpv4 = 1;
  static constexpr std::uint8_t gso_udp = 3;
  static constexpr std::uint8_t gso_tcpv6 = 4;
  static constexpr std::uint8_t gso_ecn = 0x80;

  std::uint8_t flags;
  std::uint8_t gso_type;
  std::uint16_t hdr_len;
  std::uint16_t gso_size;
  std::uint16_t csum_start;
  std::uint16_t csum_offset;
  std::uint16_t num_buffers;  // RX with MRG_RXBUF: descriptor chains this packet spans
};
static_assert(sizeof(NetHdr) == 12);
static_assert(offsetof(NetHdr, num_buffers) == 10);

inline constexpr std::uint32_t net_hdr_bytes = sizeof(NetHdr);

// Hot path: writes `h` into a peer's buffer field by field. A header just built on the stack and
// copied out with wider loads than the stores that built it misses store forwarding: the load
// waits until those stores reach the cache, behind every earlier store into the peer's lines,
// which the peer is polling. Loads of single fields are forwarded.
// with_num_buffers false: the field keeps what the buffer held (see store_tx_net_hdr).
inline void store_net_hdr(std::byte* dst, const NetHdr& h, bool with_num_buffers = true) noexcept {
  static_assert(std::endian::native == std::endian::little, "virtio 1.x headers are little-endian");
  auto put = [dst](std::size_t at, const auto& field) { __builtin_memcpy(dst + at, &field, sizeof field); };
  put(offsetof(NetHdr, flags), h.flags);
  put(offsetof(NetHdr, gso_type), h.gso_type);
  put(offsetof(NetHdr, hdr_len), h.hdr_len);
  put(offsetof(NetHdr, gso_size), h.gso_size);
  put(offsetof(NetHdr, csum_start), h.csum_start);
  put(offsetof(NetHdr, csum_offset), h.csum_offset);
  if (with_num_buffers) put(offsetof(NetHdr, num_buffers), h.num_buffers);
}

// The header of a packet that requests nothing: zero but num_buffers, stored from registers.
inline void store_plain_net_hdr(std::byte* dst, std::uint16_t num_buffers) noexcept {
  static_assert(std::endian::native == std::endian::little, "virtio 1.x headers are little-endian");
  const std::uint64_t head = 0;                                 // flags .. csum_start
  const std::uint32_t tail = std::uint32_t{num_buffers} << 16;  // csum_offset 0, num_buffers
  __builtin_memcpy(dst, &head, sizeof head);
  __builtin_memcpy(dst + sizeof head, &tail, sizeof tail);
}

// The TX header of a packet that requests nothing. Virtio 1.2 §5.1.6.2.1 has the driver zero
// num_buffers on TX. keep_num_buffers leaves it as the buffer held it (after RX, what the device
// wrote), as DPDK's driver does: devices do not read it on TX, and a device that stores it on
// RX only where it differs (DPDK's vhost) then finds it equal and leaves the line alone.
inline void store_tx_net_hdr(std::byte* dst, bool keep_num_buffers) noexcept {
  if (!keep_num_buffers) {
    store_plain_net_hdr(dst, 0);
    return;
  }
  const std::uint64_t head = 0;         // flags .. csum_start
  const std::uint16_t csum_offset = 0;  // and no num_buffers
  __builtin_memcpy(dst, &head, sizeof head);
  __builtin_memcpy(dst + sizeof head, &csum_offset, sizeof csum_offset);
}

enum class NetHdrCheck : std::uint8_t { ok, csum_beyond_packet, gso_without_size, hdr_len_beyond_packet, bad_gso_type };

// Checks a header copied out of guest memory (never the guest's copy: it may change under us)
// against the length of the packet that follows it. Thread-safe (pure).
constexpr NetHdrCheck check_net_hdr(const NetHdr& h, std::uint32_t packet_bytes) noexcept {
  if (h.flags & NetHdr::f_needs_csum) {
    // virtio 1.2 §5.1.6.2: the checksum field lives at csum_start + csum_offset (2 bytes).
    const std::uint32_t end = std::uint32_t{h.csum_start} + h.csum_offset + 2;
    if (end > packet_bytes) return NetHdrCheck::csum_beyond_packet;
  }
  const std::uint8_t gso = h.gso_type & static_cast<std::uint8_t>(~NetHdr::gso_ecn);
  if (gso != NetHdr::gso_none) {
    if (gso != NetHdr::gso_tcpv4 && gso != NetHdr::gso_udp && gso != NetHdr::gso_tcpv6)
      return NetHdrCheck::bad_gso_type;
    if (h.gso_size == 0) return NetHdrCheck::gso_without_size;
    if (h.hdr_len > packet_bytes) return NetHdrCheck::hdr_len_beyond_packet;
  }
  return NetHdrCheck::ok;
}

}  // namespace ws::virtio
