// SPDX-License-Identifier: BSD-3-Clause
// Internet checksum implementations: scalar reference, AVX2 and AVX-512 bulk sums, the one-time
// choice between them, multi-segment sums, RX verification and software TX checksums.
#include "ws/net/checksum.hpp"

#include <immintrin.h>

#include "ws/net/ptype.hpp"

namespace ws {

std::uint32_t raw_sum_scalar(const void* data, std::size_t len, std::uint32_t sum) noexcept {
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::uint64_t acc = sum;
  for (; len >= 2; len -= 2, p += 2) {  // RFC 1071 §4.1, word by word
    std::uint16_t w;
    std::memcpy(&w, p, 2);
    acc += w;
  }
  if (len) acc += *p;
  return fold_sum(acc);
}

namespace {

// Tail after the vector loop: fewer than one vector of bytes.
inline std::uint64_t sum_tail(const std::uint8_t* p, std::size_t len) noexcept {
  std::uint64_t acc = 0;
  for (; len >= 8; len -= 8, p += 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    acc += (w & 0xffffffff) + (w >> 32);
  }
  for (; len >= 2; len -= 2, p += 2) {
    std::uint16_t w;
    std::memcpy(&w, p, 2);
    acc += w;
  }
  if (len) acc += *p;
  return acc;
}

}  // namespace

// Each 16-bit word w is biased to the signed w - 0x8000 (xor 0x8000) so that vpmaddwd against a
// vector of ones adds word pairs into 32-bit lanes in one instruction; the bias (0x8000 per
// word) is added back at the end. A lane gains at most 2*0x8000 per step, so 32-bit lanes hold
// far more than a 64 KiB packet needs.
__attribute__((target("avx2"))) std::uint32_t raw_sum_avx2(const void* data, std::size_t len,
                                                           std::uint32_t sum) noexcept {
  const auto* p = static_cast<const std::uint8_t*>(data);
  const __m256i bias = _mm256_set1_epi16(static_cast<short>(0x8000));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  std::uint64_t words = 0;
  for (; len >= 128; len -= 128, p += 128, words += 64) {
    const auto* v = reinterpret_cast<const __m256i_u*>(p);
    a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_xor_si256(_mm256_loadu_si256(v + 0), bias), ones));
    a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_xor_si256(_mm256_loadu_si256(v + 1), bias), ones));
    a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_xor_si256(_mm256_loadu_si256(v + 2), bias), ones));
    a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_xor_si256(_mm256_loadu_si256(v + 3), bias), ones));
  }
  for (; len >= 32; len -= 32, p += 32, words += 16)
    a0 = _mm256_add_epi32(
        a0, _mm256_madd_epi16(_mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i_u*>(p)), bias), ones));
  a0 = _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3));
  // Signed 32-bit lanes widened to 64 bits before the horizontal add.
  const __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(a0));
  const __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(a0, 1));
  const __m256i s4 = _mm256_add_epi64(lo, hi);
  alignas(32) std::int64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s4);
  const std::int64_t vsum = lanes[0] + lanes[1] + lanes[2] + lanes[3] + static_cast<std::int64_t>(words * 0x8000);
  return fold_sum(static_cast<std::uint64_t>(vsum) + sum_tail(p, len) + sum);
}

// GCC 12's AVX-512 cast intrinsics trip -Wuninitialized on their own "undefined" operand.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
// AVX-512 with VNNI: vpdpwssd multiplies the biased words by one and accumulates the pairs in a
// single instruction, so 64 bytes cost one load+xor and one vpdpwssd; four accumulators cover
// its latency. The tail goes through a byte-masked load (absent bytes read as zero).
__attribute__((target("avx512f,avx512bw,avx512vnni,bmi2"))) std::uint32_t raw_sum_avx512(const void* data,
                                                                                         std::size_t len,
                                                                                         std::uint32_t sum) noexcept {
  const auto* p = static_cast<const std::uint8_t*>(data);
  const __m512i bias = _mm512_set1_epi16(static_cast<short>(0x8000));
  const __m512i ones = _mm512_set1_epi16(1);
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  std::uint64_t words = 0;
  for (; len >= 256; len -= 256, p += 256, words += 128) {
    a0 = _mm512_dpwssd_epi32(a0, _mm512_xor_si512(_mm512_loadu_si512(p), bias), ones);
    a1 = _mm512_dpwssd_epi32(a1, _mm512_xor_si512(_mm512_loadu_si512(p + 64), bias), ones);
    a2 = _mm512_dpwssd_epi32(a2, _mm512_xor_si512(_mm512_loadu_si512(p + 128), bias), ones);
    a3 = _mm512_dpwssd_epi32(a3, _mm512_xor_si512(_mm512_loadu_si512(p + 192), bias), ones);
  }
  // Fewer than 256 bytes left: up to three whole vectors and a partial one, each into its own
  // accumulator so that they do not wait on each other.
  if (len >= 64) {
    a0 = _mm512_dpwssd_epi32(a0, _mm512_xor_si512(_mm512_loadu_si512(p), bias), ones);
    if (len >= 128) {
      a1 = _mm512_dpwssd_epi32(a1, _mm512_xor_si512(_mm512_loadu_si512(p + 64), bias), ones);
      if (len >= 192) a2 = _mm512_dpwssd_epi32(a2, _mm512_xor_si512(_mm512_loadu_si512(p + 128), bias), ones);
    }
    const std::size_t whole = len & ~std::size_t{63};
    words += whole / 2;
    p += whole;
    len -= whole;
  }
  if (len) {
    const __mmask64 mask = _bzhi_u64(~0ULL, static_cast<unsigned>(len));
    a3 = _mm512_dpwssd_epi32(a3, _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, p), bias), ones);
    words += 32;  // the zero words are biased and corrected like the others
  }
  a0 = _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
  const __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(a0));
  const __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(a0, 1));
  const std::int64_t vsum =
      _mm512_reduce_add_epi64(_mm512_add_epi64(lo, hi)) + static_cast<std::int64_t>(words * 0x8000);
  return fold_sum(static_cast<std::uint64_t>(vsum) + sum);
}
#pragma GCC diagnostic pop

RawSumFn raw_sum_for(SimdLevel level) noexcept {
  // bench/net_vs_dpdk (WS_BENCH_ALL_SUMS=1) compares the versions on the machine at hand.
  if (level >= SimdLevel::avx512 && __builtin_cpu_supports("avx512vnni")) return &raw_sum_avx512;
  if (level >= SimdLevel::avx2) return &raw_sum_avx2;
  return &raw_sum_scalar;
}

RawSumFn raw_sum_best = &raw_sum_scalar;

namespace {

[[maybe_unused]] const bool raw_sum_hooked =
    (on_simd_level([](SimdLevel l) noexcept { raw_sum_best = raw_sum_for(l); }), true);

}  // namespace

const char* raw_sum_impl_name() noexcept {
  if (raw_sum_best == &raw_sum_avx512) return "avx512";
  if (raw_sum_best == &raw_sum_avx2) return "avx2";
  return "scalar";
}

std::uint32_t mbuf_raw_sum(const Mbuf& m, std::uint32_t offset, std::uint32_t len) noexcept {
  std::uint64_t acc = 0;
  std::uint32_t done = 0;  // bytes summed so far: an odd count shifts the next chunk by a byte
  for (const Mbuf* s = &m; s && len; s = s->next) {
    if (offset >= s->data_len) {
      offset -= s->data_len;
      continue;
    }
    const std::uint32_t n = std::min<std::uint32_t>(s->data_len - offset, len);
    std::uint16_t part = fold_sum(raw_sum(s->data() + offset, n));
    if (done & 1) part = static_cast<std::uint16_t>((part << 8) | (part >> 8));  // RFC 1071 §2(B)
    acc += part;
    done += n;
    len -= n;
    offset = 0;
  }
  return fold_sum(acc);
}

namespace {

// Where the L3 and L4 headers of `m` are and how long the L4 part is; false if lengths lie.
struct L4Span {
  std::uint8_t* l3;
  std::uint32_t l4_off;
  std::uint32_t l4_len;
  std::uint8_t proto;
};

bool locate(Mbuf& m, bool ipv4, L4Span& out) noexcept {
  const std::uint32_t l3_off = m.l2_len + (m.packet_type & ptype::tunnel_mask ? m.outer_l2_len + m.outer_l3_len : 0);
  if (l3_off + m.l3_len > m.data_len || m.l3_len == 0) return false;
  out.l3 = m.data() + l3_off;
  out.l4_off = l3_off + m.l3_len;
  if (ipv4) {
    const auto* ip = reinterpret_cast<const Ipv4Hdr*>(out.l3);
    const std::uint32_t total = from_be16(ip->total_length_be);
    if (total < m.l3_len || l3_off + total > m.pkt_len) return false;
    out.l4_len = total - m.l3_len;
    out.proto = ip->next_proto_id;
  } else {
    const auto* ip = reinterpret_cast<const Ipv6Hdr*>(out.l3);
    const std::uint32_t total = from_be16(ip->payload_len_be) + sizeof(Ipv6Hdr);
    if (total < m.l3_len || l3_off + total > m.pkt_len) return false;
    out.l4_len = total - m.l3_len;
    out.proto = 0;  // from packet_type below
  }
  return true;
}

std::uint32_t pseudo_sum(const std::uint8_t* l3, bool ipv4, std::uint32_t l4_len, std::uint8_t proto) noexcept {
  if (ipv4) {
    Ipv4Hdr ip;
    std::memcpy(&ip, l3, sizeof ip);
    ip.next_proto_id = proto;
    return ipv4_pseudo_sum(ip, l4_len);
  }
  return ipv6_pseudo_sum(*reinterpret_cast<const Ipv6Hdr*>(l3), l4_len, proto);
}

}  // namespace

CksumStatus verify_checksums(Mbuf& m) noexcept {
  CksumStatus st;
  m.ol_flags &= ~(mbuf_flag::rx_ip_cksum_good | mbuf_flag::rx_ip_cksum_bad | mbuf_flag::rx_l4_cksum_good |
                  mbuf_flag::rx_l4_cksum_bad);
  const std::uint32_t pt = m.packet_type;
  const bool tunnel = (pt & ptype::tunnel_mask) != 0;
  const std::uint32_t l3t = pt & (tunnel ? ptype::inner_l3_mask : ptype::l3_mask);
  const bool ipv4 = tunnel ? (l3t == ptype::inner_l3_ipv4 || l3t == ptype::inner_l3_ipv4_ext) : ptype::is_ipv4(pt);
  const bool ipv6 = tunnel ? (l3t == ptype::inner_l3_ipv6 || l3t == ptype::inner_l3_ipv6_ext) : ptype::is_ipv6(pt);
  const std::uint32_t t = tunnel ? (pt & ptype::inner_l4_mask) >> 16 : pt;
  if (!ipv4 && !ipv6) return st;
  L4Span s;
  if (!locate(m, ipv4, s)) return st;
  if (ipv4) {
    st.ip_checked = true;
    st.ip_good = fold_sum(ipv4_hdr_sum(s.l3, m.l3_len)) == 0xffff;  // RFC 1071: sums to all ones
    m.ol_flags |= st.ip_good ? mbuf_flag::rx_ip_cksum_good : mbuf_flag::rx_ip_cksum_bad;
  }
  const std::uint32_t l4 = t & ptype::l4_mask;
  if (l4 != ptype::l4_tcp && l4 != ptype::l4_udp) return st;
  const std::uint8_t proto = l4 == ptype::l4_tcp ? ip_proto_tcp : ip_proto_udp;
  if (proto == ip_proto_udp && s.l4_off + 8 <= m.data_len) {
    std::uint16_t stored;
    std::memcpy(&stored, m.data() + s.l4_off + 6, 2);
    if (stored == 0 && ipv4) return st;  // RFC 768: no checksum was computed
  }
  st.l4_checked = true;
  const std::uint64_t total =
      std::uint64_t{mbuf_raw_sum(m, s.l4_off, s.l4_len)} + pseudo_sum(s.l3, ipv4, s.l4_len, proto);
  st.l4_good = fold_sum(total) == 0xffff;
  m.ol_flags |= st.l4_good ? mbuf_flag::rx_l4_cksum_good : mbuf_flag::rx_l4_cksum_bad;
  return st;
}

bool apply_tx_checksums(Mbuf& m) noexcept {
  const std::uint64_t want = m.ol_flags & (mbuf_flag::tx_ip_cksum | mbuf_flag::tx_l4_mask);
  if (want == 0) return true;
  const bool ipv4 = (m.ol_flags & mbuf_flag::tx_ipv4) != 0 || (m.ol_flags & mbuf_flag::tx_ip_cksum) != 0;
  const std::uint32_t l3_off = m.l2_len;
  const std::uint32_t l4_off = l3_off + m.l3_len;
  const std::uint64_t l4 = m.ol_flags & mbuf_flag::tx_l4_mask;
  const std::uint32_t l4_hdr = l4 == mbuf_flag::tx_tcp_cksum ? sizeof(TcpHdr) : sizeof(UdpHdr);
  if (m.l3_len == 0 || l4_off + (l4 ? l4_hdr : 0) > m.data_len || l4_off > m.pkt_len) return false;
  std::uint8_t* l3 = m.data() + l3_off;
  // Sums run over the old checksum field and take it out afterwards (adding its complement):
  // zeroing the field first would make the wider loads of the sum wait on a 2-byte store.
  if (want & mbuf_flag::tx_ip_cksum) {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(l3);
    const std::uint16_t old = ip->hdr_checksum;
    ip->hdr_checksum = static_cast<std::uint16_t>(~fold_sum(ipv4_hdr_sum(ip, m.l3_len) + (0xffffu - old)));
  }
  if (l4 == mbuf_flag::tx_tcp_cksum || l4 == mbuf_flag::tx_udp_cksum) {
    const std::uint32_t l4_len = m.pkt_len - l4_off;
    const std::uint8_t proto = l4 == mbuf_flag::tx_tcp_cksum ? ip_proto_tcp : ip_proto_udp;
    auto* field = m.data() + l4_off + (proto == ip_proto_tcp ? offsetof(TcpHdr, cksum) : offsetof(UdpHdr, dgram_cksum));
    std::uint16_t old;
    std::memcpy(&old, field, 2);
    std::uint16_t c = static_cast<std::uint16_t>(~fold_sum(std::uint64_t{mbuf_raw_sum(m, l4_off, l4_len)} +
                                                           pseudo_sum(l3, ipv4, l4_len, proto) + (0xffffu - old)));
    if (c == 0 && proto == ip_proto_udp) c = 0xffff;  // RFC 768
    std::memcpy(field, &c, 2);
  }
  m.ol_flags &= ~(mbuf_flag::tx_ip_cksum | mbuf_flag::tx_l4_mask);
  return true;
}

}  // namespace ws
