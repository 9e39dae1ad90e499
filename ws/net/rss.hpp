// SPDX-License-Identifier: BSD-3-Clause
// Toeplitz RSS hash (Microsoft RSS specification, "Verifying the RSS Hash Calculation") with
// the standard key or a user key, IPv4/IPv6 2- and 4-tuples, a symmetric option, and software
// RSS spreading through a redirection table for ports without a hardware hash.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ws/core/mbuf.hpp"
#include "ws/core/result.hpp"

namespace ws {

inline constexpr std::size_t rss_key_bytes = 40;        ///< Toeplitz key length (as NICs and DPDK)
inline constexpr std::size_t rss_max_input_bytes = 36;  ///< IPv6 4-tuple
/// Microsoft's verification key (also the default of most NICs and of DPDK's testpmd).
inline constexpr std::array<std::uint8_t, rss_key_bytes> rss_default_key = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

/// Which fields feed the hash (bit set, as --rss-ip / --rss-udp choose).
namespace rss_type {
inline constexpr std::uint32_t ip = 1u << 0;   ///< addresses of every IPv4/IPv6 packet
inline constexpr std::uint32_t tcp = 1u << 1;  ///< + ports of TCP packets
inline constexpr std::uint32_t udp = 1u << 2;  ///< + ports of UDP packets
}  // namespace rss_type

/// DPDK's rx_adv_conf.rss_conf plus its redirection table.
struct RssConfig {
  std::uint32_t types = 0;                                        ///< rss_type::* hashed (DPDK's rss_hf); 0: no RSS
  std::array<std::uint8_t, rss_key_bytes> key = rss_default_key;  ///< Toeplitz key
  bool symmetric = false;                                         ///< both directions of a flow hash alike
  std::vector<std::uint16_t> reta{};                              ///< empty: 128 entries round-robin over the RX queues
};

/// The bit-serial definition, for tests: for every set input bit (MSB first), XOR in the 32 key
/// bits starting at that bit position.
std::uint32_t toeplitz_reference(std::span<const std::uint8_t, rss_key_bytes> key,
                                 std::span<const std::uint8_t> input) noexcept;

/// Toeplitz with a precomputed table: one 32-bit value per (input byte position, byte value), so
/// a hash is one lookup and XOR per input byte. Immutable after creation; share freely.
class Toeplitz {
 public:
  /// Precomputes the table for `key`; `symmetric` orders each tuple's endpoints first.
  explicit Toeplitz(std::span<const std::uint8_t, rss_key_bytes> key = rss_default_key, bool symmetric = false);

  /// Hash of `input` in network byte order (at most rss_max_input_bytes).
  std::uint32_t hash(std::span<const std::uint8_t> input) const noexcept {
    std::uint32_t h = 0;
    for (std::size_t i = 0; i < input.size(); ++i) h ^= table_[i][input[i]];
    return h;
  }
  /// Tuples as they appear in the packet (network byte order). With `symmetric` the two
  /// endpoints are put in a fixed order first, so both directions of a flow hash alike.
  std::uint32_t hash_ipv4(const std::uint8_t* src4, const std::uint8_t* dst4, const std::uint8_t* src_port2 = nullptr,
                          const std::uint8_t* dst_port2 = nullptr) const noexcept;
  /// As hash_ipv4, for IPv6 addresses (16 bytes each).
  std::uint32_t hash_ipv6(const std::uint8_t* src16, const std::uint8_t* dst16, const std::uint8_t* src_port2 = nullptr,
                          const std::uint8_t* dst_port2 = nullptr) const noexcept;
  bool symmetric() const noexcept { return symmetric_; }  ///< As created.

 private:
  std::array<std::array<std::uint32_t, 256>, rss_max_input_bytes> table_;
  bool symmetric_;
};

/// Redirection table: hash -> queue, as NICs do (low bits of the hash index the table).
class RssReta {
 public:
  static constexpr std::size_t max_size = 512;  ///< Entries at most.
  /// `size` a power of two <= max_size; entries spread round-robin over `queues`.
  static Result<RssReta> create(std::uint16_t queues, std::size_t size = 128);
  /// The queue of a packet with this hash.
  std::uint16_t queue(std::uint32_t hash) const noexcept { return entries_[hash & mask_]; }
  /// Point entry `index` at `queue` (control path; not concurrent with queue()).
  Result<void> set(std::size_t index, std::uint16_t queue);
  std::size_t size() const noexcept { return mask_ + 1; }  ///< Entries.

 private:
  std::array<std::uint16_t, max_size> entries_{};
  std::uint32_t mask_ = 0;
  std::uint16_t queues_ = 1;
};

/// Compute the RSS hash of `m` from its headers (classify() runs first when packet_type is 0),
/// store it in rss_hash and set rx_rss_hash. Packets without an IP header hash to 0 and get no
/// flag. Touches only this packet; no allocation.
std::uint32_t soft_rss(Mbuf& m, const Toeplitz& key, std::uint32_t types) noexcept;

}  // namespace ws
