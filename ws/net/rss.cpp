// SPDX-License-Identifier: BSD-3-Clause
// Toeplitz hashing (Microsoft RSS) by table lookup, redirection tables and software RSS.
#include "ws/net/rss.hpp"

#include <cstring>

#include "ws/net/headers.hpp"
#include "ws/net/ptype.hpp"

namespace ws {
namespace {

// The 32 key bits starting at bit `bit` (bit 0 = MSB of key[0]); zero past the key's end.
std::uint32_t key_window(std::span<const std::uint8_t, rss_key_bytes> key, std::size_t bit) noexcept {
  std::uint64_t w = 0;
  const std::size_t byte = bit / 8;
  for (std::size_t i = 0; i < 5; ++i) w = (w << 8) | (byte + i < key.size() ? key[byte + i] : 0);
  return static_cast<std::uint32_t>(w >> (8 - bit % 8));
}

}  // namespace

std::uint32_t toeplitz_reference(std::span<const std::uint8_t, rss_key_bytes> key,
                                 std::span<const std::uint8_t> input) noexcept {
  std::uint32_t h = 0;
  for (std::size_t i = 0; i < input.size() * 8; ++i)
    if (input[i / 8] & (0x80 >> (i % 8))) h ^= key_window(key, i);
  return h;
}

Toeplitz::Toeplitz(std::span<const std::uint8_t, rss_key_bytes> key, bool symmetric) : symmetric_(symmetric) {
  for (std::size_t pos = 0; pos < rss_max_input_bytes; ++pos) {
    std::uint32_t bit_value[8];
    for (std::size_t b = 0; b < 8; ++b) bit_value[b] = key_window(key, pos * 8 + b);  // b = 0: MSB
    for (std::size_t v = 0; v < 256; ++v) {
      std::uint32_t h = 0;
      for (std::size_t b = 0; b < 8; ++b)
        if (v & (0x80u >> b)) h ^= bit_value[b];
      table_[pos][v] = h;
    }
  }
}

namespace {

// Put (src, sport) and (dst, dport) in a fixed order for symmetric hashing.
bool swap_endpoints(const std::uint8_t* src, const std::uint8_t* dst, std::size_t n, const std::uint8_t* sp,
                    const std::uint8_t* dp) noexcept {
  const int c = std::memcmp(src, dst, n);
  if (c != 0) return c > 0;
  return sp && dp && std::memcmp(sp, dp, 2) > 0;
}

template <std::size_t N>
std::uint32_t hash_tuple(const Toeplitz& t, const std::uint8_t* src, const std::uint8_t* dst, const std::uint8_t* sp,
                         const std::uint8_t* dp) noexcept {
  if (t.symmetric() && swap_endpoints(src, dst, N, sp, dp)) {
    std::swap(src, dst);
    std::swap(sp, dp);
  }
  std::uint8_t in[2 * N + 4];
  std::memcpy(in, src, N);
  std::memcpy(in + N, dst, N);
  if (sp == nullptr) return t.hash(std::span<const std::uint8_t>(in, 2 * N));
  std::memcpy(in + 2 * N, sp, 2);
  std::memcpy(in + 2 * N + 2, dp, 2);
  return t.hash(std::span<const std::uint8_t>(in, 2 * N + 4));
}

}  // namespace

std::uint32_t Toeplitz::hash_ipv4(const std::uint8_t* src4, const std::uint8_t* dst4, const std::uint8_t* sp,
                                  const std::uint8_t* dp) const noexcept {
  return hash_tuple<4>(*this, src4, dst4, sp, dp);
}

std::uint32_t Toeplitz::hash_ipv6(const std::uint8_t* src16, const std::uint8_t* dst16, const std::uint8_t* sp,
                                  const std::uint8_t* dp) const noexcept {
  return hash_tuple<16>(*this, src16, dst16, sp, dp);
}

Result<RssReta> RssReta::create(std::uint16_t queues, std::size_t size) {
  if (queues == 0) return fail("RSS redirection table: 0 queues; expected at least 1");
  if (size == 0 || size > max_size || (size & (size - 1)) != 0)
    return fail("RSS redirection table: size {} is not a power of two in [1, {}]", size, max_size);
  RssReta r;
  r.mask_ = static_cast<std::uint32_t>(size - 1);
  r.queues_ = queues;
  for (std::size_t i = 0; i < size; ++i) r.entries_[i] = static_cast<std::uint16_t>(i % queues);
  return r;
}

Result<void> RssReta::set(std::size_t index, std::uint16_t queue) {
  if (index > mask_) return fail("RSS redirection table: index {} is past the table's {} entries", index, mask_ + 1);
  if (queue >= queues_) return fail("RSS redirection table: queue {} is not below the {} queues", queue, queues_);
  entries_[index] = queue;
  return {};
}

std::uint32_t soft_rss(Mbuf& m, const Toeplitz& key, std::uint32_t types) noexcept {
  std::uint8_t buf[max_header_bytes];
  const std::uint8_t* p = m.data();
  if (m.data_len < std::min<std::uint32_t>(m.pkt_len, max_header_bytes) && m.next) {
    copy_front(m, std::span<std::uint8_t>(buf, max_header_bytes));
    p = buf;
  }
  const std::uint32_t avail = std::min<std::uint32_t>(m.pkt_len, max_header_bytes);
  if (m.packet_type == 0) classify(m, false);
  const std::uint32_t pt = m.packet_type;
  const std::uint32_t l3_off = m.l2_len;
  const std::uint32_t l4_off = l3_off + m.l3_len;
  const std::uint32_t l4 = pt & ptype::l4_mask;
  const bool ports =
      ((l4 == ptype::l4_tcp && (types & rss_type::tcp)) || (l4 == ptype::l4_udp && (types & rss_type::udp))) &&
      l4_off + 4 <= avail;
  const std::uint8_t* sp = ports ? p + l4_off : nullptr;
  const std::uint8_t* dp = ports ? p + l4_off + 2 : nullptr;
  std::uint32_t h = 0;
  if (ptype::is_ipv4(pt) && (ports || (types & rss_type::ip)) && l3_off + sizeof(Ipv4Hdr) <= avail) {
    h = key.hash_ipv4(p + l3_off + 12, p + l3_off + 16, sp, dp);
  } else if (ptype::is_ipv6(pt) && (ports || (types & rss_type::ip)) && l3_off + sizeof(Ipv6Hdr) <= avail) {
    h = key.hash_ipv6(p + l3_off + 8, p + l3_off + 24, sp, dp);
  } else {
    return 0;
  }
  m.rss_hash = h;
  m.ol_flags |= mbuf_flag::rx_rss_hash;
  return h;
}

}  // namespace ws
