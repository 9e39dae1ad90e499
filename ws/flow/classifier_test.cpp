// SPDX-License-Identifier: BSD-3-Clause
// The classifier's multi-field index against the plain reading of the rules: random rule sets
// (every item and field, masks with and without holes, ranges, prefixes, IPv6, VLAN,
// priorities, groups, jump, passthru, isolation) and random packets from the same small pools
// of addresses and ports, so that rules overlap and packets hit edges; each packet's verdict
// and mark from classify (the burst path) and classify_one must equal a linear scan over
// compile_flow and flow_matches in DPDK's order. Plus the interval edges by hand.
#include "ws/flow/classifier.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

#include "ws/flow/parse.hpp"
#include "ws/net/packet_builder.hpp"
#include "ws/testing/port_fixture.hpp"
#include "ws/testing/rng.hpp"

namespace ws {
namespace {

using testing::Rng;

constexpr std::uint16_t port_pool[] = {0, 53, 80, 443, 999, 1000, 1001, 1500, 2000, 2001, 4095, 4096, 65535};

std::uint32_t v4(Rng& g) { return (10u << 24) | (g.below(4) << 16) | (g.below(8) << 8) | g.below(16); }
std::string v4_text(std::uint32_t a) {
  return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}
std::array<std::uint8_t, 16> v6(Rng& g) {
  std::array<std::uint8_t, 16> a{0x20, 0x01, 0x0d, 0xb8};
  a[5] = static_cast<std::uint8_t>(g.below(4));
  a[7] = static_cast<std::uint8_t>(g.below(4));
  a[15] = static_cast<std::uint8_t>(g.below(8));
  return a;
}
std::string v6_text(const std::array<std::uint8_t, 16>& a) {
  std::string s;
  for (unsigned i = 0; i < 16; i += 2) s += fmt::format("{}{:x}", i ? ":" : "", (a[i] << 8) | a[i + 1]);
  return s;
}
std::uint16_t port(Rng& g) { return port_pool[g.below(std::size(port_pool))]; }

// One field the random way: exact, prefix, mask (with or without holes), or a range.
std::string address_field(Rng& g, const char* name, const std::string& value, const std::string& upper, unsigned bits) {
  switch (g.below(5)) {
    case 0:
      return fmt::format("{} is {} ", name, value);
    case 1:
    case 2:
      return fmt::format("{0} spec {1} {0} prefix {2} ", name, value, g.below(bits + 1));
    case 3:
      return bits == 32 ? fmt::format("{0} spec {1} {0} mask 255.0.255.0 ", name, value)
                        : fmt::format("{0} spec {1} {0} mask ffff:ffff::ff ", name, value);
    default:
      return fmt::format("{0} spec {1} {0} last {2} ", name, value, upper);
  }
}

std::string port_field(Rng& g, const char* name) {
  const unsigned a = port(g), b = port(g);
  switch (g.below(6)) {
    case 0:
    case 1:
      return fmt::format("{} is {} ", name, a);
    case 2:
      return fmt::format("{0} spec {1} {0} last {2} {0} mask 0xffff ", name, std::min(a, b), std::max(a, b));
    case 3:
      return fmt::format("{0} spec {1} {0} mask 0xff00 ", name, a);
    case 4:
      return fmt::format("{0} spec {1} {0} mask 0x0f0f ", name, a);  // holes: the full check decides
    default:
      return fmt::format("{0} spec {1} {0} last {2} {0} mask 0xfff0 ", name, std::min(a, b), std::max(a, b));
  }
}

std::string l3_items(Rng& g, bool& ipv6) {
  ipv6 = g.chance(25);
  std::string s;
  if (!ipv6) {
    if (!g.chance(75)) return "";
    s = "ipv4 ";
    const std::uint32_t a = v4(g), b = v4(g);
    if (g.chance(60)) s += address_field(g, "src", v4_text(std::min(a, b)), v4_text(std::max(a, b)), 32);
    if (g.chance(60)) s += address_field(g, "dst", v4_text(v4(g)), v4_text(v4(g) | 0xff), 32);
    if (g.chance(10)) s += fmt::format("proto is {} ", g.chance(50) ? 6 : 17);
    if (g.chance(5)) s += "ttl spec 10 ttl last 70 ttl mask 0xff ";
    return s + "/ ";
  }
  s = "ipv6 ";
  if (g.chance(60)) s += address_field(g, "src", v6_text(v6(g)), v6_text(v6(g)), 128);
  if (g.chance(50)) s += address_field(g, "dst", v6_text(v6(g)), v6_text(v6(g)), 128);
  return s + "/ ";
}

std::string pattern(Rng& g) {
  std::string s;
  if (g.chance(10))
    s += g.chance(50) ? "eth type is 0x0800 / " : "eth dst is 02:00:00:00:00:02 / ";
  else if (g.chance(70))
    s += "eth / ";
  if (g.chance(15))
    s += g.chance(50) ? fmt::format("vlan vid is {} / ", 100 + g.below(2)) : "vlan tci spec 0x2064 tci mask 0xe0ff / ";
  bool ipv6 = false;
  const std::string l3 = l3_items(g, ipv6);
  s += l3;
  if (l3.empty() || !g.chance(75)) return s + "end";
  const unsigned l4 = g.below(ipv6 ? 2 : 3);
  if (l4 == 2) return s + (g.chance(50) ? fmt::format("icmp type is {} / end", g.chance(50) ? 8 : 0) : "icmp / end");
  s += l4 ? "tcp " : "udp ";
  if (g.chance(40)) s += port_field(g, "src");
  if (g.chance(70)) s += port_field(g, "dst");
  if (l4 == 1 && g.chance(10)) s += "flags spec 0x10 flags mask 0x10 ";
  return s + "/ end";
}

std::string random_rule(Rng& g, unsigned max_group) {
  const unsigned group = g.chance(80) ? 0 : g.below(max_group + 1);
  std::string actions = g.chance(30) ? fmt::format("mark id {} / ", g.below(1000)) : "";
  const unsigned fate = g.below(10);
  if (fate < 5)
    actions += fmt::format("queue index {} / ", g.below(4));
  else if (fate < 7)
    actions += "drop / ";
  else if (fate < 8)
    actions += "passthru / ";
  else if (fate < 9 && group < max_group)
    actions += fmt::format("jump group {} / ", group + 1 + g.below(max_group - group));
  else if (actions.empty())
    actions = "mark id 7 / ";
  return fmt::format("ingress group {} priority {} pattern {} actions {}end", group, g.below(4), pattern(g), actions);
}

FrameSpec random_packet(Rng& g) {
  FrameSpec s;
  s.ipv6 = g.chance(25);
  const unsigned l4 = g.below(10);
  s.l4_proto = l4 < 4 ? ip_proto_udp : l4 < 8 ? ip_proto_tcp : l4 < 9 ? ip_proto_icmp : 47;
  if (s.ipv6 && s.l4_proto == ip_proto_icmp) s.l4_proto = ip_proto_icmpv6;
  s.vlan_tags = g.chance(20) ? 1 : 0;
  s.vlan_tci = static_cast<std::uint16_t>((g.below(2) << 13) | (100 + g.below(2)));
  s.src_ip = v4(g), s.dst_ip = v4(g);
  s.src_port = port(g), s.dst_port = port(g);
  s.tcp_flags = static_cast<std::uint8_t>(g.below(256));
  s.ipv4_option_words = g.chance(5) ? 1 : 0;
  return s;
}

// The plain reading: rules in DPDK's order, each checked in turn.
struct Reference {
  std::vector<std::pair<const FlowRule*, CompiledFlow>> sorted;
  bool isolated = false;

  std::uint16_t verdict(const FlowKey& key, std::int64_t& mark) const {
    std::uint32_t group = 0;
    bool matched = false;
    for (const auto& [rule, c] : sorted) {
      if (rule->attr.group != group || !flow_matches(c, key)) continue;
      matched = true;
      if (c.mark) mark = c.mark_id;
      if (c.fate == CompiledFlow::Fate::passthru) continue;
      if (c.fate == CompiledFlow::Fate::jump) {
        group = c.jump_group;  // compile_flow keeps the group id
        continue;
      }
      return c.fate == CompiledFlow::Fate::drop ? flow_drop : c.fate == CompiledFlow::Fate::queue ? c.queue : flow_keep;
    }
    return matched || !isolated ? flow_keep : flow_drop;
  }
};

class ClassifierTest : public testing::PortFixture {
 protected:
  void SetUp() override {
    open_arena_and_pool("classifier_test", 16u << 20, {.name = "cls", .count = 512, .cache_size = 0});
  }
  void TearDown() override { EXPECT_EQ(pool_->in_use(), 0u) << "an mbuf was not returned"; }

  Mbuf* packet(Rng& g) {
    const FrameSpec s = random_packet(g);
    BuiltFrame f = build_frame(s);
    if (s.ipv6) {  // the builder's addresses are fixed; these come from the rules' pool
      const std::size_t ip = 14 + 4u * s.vlan_tags;
      const auto src = v6(g), dst = v6(g);
      std::memcpy(f.bytes.data() + ip + 8, src.data(), 16);
      std::memcpy(f.bytes.data() + ip + 24, dst.data(), 16);
    }
    Mbuf* m = pool_->alloc();
    if (m == nullptr) std::abort();  // 512 mbufs, 32 in use at a time
    m->ol_flags = 0;                 // a recycled mbuf keeps the mark flag a classifier set
    std::memcpy(m->append(static_cast<std::uint16_t>(f.bytes.size())), f.bytes.data(), f.bytes.size());
    return m;
  }

  // `packets` random packets through a classifier of `texts` and through the reference.
  void compare(const std::vector<std::string>& texts, bool isolated, Rng& g, unsigned packets, bool expect_index) {
    std::vector<FlowRule> rules;
    for (const std::string& t : texts) {
      auto r = parse_flow_rule(t);
      ASSERT_TRUE(r.has_value()) << t << ": " << r.error().message;
      if (compile_flow(*r, 4)) rules.push_back(std::move(*r));  // a refused rule never reaches a table
    }
    compare(std::move(rules), isolated, g, packets, expect_index);
  }
  void compare(std::vector<FlowRule> rules, bool isolated, Rng& g, unsigned packets, bool expect_index);
};

void ClassifierTest::compare(std::vector<FlowRule> rules, bool isolated, Rng& g, unsigned packets, bool expect_index) {
  auto counters = std::make_unique<FlowCounters[]>(rules.size());
  std::vector<std::pair<const FlowRule*, FlowCounters*>> in;
  for (std::size_t i = 0; i < rules.size(); ++i) in.emplace_back(&rules[i], &counters[i]);
  Counter dropped;
  const FlowClassifier c(in, isolated, 4, &dropped);
  EXPECT_EQ(!c.index().blocks.empty(), expect_index) << rules.size() << " rules";
  Reference ref{{}, isolated};
  std::vector<std::size_t> order(rules.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::ranges::sort(order, {},
                    [&](std::size_t i) { return std::tuple(rules[i].attr.group, rules[i].attr.priority, i); });
  for (std::size_t i : order) ref.sorted.emplace_back(&rules[i], *compile_flow(rules[i], 4));
  for (unsigned done = 0; done < packets; done += 32) {
    Mbuf* burst[32];
    for (Mbuf*& m : burst) m = packet(g);
    std::uint16_t verdict[32];
    c.classify(burst, 32, verdict);
    std::string wrong;
    for (unsigned i = 0; i < 32 && wrong.empty(); ++i) {
      const std::int64_t burst_mark =
          (burst[i]->ol_flags & mbuf_flag::rx_fdir_id) ? static_cast<std::int64_t>(burst[i]->mark) : -1;
      burst[i]->ol_flags = 0;
      const std::uint16_t one = c.classify_one(*burst[i]);
      const std::int64_t one_mark =
          (burst[i]->ol_flags & mbuf_flag::rx_fdir_id) ? static_cast<std::int64_t>(burst[i]->mark) : -1;
      FlowKey key;
      flow_key_of(*burst[i], key);
      std::int64_t mark = -1;
      const std::uint16_t want = ref.verdict(key, mark);
      if (verdict[i] != want || one != want || burst_mark != mark || one_mark != mark)
        wrong = fmt::format("packet {} of {} rules: verdict {} (burst), {} (one), {} (reference); mark {}, {}, {}",
                            done + i, rules.size(), verdict[i], one, want, burst_mark, one_mark, mark);
    }
    mbuf_free_bulk({burst, 32});
    ASSERT_TRUE(wrong.empty()) << wrong;
  }
}

TEST_F(ClassifierTest, RandomRuleSetsMatchTheLinearReading) {
  Rng g{42};
  // Sizes on both sides of the scan threshold; group 0 only (the burst path's common case),
  // then with groups, jump and passthru (the walk), then isolated.
  for (const auto& [n, groups, isolated] :
       {std::tuple{3u, 0u, false}, std::tuple{6u, 0u, false}, std::tuple{64u, 0u, false}, std::tuple{65u, 0u, true},
        std::tuple{256u, 0u, false}, std::tuple{40u, 3u, false}, std::tuple{200u, 3u, true}}) {
    std::vector<std::string> texts;
    for (unsigned i = 0; i < n; ++i) texts.push_back(random_rule(g, groups));
    compare(texts, isolated, g, 512, n > 4);
  }
}

// More than one block of rules (FlowIndex::block_rules): the walk goes on into the next block,
// where the rules of higher priority sit. Rules built by hand: parsing thousands is slow under ASan.
TEST_F(ClassifierTest, RulesBeyondOneBlock) {
  Rng g{7};
  std::vector<FlowRule> rules(FlowIndex::block_rules + 300);
  for (unsigned i = 0; i < rules.size(); ++i) {
    FlowRule& r = rules[i];
    r.attr.ingress = true;
    r.attr.priority = i < FlowIndex::block_rules ? 1 : 0;
    r.pattern.resize(3);
    r.pattern[1].type = FlowItemType::ipv4;
    r.pattern[2].type = FlowItemType::udp;
    (void)r.pattern[1].set("src", "spec", v4_text(v4(g)));
    (void)r.pattern[1].set("src", "prefix", std::to_string(24 + g.below(9)));
    (void)r.pattern[2].set("dst", "is", std::to_string(port(g)));
    r.actions.resize(2);
    r.actions[0].type = FlowActionType::mark;
    r.actions[0].mark = i;
    r.actions[1].type = FlowActionType::queue;
    r.actions[1].queue = 1;
  }
  compare(std::move(rules), false, g, 256, true);
}

TEST_F(ClassifierTest, IntervalEdges) {
  Rng g{1};
  // Ranges and prefixes whose ends are the pool's values: 999/1000, 2000/2001, 4095/4096.
  const std::vector<std::string> texts = {
      "ingress pattern eth / ipv4 / udp dst spec 1000 dst last 2000 dst mask 0xffff / end actions queue index 1 / end",
      "ingress pattern eth / ipv4 / udp src spec 4096 src mask 0xf000 / end actions queue index 2 / end",
      "ingress pattern eth / ipv4 src spec 10.0.0.0 src prefix 32 / end actions queue index 3 / end",
      "ingress pattern eth / ipv4 dst spec 10.1.0.0 dst last 10.1.7.15 / end actions drop / end",
      "ingress pattern eth / ipv4 src spec 0.0.0.0 src prefix 0 / tcp dst is 65535 / end actions queue index 0 / end",
      "ingress pattern eth / ipv6 src spec 2001:db8:0:1:: src prefix 64 / udp dst spec 0 dst last 80 / end actions "
      "mark id 9 / end",
      "ingress pattern eth / ipv4 / udp dst is 0 / end actions queue index 2 / end",
  };
  compare(texts, false, g, 2048, true);
}

}  // namespace
}  // namespace ws
