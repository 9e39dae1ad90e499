// SPDX-License-Identifier: BSD-3-Clause
// ws/net against Debian's DPDK in one process and one thread: IPv4 header checksum, TCP/UDP
// checksum with pseudo-header, the raw (vectorised) sum, Toeplitz RSS and software GSO, at 64 B
// and 1500 B frames. Each case runs both sides over the same 256 packets, alternating which
// side goes first, for several rounds; prints the median cycles/packet and the ratio.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_gso.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>
#include <rte_thash.h>
#pragma GCC diagnostic pop

#include "ws/core/arena.hpp"
#include "ws/core/cpu.hpp"
#include "ws/core/lcore.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/net/checksum.hpp"
#include "ws/net/gso.hpp"
#include "ws/net/packet_builder.hpp"
#include "ws/net/rss.hpp"

namespace {

// Distinct packets per pass, so that no result can be hoisted out of the loop. 16 frames of
// 1500 B stay in L1 (as DPDK's cksum_perf_autotest, which sums one buffer over and over); the
// "(L2)" cases use 256 frames (384 KB) to show the cost when the data comes from L2.
constexpr unsigned packets = 256;
constexpr unsigned hot_packets = 16;
constexpr unsigned passes = 2000;

struct Case {
  std::string name;
  std::uint64_t ops;                    // operations per loop
  std::function<std::uint64_t()> dpdk;  // returns TSC cycles for one loop
  std::function<std::uint64_t()> ours;
};

volatile std::uint64_t sink;

template <class Body>
[[gnu::noinline]] std::uint64_t time_loop(unsigned n, Body body) {
  std::uint64_t acc = 0;
  const std::uint64_t t0 = ws::rdtsc();
  for (unsigned i = 0; i < n; ++i) acc += body(i);
  const std::uint64_t t = ws::rdtsc() - t0;
  sink = acc;
  return t;
}

[[noreturn]] void die(std::string_view what) {
  fmt::print(stderr, "net_vs_dpdk: {}\n", what);
  std::exit(1);
}

// 256 UDP or TCP/IPv4 frames of `frame_bytes` with varied addresses and payloads.
std::vector<std::vector<std::uint8_t>> make_frames(std::uint32_t frame_bytes, std::uint8_t proto) {
  std::vector<std::vector<std::uint8_t>> out;
  for (unsigned i = 0; i < packets; ++i) {
    ws::FrameSpec s;
    s.l4_proto = proto;
    s.payload_bytes = frame_bytes - 14 - 20 - (proto == ws::ip_proto_tcp ? 20 : 8);
    s.src_ip = 0x0a000000 + i * 7919;
    s.dst_ip = 0xc0a80000 + i;
    s.src_port = static_cast<std::uint16_t>(1000 + i);
    s.seed = i + 1;
    out.push_back(ws::build_frame(s).bytes);
  }
  return out;
}

// `set` (a power of two) frames are visited in turn: indexing by a mask, as a division would
// cost more than a 64-byte sum and hide the difference being measured.
void add_checksum_cases(std::vector<Case>& cases, std::uint32_t size, unsigned set, const char* tag = "") {
  if (!std::has_single_bit(set)) die("the frame set size must be a power of two");
  auto all = make_frames(size, ws::ip_proto_udp);
  all.resize(set);
  auto frames = std::make_shared<std::vector<std::vector<std::uint8_t>>>(std::move(all));
  const std::uint64_t ops = std::uint64_t{packets} * passes;
  auto ip = [frames, set](unsigned i) { return (*frames)[(i & (set - 1))].data() + 14; };
  cases.push_back({fmt::format("ipv4 header cksum {}B{}", size, tag), ops,
                   [ip] {
                     return time_loop(packets * passes, [&](unsigned i) {
                       return rte_ipv4_cksum(reinterpret_cast<const rte_ipv4_hdr*>(ip(i)));
                     });
                   },
                   [ip] {
                     return time_loop(packets * passes, [&](unsigned i) {
                       return ws::ipv4_cksum(*reinterpret_cast<const ws::Ipv4Hdr*>(ip(i)));
                     });
                   }});
  const std::uint32_t l4_len = size - 34;
  cases.push_back({fmt::format("udp/ipv4 cksum {}B{}", size, tag), ops,
                   [ip] {
                     return time_loop(packets * passes, [&](unsigned i) {
                       return rte_ipv4_udptcp_cksum(reinterpret_cast<const rte_ipv4_hdr*>(ip(i)), ip(i) + 20);
                     });
                   },
                   [ip, l4_len] {
                     return time_loop(packets * passes, [&](unsigned i) {
                       return ws::ipv4_l4_cksum(*reinterpret_cast<const ws::Ipv4Hdr*>(ip(i)), ip(i) + 20, l4_len);
                     });
                   }});
  cases.push_back({fmt::format("raw sum {}B{}", size, tag), ops,
                   [frames, size, set] {
                     return time_loop(packets * passes, [&](unsigned i) {
                       return rte_raw_cksum((*frames)[(i & (set - 1))].data(), size);
                     });
                   },
                   [frames, size, set] {
                     return time_loop(packets * passes,
                                      [&](unsigned i) { return ws::raw_sum((*frames)[(i & (set - 1))].data(), size); });
                   }});
  if (std::getenv("WS_BENCH_ALL_SUMS")) {  // every implementation, to choose raw_sum_best
    for (auto [name, fn] : {std::pair{"avx2", &ws::raw_sum_avx2}, std::pair{"avx512", &ws::raw_sum_avx512}})
      cases.push_back({fmt::format("raw sum {}B{} ({})", size, tag, name), ops,
                       [frames, size, set] {
                         return time_loop(packets * passes, [&](unsigned i) {
                           return rte_raw_cksum((*frames)[(i & (set - 1))].data(), size);
                         });
                       },
                       [frames, size, set, sum = fn] {
                         return time_loop(packets * passes,
                                          [&](unsigned i) { return sum((*frames)[(i & (set - 1))].data(), size, 0); });
                       }});
  }
}

void add_rss_cases(std::vector<Case>& cases) {
  auto frames = std::make_shared<std::vector<std::vector<std::uint8_t>>>(make_frames(64, ws::ip_proto_tcp));
  const std::uint64_t ops = std::uint64_t{packets} * passes;
  auto toeplitz = std::make_shared<ws::Toeplitz>();
  auto key = std::make_shared<std::array<std::uint8_t, 40>>(ws::rss_default_key);
  // rte_softrss takes the tuple as host-order 32-bit words (rte_thash.h), as its callers build it.
  cases.push_back({"toeplitz ipv4 4-tuple", ops,
                   [frames, key] {
                     return time_loop(packets * passes, [&](unsigned i) {
                       const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>((*frames)[i % packets].data() + 14);
                       const auto* th = reinterpret_cast<const rte_tcp_hdr*>(ip + 1);
                       rte_ipv4_tuple t;
                       t.src_addr = rte_be_to_cpu_32(ip->src_addr);
                       t.dst_addr = rte_be_to_cpu_32(ip->dst_addr);
                       t.sport = rte_be_to_cpu_16(th->src_port);
                       t.dport = rte_be_to_cpu_16(th->dst_port);
                       return rte_softrss(reinterpret_cast<uint32_t*>(&t), RTE_THASH_V4_L4_LEN, key->data());
                     });
                   },
                   [frames, toeplitz] {
                     return time_loop(packets * passes, [&](unsigned i) {
                       const std::uint8_t* ip = (*frames)[i % packets].data() + 14;
                       return toeplitz->hash_ipv4(ip + 12, ip + 16, ip + 20, ip + 22);
                     });
                   }});
  cases.push_back({"toeplitz ipv4 2-tuple", ops,
                   [frames, key] {
                     return time_loop(packets * passes, [&](unsigned i) {
                       const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>((*frames)[i % packets].data() + 14);
                       rte_ipv4_tuple t;
                       t.src_addr = rte_be_to_cpu_32(ip->src_addr);
                       t.dst_addr = rte_be_to_cpu_32(ip->dst_addr);
                       return rte_softrss(reinterpret_cast<uint32_t*>(&t), RTE_THASH_V4_L3_LEN, key->data());
                     });
                   },
                   [frames, toeplitz] {
                     return time_loop(packets * passes, [&](unsigned i) {
                       const std::uint8_t* ip = (*frames)[i % packets].data() + 14;
                       return toeplitz->hash_ipv4(ip + 12, ip + 16);
                     });
                   }});
}

std::string dpdk_error(std::string_view what) { return fmt::format("{}: {}", what, rte_strerror(rte_errno)); }

void init_eal() {
  const char* args[] = {"net_vs_dpdk",      "-l", "0", "--no-huge", "-m", "512", "--no-pci", "--file-prefix=wsnetbench",
                        "--log-level=error"};
  std::vector<char*> argv;
  for (const char* a : args) argv.push_back(const_cast<char*>(a));
  if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) die(dpdk_error("rte_eal_init"));
}

// GSO of one TCP/IPv4 packet (payload 6 x 1448 B) into MSS 1448 segments, then
// freeing them: DPDK's rte_gso_segment (which leaves checksums to the NIC) vs ws::gso_segment
// leaving them too, and ws::gso_segment computing them in software (more work on our side).
struct GsoSubjects {
  rte_mempool* dpdk_direct = nullptr;
  rte_mempool* dpdk_indirect = nullptr;
  std::unique_ptr<ws::Arena> arena;
  std::unique_ptr<ws::PktmbufPool> ours_in, ours_hdr, ours_ind;
  std::vector<std::uint8_t> frame;
};

// The pools on both sides and a 6-segment TCP frame to split.
std::shared_ptr<GsoSubjects> make_gso_subjects() {
  auto s = std::make_shared<GsoSubjects>();
  s->dpdk_direct = rte_pktmbuf_pool_create("gso_direct", 8191, 256, 0, 9216 + RTE_PKTMBUF_HEADROOM, SOCKET_ID_ANY);
  s->dpdk_indirect = rte_pktmbuf_pool_create("gso_indirect", 8191, 256, 0, 0, SOCKET_ID_ANY);
  if (!s->dpdk_direct || !s->dpdk_indirect) die(dpdk_error("rte_pktmbuf_pool_create"));
  auto arena = ws::Arena::create({"net_bench", 256u << 20, ws::HugePolicy::never});
  if (!arena) die(arena.error().message);
  s->arena = std::move(*arena);
  auto mk = [&](const char* name, std::uint16_t room) {
    auto p =
        ws::PktmbufPool::create(*s->arena, {.name = name, .count = 8191, .cache_size = 256, .data_room_bytes = room});
    if (!p) die(p.error().message);
    return std::move(*p);
  };
  s->ours_in = mk("gso_in", 9216 + 128);
  s->ours_hdr = mk("gso_hdr", 256);
  s->ours_ind = mk("gso_ind", 128);
  ws::FrameSpec spec;
  spec.l4_proto = ws::ip_proto_tcp;
  spec.payload_bytes = 6 * 1448;
  s->frame = ws::build_frame(spec).bytes;
  return s;
}

// One input packet through rte_gso_segment, its segments freed; returns how many.
std::uint64_t dpdk_gso_once(const GsoSubjects& s) {
  rte_mbuf* m = rte_pktmbuf_alloc(s.dpdk_direct);
  if (m == nullptr) die("gso: DPDK's pool is empty");
  char* d = rte_pktmbuf_append(m, static_cast<std::uint16_t>(s.frame.size()));
  std::memcpy(d, s.frame.data(), s.frame.size());
  m->l2_len = 14;
  m->l3_len = 20;
  m->l4_len = 20;
  m->tso_segsz = 1448;
  m->ol_flags = RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_IPV4;
  rte_gso_ctx ctx{};
  ctx.direct_pool = s.dpdk_direct;
  ctx.indirect_pool = s.dpdk_indirect;
  ctx.gso_types = RTE_ETH_TX_OFFLOAD_TCP_TSO;
  ctx.gso_size = 1448 + 54;
  rte_mbuf* out[16];
  const int n = rte_gso_segment(m, &ctx, out, 16);
  if (n != 6) die(fmt::format("rte_gso_segment returned {}, expected 6 segments", n));
  for (int k = 0; k < n; ++k) rte_pktmbuf_free(out[k]);
  rte_pktmbuf_free(m);  // rte_gso_segment never frees its input
  return static_cast<std::uint64_t>(n);
}

// The same through ws::gso_segment, checksums in software when `sw`.
std::uint64_t ours_gso_once(const GsoSubjects& s, bool sw) {
  ws::Mbuf* m = s.ours_in->alloc();
  if (m == nullptr) die("gso: our pool is empty");
  std::memcpy(m->append(static_cast<std::uint16_t>(s.frame.size())), s.frame.data(), s.frame.size());
  m->l2_len = 14;
  m->l3_len = 20;
  m->l4_len = 20;
  m->tso_segsz = 1448;
  m->ol_flags = ws::mbuf_flag::tx_tcp_seg | ws::mbuf_flag::tx_ipv4;
  ws::Mbuf* out[16];
  auto n = ws::gso_segment(m, {s.ours_hdr.get(), s.ours_ind.get(), sw}, out);
  if (!n || *n != 6) die("gso_segment did not give 6 segments");
  ws::mbuf_free_bulk(std::span<ws::Mbuf* const>(out, *n));
  return *n;
}

void add_gso_case(std::vector<Case>& cases) {
  auto s = make_gso_subjects();
  const unsigned iterations = 20000;
  for (bool sw : {false, true}) {
    cases.push_back({sw ? "gso tcp/ipv4 6x1448, ours +sw cksums" : "gso tcp/ipv4 6x1448 (per input pkt)", iterations,
                     [s] { return time_loop(iterations, [&](unsigned) { return dpdk_gso_once(*s); }); },
                     [s, sw] { return time_loop(iterations, [&](unsigned) { return ours_gso_once(*s, sw); }); }});
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  unsigned rounds = 7;
  bool with_gso = true;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--rounds" && i + 1 < argc)
      rounds = std::max(1u, static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10)));
    else if (a == "--no-gso")
      with_gso = false;
    else {
      fmt::print(stderr, "usage: {} [--rounds N (default 7)] [--no-gso]\n", argv[0]);
      return 2;
    }
  }
  init_eal();           // pins this thread to CPU 0 as DPDK's lcore 0; ours runs on the same thread
  ws::set_lcore_id(0);  // as lcore 0 too, so that our pools use their per-lcore caches as DPDK's do
  std::vector<Case> cases;
  add_checksum_cases(cases, 64, hot_packets);
  add_checksum_cases(cases, 1500, hot_packets);
  add_checksum_cases(cases, 1500, packets, " (L2)");
  add_rss_cases(cases);
  if (with_gso) add_gso_case(cases);
  std::vector<std::vector<double>> d(cases.size()), o(cases.size()), r(cases.size());
  for (unsigned round = 0; round < rounds; ++round) {
    for (std::size_t c = 0; c < cases.size(); ++c) {
      double dc, oc;
      if (round % 2 == 0) {
        dc = static_cast<double>(cases[c].dpdk());
        oc = static_cast<double>(cases[c].ours());
      } else {
        oc = static_cast<double>(cases[c].ours());
        dc = static_cast<double>(cases[c].dpdk());
      }
      d[c].push_back(dc / static_cast<double>(cases[c].ops));
      o[c].push_back(oc / static_cast<double>(cases[c].ops));
      r[c].push_back(dc / oc);
    }
  }
  // On a shared machine interference only adds cycles, so the best round of each side is the
  // steadiest figure; the median of the per-round ratios is printed beside it.
  fmt::print("raw sum implementation: {}; TSC {} Hz; {} rounds; ratio = DPDK/ours, > 1: ours faster\n\n",
             ws::raw_sum_impl_name(), ws::tsc_hz(), rounds);
  fmt::print("{:<40} {:>10} {:>10} {:>8} {:>10} {:>10} {:>8}\n", "operation (cycles/packet)", "DPDK best", "ours best",
             "ratio", "DPDK med", "ours med", "ratio");
  auto best = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  for (std::size_t c = 0; c < cases.size(); ++c)
    fmt::print("{:<40} {:>10.2f} {:>10.2f} {:>8.2f} {:>10.2f} {:>10.2f} {:>8.2f}\n", cases[c].name, best(d[c]),
               best(o[c]), best(d[c]) / best(o[c]), median(d[c]), median(o[c]), median(r[c]));
  rte_eal_cleanup();
  return 0;
}
