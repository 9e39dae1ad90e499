// SPDX-License-Identifier: BSD-3-Clause
// The software flow classifier's cost per packet (ws/flow/classifier.hpp) with 1, 16, 256 and
// 4096 5-tuple rules shaped as ACL rule sets are: IPv4 source and destination prefixes of many
// lengths (some wildcard), source ports mostly wildcard, destination ports exact, ranges
// (spec..last) or prefix masks, TCP, UDP or any protocol, four priority levels; each rule
// "queue index 1". 256 packets (TCP and UDP): half drawn inside a random rule's ranges, half
// from the same address pools with random ports (some match a wider rule, some none). Each case
// classifies the burst many times and prints the median and the least cycles/packet of several
// rounds (the least is the round no other process interrupted, on a loaded machine), the time
// our classifier took to build and the bytes of its index.
// Built with Debian's libdpdk (WS_BENCH_ACL), the same rules go into rte_acl (l3fwd-acl's field
// layout: protocol, addresses as prefixes, ports as ranges; its priorities in our order) and the
// same packets are classified by rte_acl_classify, 32 at a time, rounds alternating with ours:
// rte_acl is given pointers at the IPv4 protocol byte, where ours reads the headers from the
// Ethernet header on. Before timing, every packet's winning rule is checked to be the same on
// both sides (ours through a mark action).
// usage: flow_classifier [rounds [rule counts...]]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "ws/core/arena.hpp"
#include "ws/core/cpu.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/flow/classifier.hpp"
#include "ws/net/packet_builder.hpp"
#include "ws/testing/rng.hpp"

#if WS_BENCH_ACL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <rte_acl.h>
#include <rte_eal.h>
#pragma GCC diagnostic pop
#endif

namespace {

using ws::testing::Rng;

// One 5-tuple ACL rule: what both sides are given.
struct Acl5 {
  std::uint32_t priority;
  std::uint8_t proto;  // 6, 17, or 0: any (no L4 item, ports wildcard)
  std::uint32_t src, dst;
  unsigned src_len, dst_len;
  std::uint16_t sp_lo, sp_hi, dp_lo, dp_hi;
  bool dp_masked;  // dp_lo..dp_hi written as a prefix mask rather than spec..last
};

// Addresses come from a few hundred /16 "sites", so that prefixes of rules and packets overlap.
std::uint32_t site_address(Rng& g) { return ((172u << 24) | (g.below(300) << 16)) + g.below(65536); }

std::uint32_t prefix_of(std::uint32_t a, unsigned len) { return len == 0 ? 0 : a & (~0u << (32 - len)); }

void random_ports(Rng& g, Acl5& a) {
  static constexpr std::uint16_t well_known[] = {22, 25, 53, 80, 123, 161, 443, 993, 3306, 5432, 8080, 8443};
  const std::uint32_t s = g.below(100), d = g.below(100);
  a.sp_lo = 0, a.sp_hi = 65535;
  if (s >= 95)
    a.sp_lo = a.sp_hi = static_cast<std::uint16_t>(1024 + g.below(60000));
  else if (s >= 85)
    a.sp_lo = 1024;
  a.dp_lo = 0, a.dp_hi = 65535, a.dp_masked = false;
  if (d < 35) {
    a.dp_lo = a.dp_hi = well_known[g.below(12)];
  } else if (d < 55) {
    a.dp_lo = a.dp_hi = static_cast<std::uint16_t>(1024 + g.below(60000));
  } else if (d < 75) {
    a.dp_lo = static_cast<std::uint16_t>(1024 + g.below(60000));
    a.dp_hi = static_cast<std::uint16_t>(a.dp_lo + g.below(1024));
  } else if (d < 85) {
    a.dp_masked = true;
    a.dp_lo = static_cast<std::uint16_t>(g.below(256) << 8);
    a.dp_hi = static_cast<std::uint16_t>(a.dp_lo | 0xff);
  }
}

Acl5 random_rule(Rng& g) {
  Acl5 a{};
  a.priority = g.below(4);
  const std::uint32_t p = g.below(100);
  a.proto = p < 45 ? 6 : p < 90 ? 17 : 0;
  const std::uint32_t sl = g.below(100), dl = g.below(100);
  a.src_len = sl < 25 ? 0 : sl < 40 ? 8 + g.below(8) : 16 + g.below(17);
  a.dst_len = dl < 5 ? 0 : dl < 30 ? 16 + g.below(8) : 24 + g.below(9);
  a.src = prefix_of(site_address(g), a.src_len);
  a.dst = prefix_of(site_address(g), a.dst_len);
  if (a.proto != 0)
    random_ports(g, a);
  else
    a.sp_lo = a.dp_lo = 0, a.sp_hi = a.dp_hi = 65535;
  return a;
}

std::string ip_text(std::uint32_t a) {
  return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

void set_ports(const Acl5& a, ws::FlowItem& l4) {
  if (a.sp_lo != 0 || a.sp_hi != 65535) {
    (void)l4.set("src", "spec", std::to_string(a.sp_lo));
    (void)l4.set("src", "mask", "0xffff");
    if (a.sp_hi != a.sp_lo) (void)l4.set("src", "last", std::to_string(a.sp_hi));
  }
  if (a.dp_lo == 0 && a.dp_hi == 65535) return;
  (void)l4.set("dst", "spec", std::to_string(a.dp_lo));
  if (a.dp_masked) return (void)l4.set("dst", "mask", "0xff00");
  (void)l4.set("dst", "mask", "0xffff");
  if (a.dp_hi != a.dp_lo) (void)l4.set("dst", "last", std::to_string(a.dp_hi));
}

// The rte_flow rule of `a`: eth / ipv4 [src, dst prefixes] / [tcp|udp ports] with `actions`.
ws::FlowRule flow_rule(const Acl5& a, std::vector<ws::FlowAction> actions) {
  ws::FlowRule r;
  r.attr.ingress = true;
  r.attr.priority = a.priority;
  ws::FlowItem eth, ip, l4;
  ip.type = ws::FlowItemType::ipv4;
  if (a.src_len) (void)ip.set("src", "spec", ip_text(a.src)), (void)ip.set("src", "prefix", std::to_string(a.src_len));
  if (a.dst_len) (void)ip.set("dst", "spec", ip_text(a.dst)), (void)ip.set("dst", "prefix", std::to_string(a.dst_len));
  r.pattern = {eth, ip};
  if (a.proto) {
    l4.type = a.proto == 6 ? ws::FlowItemType::tcp : ws::FlowItemType::udp;
    set_ports(a, l4);
    r.pattern.push_back(l4);
  }
  r.actions = std::move(actions);
  return r;
}

std::uint32_t inside(Rng& g, std::uint32_t prefix, unsigned len) {
  return len == 32 ? prefix : prefix | (static_cast<std::uint32_t>(g.next()) >> len);
}

std::uint16_t port_in(Rng& g, std::uint16_t lo, std::uint16_t hi) {
  return static_cast<std::uint16_t>(lo + g.below(hi - lo + 1u));
}

// Half the packets inside a random rule, half from the address pools with random ports.
ws::FrameSpec random_packet(Rng& g, const std::vector<Acl5>& rules, bool hit) {
  ws::FrameSpec s;
  s.l4_proto = g.below(2) ? ws::ip_proto_tcp : ws::ip_proto_udp;
  s.src_ip = site_address(g), s.dst_ip = site_address(g);
  s.src_port = static_cast<std::uint16_t>(1024 + g.below(64000));
  s.dst_port = static_cast<std::uint16_t>(g.below(65536));
  if (!hit) return s;
  const Acl5& a = rules[g.below(static_cast<std::uint32_t>(rules.size()))];
  if (a.proto) s.l4_proto = a.proto;
  s.src_ip = a.src_len ? inside(g, a.src, a.src_len) : s.src_ip;
  s.dst_ip = a.dst_len ? inside(g, a.dst, a.dst_len) : s.dst_ip;
  s.src_port = port_in(g, a.sp_lo, a.sp_hi);
  s.dst_port = port_in(g, a.dp_lo, a.dp_hi);
  return s;
}

// Our rules in our order (priority, then age): rte_acl's priorities are given from it.
std::vector<std::uint32_t> our_order(const std::vector<Acl5>& rules) {
  std::vector<std::uint32_t> order(rules.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::ranges::sort(order, {}, [&](std::uint32_t i) { return std::pair(rules[i].priority, i); });
  return order;
}

#if WS_BENCH_ACL
// l3fwd-acl's layout: offsets from the IPv4 protocol byte; the first field one byte, the
// others in 4-byte input groups (source, destination, both ports).
RTE_ACL_RULE_DEF(AclRule, 5);
const rte_acl_field_def acl_fields[5] = {
    {RTE_ACL_FIELD_TYPE_BITMASK, 1, 0, 0, 0}, {RTE_ACL_FIELD_TYPE_MASK, 4, 1, 1, 3},
    {RTE_ACL_FIELD_TYPE_MASK, 4, 2, 2, 7},    {RTE_ACL_FIELD_TYPE_RANGE, 2, 3, 3, 11},
    {RTE_ACL_FIELD_TYPE_RANGE, 2, 4, 3, 13},
};

// Rule i's userdata is i + 1; earlier in our order is a higher rte_acl priority.
rte_acl_ctx* acl_of(const std::vector<Acl5>& rules) {
  static int made = 0;
  const std::string name = fmt::format("flowbench{}", made++);
  const auto n = static_cast<std::uint32_t>(rules.size());
  rte_acl_param param{name.c_str(), SOCKET_ID_ANY, RTE_ACL_RULE_SZ(5), n};
  rte_acl_ctx* ctx = rte_acl_create(&param);
  const std::vector<std::uint32_t> order = our_order(rules);
  for (std::uint32_t rank = 0; rank < n && ctx; ++rank) {
    const Acl5& a = rules[order[rank]];
    AclRule r{};
    r.data = {1, static_cast<std::int32_t>(n - rank), order[rank] + 1};
    r.field[0].value.u8 = a.proto;
    r.field[0].mask_range.u8 = a.proto ? 0xff : 0;
    r.field[1].value.u32 = a.src;
    r.field[1].mask_range.u32 = a.src_len;
    r.field[2].value.u32 = a.dst;
    r.field[2].mask_range.u32 = a.dst_len;
    r.field[3].value.u16 = a.sp_lo, r.field[3].mask_range.u16 = a.sp_hi;
    r.field[4].value.u16 = a.dp_lo, r.field[4].mask_range.u16 = a.dp_hi;
    if (rte_acl_add_rules(ctx, reinterpret_cast<rte_acl_rule*>(&r), 1) != 0) return nullptr;
  }
  rte_acl_config cfg{};
  cfg.num_categories = 1;
  cfg.num_fields = 5;
  std::memcpy(cfg.defs, acl_fields, sizeof acl_fields);
  if (ctx && rte_acl_build(ctx, &cfg) != 0) return nullptr;
  return ctx;
}

const std::uint8_t* acl_data(const ws::Mbuf* m) { return m->data() + 14 + 9; }

// rte_acl's cycles/packet over the same packets.
double acl_round(const rte_acl_ctx* ctx, const std::vector<ws::Mbuf*>& pkts, unsigned reps) {
  const std::uint8_t* data[256];
  for (std::size_t i = 0; i < pkts.size(); ++i) data[i] = acl_data(pkts[i]);
  std::uint32_t results[32];
  const std::uint64_t t0 = ws::rdtsc();
  for (unsigned k = 0; k < reps; ++k)
    for (unsigned b = 0; b < 256; b += 32) rte_acl_classify(ctx, data + b, results, 32, 1);
  return static_cast<double>(ws::rdtsc() - t0) / (reps * 256.0);
}

void init_eal() {
  const char* args[] = {
      "flow_classifier",  "-l", "0", "--no-huge", "-m", "256", "--no-pci", "--file-prefix=wsflowbench",
      "--log-level=error"};
  std::vector<char*> argv;
  for (const char* a : args) argv.push_back(const_cast<char*>(a));
  if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) std::exit(1);
}
#endif

double median(std::vector<double> v) {
  std::ranges::sort(v);
  return v[v.size() / 2];
}

double least(const std::vector<double>& v) { return v.empty() ? 0 : std::ranges::min(v); }

std::vector<ws::Mbuf*> packets(ws::PktmbufPool& pool, const std::vector<Acl5>& rules, Rng& g) {
  std::vector<ws::Mbuf*> pkts;
  for (unsigned i = 0; i < 256; ++i) {
    const ws::BuiltFrame f = ws::build_frame(random_packet(g, rules, i % 2 == 0));
    ws::Mbuf* m = pool.alloc();
    std::memcpy(m->append(static_cast<std::uint16_t>(f.bytes.size())), f.bytes.data(), f.bytes.size());
    pkts.push_back(m);
  }
  return pkts;
}

double ours_round(const ws::FlowClassifier& c, const std::vector<ws::Mbuf*>& pkts, unsigned reps) {
  std::uint16_t verdict[32];
  const std::uint64_t t0 = ws::rdtsc();
  for (unsigned k = 0; k < reps; ++k)
    for (unsigned b = 0; b < 256; b += 32) c.classify(pkts.data() + b, 32, verdict);
  return static_cast<double>(ws::rdtsc() - t0) / (reps * 256.0);
}

// A classifier over `rules`, each with `actions`, and the FlowRules it points at.
struct Ours {
  std::vector<ws::FlowRule> rules;
  std::unique_ptr<ws::FlowCounters[]> counters;
  ws::Counter dropped;
  std::unique_ptr<ws::FlowClassifier> c;
  double build_ms = 0;
};

std::unique_ptr<Ours> ours_of(const std::vector<Acl5>& set, bool marks) {
  auto o = std::make_unique<Ours>();
  for (std::uint32_t i = 0; i < set.size(); ++i) {
    ws::FlowAction q, mark;
    q.type = ws::FlowActionType::queue, q.queue = 1;
    mark.type = ws::FlowActionType::mark, mark.mark = i + 1;
    o->rules.push_back(flow_rule(set[i], marks ? std::vector{mark, q} : std::vector{q}));
  }
  o->counters = std::make_unique<ws::FlowCounters[]>(set.size());
  std::vector<std::pair<const ws::FlowRule*, ws::FlowCounters*>> in;
  for (std::size_t i = 0; i < set.size(); ++i) in.emplace_back(&o->rules[i], &o->counters[i]);
  const auto t0 = std::chrono::steady_clock::now();
  o->c = std::make_unique<ws::FlowClassifier>(in, false, 2, &o->dropped);
  o->build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

// Rule i + 1 that each packet matched on our side (0: none), through mark ids.
std::vector<std::uint32_t> our_winners(const std::vector<Acl5>& set, const std::vector<ws::Mbuf*>& pkts) {
  const auto o = ours_of(set, true);
  std::vector<std::uint32_t> won;
  for (ws::Mbuf* m : pkts) {
    m->ol_flags = 0;
    (void)o->c->classify_one(*m);
    won.push_back((m->ol_flags & ws::mbuf_flag::rx_fdir_id) ? m->mark : 0);
    m->ol_flags = 0;
  }
  return won;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  auto arena = ws::Arena::create({"flow_bench", 64u << 20, ws::HugePolicy::never});
  if (!arena) return fmt::print(stderr, "{}\n", arena.error().message), 1;
  auto pool = ws::PktmbufPool::create(**arena, {.name = "flow_bench", .count = 1023, .cache_size = 0});
  if (!pool) return fmt::print(stderr, "{}\n", pool.error().message), 1;
#if WS_BENCH_ACL
  init_eal();
#endif
  fmt::print("cycles/packet, median of {} rounds; 256 TCP/UDP packets, half inside a random rule's ranges\n", rounds);
  fmt::print(
      "rules  wirespeed  rte_acl  ours/acl  |  min: wirespeed  rte_acl  ours/acl  |  matched  build_ms  index_KiB\n");
  std::vector<unsigned> sizes{1, 16, 256, 4096};
  if (argc > 2) sizes.clear();
  for (int i = 2; i < argc; ++i) sizes.push_back(static_cast<unsigned>(std::atoi(argv[i])));
  for (unsigned n : sizes) {
    Rng g{n * 7919u + 1};
    std::vector<Acl5> set;
    for (unsigned i = 0; i < n; ++i) set.push_back(random_rule(g));
    const auto ours = ours_of(set, false);
    const auto pkts = packets(**pool, set, g);
    const std::vector<std::uint32_t> won = our_winners(set, pkts);
    const auto matched = std::ranges::count_if(won, [](std::uint32_t w) { return w != 0; });
    const unsigned reps = std::max(1u, 65536u / (n < 64 ? 64 : n));
    std::vector<double> mine, acl;
#if WS_BENCH_ACL
    const rte_acl_ctx* ctx = acl_of(set);
    if (ctx == nullptr) return fmt::print(stderr, "rte_acl: cannot build {} rules\n", n), 1;
    for (std::size_t i = 0; i < pkts.size(); ++i) {
      const std::uint8_t* d = acl_data(pkts[i]);
      std::uint32_t res = 0;
      rte_acl_classify(ctx, &d, &res, 1, 1);
      if (res != won[i])
        return fmt::print(stderr, "{} rules, packet {}: ours rule {}, rte_acl rule {}\n", n, i, won[i], res), 1;
    }
#endif
    for (int r = 0; r < rounds; ++r) {  // both sides in turn, so that drift hits both alike
      mine.push_back(ours_round(*ours->c, pkts, reps));
#if WS_BENCH_ACL
      acl.push_back(acl_round(ctx, pkts, reps));
#endif
    }
    const double a = acl.empty() ? 0 : median(acl), o = median(mine), amin = least(acl), omin = least(mine);
    fmt::print("{:5}  {:9.1f}  {:7.1f}  {:8.2f}  |  {:14.1f}  {:7.1f}  {:8.2f}  |  {:7}  {:8.2f}  {:9.1f}\n", n, o, a,
               a ? o / a : 0.0, omin, amin, amin ? omin / amin : 0.0, matched, ours->build_ms,
               static_cast<double>(ws::flow_index_bytes(ours->c->index())) / 1024);
    ws::mbuf_free_bulk({pkts.data(), pkts.size()});
  }
  return 0;
}
