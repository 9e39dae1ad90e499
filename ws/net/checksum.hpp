// SPDX-License-Identifier: BSD-3-Clause
// Internet checksums (RFC 1071): raw one's-complement sums, IPv4 header, TCP/UDP over IPv4 and
// IPv6 with the pseudo-header (RFC 768, RFC 9293 §3.1, RFC 8200 §8.1), incremental update
// (RFC 1624), and RX verification into mbuf flags. The bulk sum has a scalar reference and
// AVX2/AVX-512 versions; the widest the SIMD level allows is chosen when the level is set
// (ws/core/simd.hpp).
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "ws/core/mbuf.hpp"
#include "ws/core/simd.hpp"
#include "ws/net/headers.hpp"

namespace ws {

/// Fold a 32-bit (or wider) one's-complement accumulator to 16 bits. x + rotl(x, half) carries
/// the low half's overflow into the high half, so the high half is the end-around-carry sum of
/// both halves: two such steps (64 -> 32 -> 16 bits) give exactly RFC 1071's fold (0 only for 0)
/// in six instructions.
constexpr std::uint16_t fold_sum(std::uint64_t sum) noexcept {
  const std::uint32_t s32 = static_cast<std::uint32_t>((sum + std::rotl(sum, 32)) >> 32);
  return static_cast<std::uint16_t>((s32 + std::rotl(s32, 16)) >> 16);
}

/// Sum of `len` bytes as native-order 16-bit words (odd tail padded with zero), plus `sum`,
/// not folded. The reference: simple, obviously right, slow.
std::uint32_t raw_sum_scalar(const void* data, std::size_t len, std::uint32_t sum = 0) noexcept;
/// The same, vectorised; callable only when the CPU has the instruction set.
std::uint32_t raw_sum_avx2(const void* data, std::size_t len, std::uint32_t sum = 0) noexcept;
/// The same with AVX-512BW; callable only when the CPU has it.
std::uint32_t raw_sum_avx512(const void* data, std::size_t len, std::uint32_t sum = 0) noexcept;

/// A raw_sum implementation.
using RawSumFn = std::uint32_t (*)(const void*, std::size_t, std::uint32_t) noexcept;
/// The widest version the SIMD level (ws/core/simd.hpp) allows; set with the level, on the
/// control path, never while lcores forward.
extern RawSumFn raw_sum_best;
/// The version for `level` (scalar below AVX2; AVX-512 needs VNNI as well).
RawSumFn raw_sum_for(SimdLevel level) noexcept;
/// Name of the chosen implementation ("avx512", "avx2", "scalar").
const char* raw_sum_impl_name() noexcept;

namespace detail {

#if defined(__AVX512BW__) && defined(__BMI2__)
// GCC 12's AVX-512 cast and extract intrinsics trip these on their own "undefined" operand.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
/// raw_sum of 33 to 64 bytes, built for a CPU with AVX-512 (WS_NATIVE): one byte-masked load
/// (absent bytes read as zero), biased and pair-added as in raw_sum_avx512; no tail, no loop.
/// Folded, as raw_sum returns it.
[[gnu::always_inline]] inline std::uint32_t raw_sum_33_to_64_avx512(const std::uint8_t* p, std::size_t len,
                                                                    std::uint32_t sum) noexcept {
  const __m512i v = _mm512_xor_si512(_mm512_maskz_loadu_epi8(_bzhi_u64(~0ULL, static_cast<unsigned>(len)), p),
                                     _mm512_set1_epi16(static_cast<short>(0x8000)));
  const __m512i pairs = _mm512_madd_epi16(v, _mm512_set1_epi16(1));
  __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(pairs), _mm512_extracti64x4_epi64(pairs, 1));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
  // 32 words of magnitude <= 0x8000: the signed total fits in 32 bits.
  return fold_sum(std::uint64_t{sum} + static_cast<std::uint32_t>(_mm_cvtsi128_si32(s4) + 32 * 0x8000));
}
#pragma GCC diagnostic pop
#endif

#ifdef __AVX2__
/// Built for a CPU with AVX2 (WS_NATIVE): the first 32 or 64 bytes (len >= 32) in 32-byte
/// blocks as in raw_sum_avx2, added to `sum`; moves `p` and `len` past them.
[[gnu::always_inline]] inline void raw_sum_blocks_avx2(const std::uint8_t*& p, std::size_t& len,
                                                       std::uint32_t& sum) noexcept {
  const __m256i bias = _mm256_set1_epi16(static_cast<short>(0x8000));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc =
      _mm256_madd_epi16(_mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i_u*>(p)), bias), ones);
  std::int32_t words = 16;
  if (len >= 64) {
    acc = _mm256_add_epi32(
        acc, _mm256_madd_epi16(_mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i_u*>(p + 32)), bias),
                               ones));
    words = 32;
  }
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
  // At most 32 words of magnitude <= 0x8000: the signed total fits in 32 bits.
  sum += static_cast<std::uint32_t>(_mm_cvtsi128_si32(s4) + words * 0x8000);
  p += words * 2;
  len -= static_cast<std::size_t>(words) * 2;
}
#endif

/// The scalar rest of raw_sum (any length, short in practice), folded.
[[gnu::always_inline]] inline std::uint32_t raw_sum_words(const std::uint8_t* p, std::size_t len,
                                                          std::uint32_t sum) noexcept {
  // 32-bit words into two 64-bit accumulators (two independent add chains); fold at the end.
  std::uint64_t a = sum, b = 0;
  for (; len >= 8; len -= 8, p += 8) {
    std::uint32_t w[2];
    std::memcpy(w, p, 8);
    a += w[0];
    b += w[1];
  }
  if (len >= 4) {
    std::uint32_t w;
    std::memcpy(&w, p, 4);
    a += w;
    p += 4;
    len -= 4;
  }
  if (len >= 2) {
    std::uint16_t w;
    std::memcpy(&w, p, 2);
    b += w;
    p += 2;
    len -= 2;
  }
  if (len) a += *p;  // little-endian: the odd byte is the high half of a big-endian word
  return fold_sum(a + b);
}

}  // namespace detail

/// Short buffers (headers) stay inline: a call through a pointer costs more than the sum. Built
/// for a CPU with AVX-512 or AVX2 (WS_NATIVE), the first bytes take the widest inline step.
inline std::uint32_t raw_sum(const void* data, std::size_t len, std::uint32_t sum = 0) noexcept {
  if (len > 64) return raw_sum_best(data, len, sum);
  const auto* p = static_cast<const std::uint8_t*>(data);
#if defined(__AVX512BW__) && defined(__BMI2__)
  if (len > 32) return detail::raw_sum_33_to_64_avx512(p, len, sum);
#endif
#ifdef __AVX2__
  if (len >= 32) detail::raw_sum_blocks_avx2(p, len, sum);
#endif
  return detail::raw_sum_words(p, len, sum);
}

/// Sum of an option-less IPv4 header (20 bytes) as 32-bit words, unfolded: straight-line loads
/// and adds, no loop or length branch -- the common case of every per-packet header checksum.
inline std::uint64_t ipv4_hdr_sum20(const void* hdr) noexcept {
  const auto* p = static_cast<const std::uint8_t*>(hdr);
  // Loaded straight into registers (an array would be copied through the stack first).
  std::uint64_t a, b;
  std::uint32_t c;
  std::memcpy(&a, p, 8);
  std::memcpy(&b, p + 8, 8);
  std::memcpy(&c, p + 16, 4);
  return (a & 0xffffffff) + (a >> 32) + (b & 0xffffffff) + (b >> 32) + c;
}
/// Sum of an IPv4 header of `len` (= ihl * 4) bytes, unfolded.
inline std::uint64_t ipv4_hdr_sum(const void* hdr, std::size_t len) noexcept {
  return len == sizeof(Ipv4Hdr) ? ipv4_hdr_sum20(hdr) : raw_sum(hdr, len);
}

/// IPv4 header checksum over ihl*4 bytes with the checksum field counted as zero (RFC 791).
/// The value to store (already in network byte order in memory). The sum runs over the stored
/// field and takes it out afterwards: zeroing it first would make the loads wait on a 2-byte store.
inline std::uint16_t ipv4_cksum(const Ipv4Hdr& ip) noexcept {
  const std::size_t len = static_cast<std::size_t>(ip.version_ihl & 0x0f) * 4;
  const std::uint64_t s = ipv4_hdr_sum(&ip, len) + 0xffffu - ip.hdr_checksum;
  return static_cast<std::uint16_t>(~fold_sum(s));
}

/// Pseudo-header sums (RFC 768 / RFC 9293 §3.1 for IPv4, RFC 8200 §8.1 for IPv6); l4_len is the
/// L4 header plus payload in bytes.
inline std::uint32_t ipv4_pseudo_sum(const Ipv4Hdr& ip, std::uint32_t l4_len) noexcept {
  std::uint64_t s = static_cast<std::uint64_t>(ip.src_addr_be & 0xffff) + (ip.src_addr_be >> 16) +
                    (ip.dst_addr_be & 0xffff) + (ip.dst_addr_be >> 16);
  s += to_be16(static_cast<std::uint16_t>(ip.next_proto_id)) + to_be16(static_cast<std::uint16_t>(l4_len));
  return fold_sum(s);
}
/// The IPv6 pseudo-header sum for an upper-layer packet of `l4_len` bytes and protocol `proto`.
inline std::uint32_t ipv6_pseudo_sum(const Ipv6Hdr& ip, std::uint32_t l4_len, std::uint8_t proto) noexcept {
  std::uint64_t s = raw_sum(ip.src_addr, 32);
  s += to_be32(l4_len) & 0xffff;
  s += to_be32(l4_len) >> 16;
  s += to_be16(proto);
  return fold_sum(s);
}

/// Checksum to store in a TCP/UDP header whose bytes (header + payload, `l4_len` of them,
/// contiguous) start at `l4`, the checksum field being counted as zero by the caller setting it 0
/// first. UDP's zero result is sent as 0xffff (RFC 768).
inline std::uint16_t ipv4_l4_cksum(const Ipv4Hdr& ip, const void* l4, std::uint32_t l4_len) noexcept {
  const std::uint16_t c =
      static_cast<std::uint16_t>(~fold_sum(std::uint64_t{raw_sum(l4, l4_len)} + ipv4_pseudo_sum(ip, l4_len)));
  return (c == 0 && ip.next_proto_id == ip_proto_udp) ? 0xffff : c;
}
/// As ipv4_l4_cksum, over IPv6 (RFC 8200 §8.1); `proto` is the upper-layer protocol.
inline std::uint16_t ipv6_l4_cksum(const Ipv6Hdr& ip, const void* l4, std::uint32_t l4_len,
                                   std::uint8_t proto) noexcept {
  const std::uint16_t c =
      static_cast<std::uint16_t>(~fold_sum(std::uint64_t{raw_sum(l4, l4_len)} + ipv6_pseudo_sum(ip, l4_len, proto)));
  return (c == 0 && proto == ip_proto_udp) ? 0xffff : c;
}

/// RFC 1624 eqn. 3: the new checksum HC' = ~(~HC + ~m + m') after a 16-bit field changes from
/// old_be to new_be (all in network byte order as stored).
constexpr std::uint16_t cksum_update16(std::uint16_t cksum, std::uint16_t old_be, std::uint16_t new_be) noexcept {
  const std::uint32_t s =
      static_cast<std::uint32_t>(static_cast<std::uint16_t>(~cksum)) + static_cast<std::uint16_t>(~old_be) + new_be;
  return static_cast<std::uint16_t>(~fold_sum(s));
}
/// cksum_update16 for a 32-bit field (an address), both halves.
constexpr std::uint16_t cksum_update32(std::uint16_t cksum, std::uint32_t old_be, std::uint32_t new_be) noexcept {
  return cksum_update16(cksum_update16(cksum, static_cast<std::uint16_t>(old_be), static_cast<std::uint16_t>(new_be)),
                        static_cast<std::uint16_t>(old_be >> 16), static_cast<std::uint16_t>(new_be >> 16));
}

/// Sum of `len` bytes starting `offset` bytes into packet `m`, across segments. Word alignment
/// is kept across segment boundaries (an odd split swaps the following bytes' lanes).
std::uint32_t mbuf_raw_sum(const Mbuf& m, std::uint32_t offset, std::uint32_t len) noexcept;

/// Results of checking one packet (see verify_checksums).
struct CksumStatus {
  bool ip_checked = false;  ///< The IPv4 header checksum was verified.
  bool ip_good = false;     ///< ... and was right.
  bool l4_checked = false;  ///< The TCP/UDP checksum was verified.
  bool l4_good = false;     ///< ... and was right.
};

/// Verify the IPv4 header and TCP/UDP checksums of `m`, whose packet_type and l2/l3 lengths are
/// set (classify). Sets rx_ip_cksum_good/bad and rx_l4_cksum_good/bad. Fragments and packets
/// whose lengths lie are left unchecked. Touches only this packet.
CksumStatus verify_checksums(Mbuf& m) noexcept;

/// Recompute, in software, the checksums `m`'s ol_flags request (tx_ip_cksum, tx_tcp_cksum,
/// tx_udp_cksum) using l2/l3 lengths, and clear those requests. Headers must sit in the first
/// segment; the payload may span segments. Returns false (and changes nothing) when they do not.
bool apply_tx_checksums(Mbuf& m) noexcept;

}  // namespace ws
