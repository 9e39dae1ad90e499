// SPDX-License-Identifier: BSD-3-Clause
// The software flow classifier's cost per packet (ws/flow/classifier.hpp) with 1, 16, 256 and
// 4096 5-tuple rules (IPv4 src/dst, UDP src/dst, each rule "queue index 1"): 256 UDP packets,
// half matching rules spread over the table, half matching none (the worst case: every rule
// is tried). Each case classifies the burst many times and prints the median cycles/packet of
// several rounds. Built with Debian's libdpdk (WS_BENCH_ACL), the same rules go into rte_acl
// (proto, addresses as /32 masks, ports as ranges, l3fwd-acl's field layout) and the same
// packets are classified by rte_acl_classify, 32 at a time, in the same process: rte_acl is given
// pointers at the IPv4 protocol byte, where ours reads the headers from the Ethernet header on.
// usage: flow_classifier [rounds]
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ws/core/arena.hpp"
#include "ws/core/cpu.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/flow/classifier.hpp"
#include "ws/net/packet_builder.hpp"

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

// Rule i: 10.<i>.0.1:<1000+i> -> 10.<i>.0.2:<2000+i>, UDP.
ws::FlowRule five_tuple_rule(unsigned i) {
  ws::FlowRule r;
  r.attr.ingress = true;
  ws::FlowItem eth, ip, udp;
  ip.type = ws::FlowItemType::ipv4;
  udp.type = ws::FlowItemType::udp;
  const auto a = fmt::format("10.{}.{}.", i >> 8, i & 255);
  (void)ip.set("src", "is", a + "1");
  (void)ip.set("dst", "is", a + "2");
  (void)udp.set("src", "is", std::to_string(1000 + i));
  (void)udp.set("dst", "is", std::to_string(2000 + i));
  r.pattern = {eth, ip, udp};
  ws::FlowAction q;
  q.type = ws::FlowActionType::queue;
  q.queue = 1;
  r.actions = {q};
  return r;
}

ws::FrameSpec packet_for(unsigned rule, bool hit) {
  ws::FrameSpec s;
  s.src_ip = (10u << 24) | (rule << 8) | 1;
  s.dst_ip = (10u << 24) | (rule << 8) | 2;
  s.src_port = static_cast<std::uint16_t>(1000 + rule);
  s.dst_port = static_cast<std::uint16_t>(hit ? 2000 + rule : 9);
  return s;
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

rte_acl_ctx* acl_of(unsigned n) {
  static int made = 0;
  const std::string name = fmt::format("flowbench{}", made++);
  rte_acl_param param{name.c_str(), SOCKET_ID_ANY, RTE_ACL_RULE_SZ(5), n};
  rte_acl_ctx* ctx = rte_acl_create(&param);
  for (unsigned i = 0; i < n && ctx; ++i) {
    AclRule r{};
    r.data = {1, static_cast<std::int32_t>(n - i), i + 1};  // category 1; older rules first, as ours
    r.field[0].value.u8 = 17;
    r.field[0].mask_range.u8 = 0xff;
    r.field[1].value.u32 = (10u << 24) | (i << 8) | 1;
    r.field[1].mask_range.u32 = 32;
    r.field[2].value.u32 = (10u << 24) | (i << 8) | 2;
    r.field[2].mask_range.u32 = 32;
    r.field[3].value.u16 = r.field[3].mask_range.u16 = static_cast<std::uint16_t>(1000 + i);
    r.field[4].value.u16 = r.field[4].mask_range.u16 = static_cast<std::uint16_t>(2000 + i);
    if (rte_acl_add_rules(ctx, reinterpret_cast<rte_acl_rule*>(&r), 1) != 0) return nullptr;
  }
  rte_acl_config cfg{};
  cfg.num_categories = 1;
  cfg.num_fields = 5;
  std::memcpy(cfg.defs, acl_fields, sizeof acl_fields);
  if (ctx && rte_acl_build(ctx, &cfg) != 0) return nullptr;
  return ctx;
}

// rte_acl's cycles/packet over the same packets.
double acl_round(const rte_acl_ctx* ctx, const std::vector<ws::Mbuf*>& pkts, unsigned reps) {
  const std::uint8_t* data[256];
  for (std::size_t i = 0; i < pkts.size(); ++i) data[i] = pkts[i]->data() + 14 + 9;
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

// 256 packets: even ones match a rule spread over the table, odd ones match none.
std::vector<ws::Mbuf*> packets(ws::PktmbufPool& pool, unsigned n) {
  std::vector<ws::Mbuf*> pkts;
  for (unsigned i = 0; i < 256; ++i) {
    const ws::BuiltFrame f = ws::build_frame(packet_for((i * 2654435761u) % n, i % 2 == 0));
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
  fmt::print("cycles/packet, median of {} rounds; 256 UDP packets, half matching a rule, half none\n", rounds);
  fmt::print("rules  wirespeed  rte_acl\n");
  for (unsigned n : {1u, 16u, 256u, 4096u}) {
    std::vector<ws::FlowRule> rules;
    for (unsigned i = 0; i < n; ++i) rules.push_back(five_tuple_rule(i));
    std::vector<ws::FlowCounters> counters(n);
    std::vector<std::pair<const ws::FlowRule*, ws::FlowCounters*>> in;
    for (unsigned i = 0; i < n; ++i) in.emplace_back(&rules[i], &counters[i]);
    ws::Counter dropped;
    const ws::FlowClassifier c(in, false, 2, &dropped);
    const auto pkts = packets(**pool, n);
    const unsigned reps = std::max(1u, 4096u / n);
    std::vector<double> ours, acl;
#if WS_BENCH_ACL
    const rte_acl_ctx* ctx = acl_of(n);
    if (ctx == nullptr) return fmt::print(stderr, "rte_acl: cannot build {} rules\n", n), 1;
#endif
    for (int r = 0; r < rounds; ++r) {  // both sides in turn, so that drift hits both alike
      ours.push_back(ours_round(c, pkts, reps));
#if WS_BENCH_ACL
      acl.push_back(acl_round(ctx, pkts, reps));
#endif
    }
    fmt::print("{:5}  {:9.1f}  {}\n", n, median(ours), acl.empty() ? "-" : fmt::format("{:7.1f}", median(acl)));
    ws::mbuf_free_bulk({pkts.data(), pkts.size()});
  }
  return 0;
}
