// SPDX-License-Identifier: BSD-3-Clause
// Flow rules: the testpmd text parser, the matcher on hand-built packets (every item, spec,
// mask, last and prefix, passthru, jump, isolate) and a port's FlowTable through net_ring
// (queue moves, drops in ierrors, marks, counters, no classifier without rules).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ws/flow/classifier.hpp"
#include "ws/flow/flow_table.hpp"
#include "ws/flow/parse.hpp"
#include "ws/net/packet_builder.hpp"
#include "ws/testing/port_fixture.hpp"

namespace ws {
namespace {

class FlowTest : public testing::PortFixture {
 protected:
  void SetUp() override {
    open_arena_and_pool("flow_test", 32u << 20, {.name = "flow", .count = 2048, .cache_size = 0});
  }
  void TearDown() override { EXPECT_EQ(pool_->in_use(), 0u) << "an mbuf was not returned"; }

  Mbuf* packet(const FrameSpec& s) {
    const BuiltFrame f = build_frame(s);
    Mbuf* m = pool_->alloc();
    EXPECT_NE(m, nullptr);
    std::memcpy(m->append(static_cast<std::uint16_t>(f.bytes.size())), f.bytes.data(), f.bytes.size());
    return m;
  }

  // The verdict of `rules` (testpmd text, in creation order) for a packet built from `s`.
  std::uint16_t verdict(const std::vector<std::string>& rules, const FrameSpec& s, bool isolated = false) {
    std::vector<FlowRule> parsed;
    for (const auto& t : rules) {
      auto r = parse_flow_rule(t);
      EXPECT_TRUE(r.has_value()) << t << ": " << (r ? "" : r.error().message);
      if (!r) return 0xdead;
      parsed.push_back(*r);
    }
    std::vector<FlowCounters> counters(parsed.size());
    std::vector<std::pair<const FlowRule*, FlowCounters*>> in;
    for (std::size_t i = 0; i < parsed.size(); ++i) in.emplace_back(&parsed[i], &counters[i]);
    Counter dropped;
    FlowClassifier c(in, isolated, 4, &dropped);
    Mbuf* m = packet(s);
    const std::uint16_t v = c.classify_one(*m);
    last_mark_ = (m->ol_flags & mbuf_flag::rx_fdir_id) ? static_cast<std::int64_t>(m->mark) : -1;
    mbuf_free(m);
    return v;
  }
  std::int64_t last_mark_ = -1;

  static std::string rule(const std::string& pattern, const std::string& actions = "queue index 2 / end") {
    return "ingress pattern " + pattern + " actions " + actions;
  }
};

TEST_F(FlowTest, EveryItemMatchesItsFields) {
  const FrameSpec udp;  // 192.168.0.1:1234 -> 192.168.0.2:5678
  EXPECT_EQ(verdict({rule("end")}, udp), 2);
  EXPECT_EQ(verdict({rule("eth / ipv4 dst is 192.168.0.2 / udp / end")}, udp), 2);
  EXPECT_EQ(verdict({rule("eth / ipv4 dst is 192.168.0.3 / udp / end")}, udp), flow_keep);
  EXPECT_EQ(verdict({rule("eth / ipv4 src is 192.168.0.1 / udp src is 1234 dst is 5678 / end")}, udp), 2);
  EXPECT_EQ(verdict({rule("eth / ipv4 / tcp / end")}, udp), flow_keep);
  EXPECT_EQ(verdict({rule("eth / ipv4 proto is 17 ttl is 64 / end")}, udp), 2);
  EXPECT_EQ(verdict({rule("eth type is 0x0800 / end")}, udp), 2);
  EXPECT_EQ(verdict({rule("eth type is 0x86dd / end")}, udp), flow_keep);
  FrameSpec tcp;
  tcp.l4_proto = ip_proto_tcp;
  EXPECT_EQ(verdict({rule("eth / ipv4 / tcp dst is 5678 / end")}, tcp), 2);
  FrameSpec icmp;
  icmp.l4_proto = ip_proto_icmp;
  EXPECT_EQ(verdict({rule("eth / ipv4 / icmp type is 8 / end")}, icmp), 2);
  EXPECT_EQ(verdict({rule("eth / ipv4 / icmp type is 0 / end")}, icmp), flow_keep);
  FrameSpec v6;
  v6.ipv6 = true;
  EXPECT_EQ(verdict({rule("eth / ipv6 src is 2122:2324:2526:2728:292a:2b2c:2d2e:2f30 / udp / end")}, v6), 2);
  EXPECT_EQ(verdict({rule("eth / ipv6 / udp / end")}, udp), flow_keep);
  FrameSpec tagged;
  tagged.vlan_tags = 1;
  tagged.vlan_tci = 100;
  EXPECT_EQ(verdict({rule("eth / vlan vid is 100 / ipv4 / end")}, tagged), 2);
  EXPECT_EQ(verdict({rule("eth / vlan vid is 101 / ipv4 / end")}, tagged), flow_keep);
  EXPECT_EQ(verdict({rule("eth / vlan / end")}, udp), flow_keep);
}

TEST_F(FlowTest, MaskLastAndPrefix) {
  const FrameSpec udp;
  EXPECT_EQ(verdict({rule("eth / ipv4 dst spec 192.168.7.2 dst mask 255.255.0.255 / end")}, udp), 2);
  EXPECT_EQ(verdict({rule("eth / ipv4 dst spec 192.168.7.9 dst prefix 16 / end")}, udp), 2);
  EXPECT_EQ(verdict({rule("eth / ipv4 dst spec 10.0.0.0 dst prefix 8 / end")}, udp), flow_keep);
  EXPECT_EQ(verdict({rule("eth / ipv4 / udp dst spec 5000 dst last 6000 dst mask 0xffff / end")}, udp), 2);
  EXPECT_EQ(verdict({rule("eth / ipv4 / udp dst spec 6000 dst last 7000 dst mask 0xffff / end")}, udp), flow_keep);
  // As rte_flow: a field whose last is 0 makes no range; the item's other fields stay exact.
  EXPECT_EQ(verdict({rule("eth / ipv4 / udp src spec 1000 src last 2000 src mask 0xffff dst is 5678 / end")}, udp), 2);
  EXPECT_EQ(verdict({rule("eth / ipv4 / udp src spec 1000 src last 2000 src mask 0xffff dst is 5679 / end")}, udp),
            flow_keep);
  // A spec with no mask takes DPDK's default one (ipv4: the addresses, here 0.0.0.0).
  EXPECT_EQ(verdict({rule("eth / ipv4 proto spec 17 / end")}, udp), flow_keep);
  FrameSpec zero;
  zero.src_ip = zero.dst_ip = 0;
  EXPECT_EQ(verdict({rule("eth / ipv4 proto spec 6 / end")}, zero), 2);
}

TEST_F(FlowTest, OrderPassthruJumpMarkAndIsolate) {
  const FrameSpec udp;
  // Lower priority values first, then older rules.
  EXPECT_EQ(
      verdict({rule("end", "queue index 1 / end"), "ingress priority 0 pattern eth / end actions drop / end"}, udp), 1);
  EXPECT_EQ(verdict({"ingress priority 1 pattern end actions queue index 1 / end", rule("end", "drop / end")}, udp),
            flow_drop);
  EXPECT_EQ(verdict({rule("end", "mark id 7 / passthru / end"), rule("end", "queue index 3 / end")}, udp), 3);
  EXPECT_EQ(last_mark_, 7);
  EXPECT_EQ(
      verdict({rule("end", "jump group 5 / end"), "ingress group 5 pattern udp / end actions queue index 1 / end"},
              udp),
      1);
  EXPECT_EQ(verdict({"ingress group 5 pattern end actions drop / end"}, udp), flow_keep);  // group 5 not reached
  EXPECT_EQ(verdict({rule("tcp / end")}, udp, true), flow_drop);
  EXPECT_EQ(verdict({rule("udp / end", "mark id 3 / end")}, udp, true), flow_keep);
  EXPECT_EQ(last_mark_, 3);
}

TEST_F(FlowTest, ParserErrorsNameTheWord) {
  for (const char* bad :
       {"", "ingress", "ingress pattern eth", "ingress pattern foo / end actions drop / end",
        "ingress pattern eth dst is 1:2 / end actions drop / end",
        "ingress pattern ipv4 dst is 300.0.0.1 / end actions drop / end",
        "ingress pattern eth / end actions queue / end", "ingress pattern end actions nope / end",
        "ingress pattern end actions drop / end extra", "ingress pattern udp src is 70000 / end actions drop / end"}) {
    auto r = parse_flow_rule(bad);
    EXPECT_FALSE(r.has_value()) << bad;
  }
}

TEST_F(FlowTest, CompileErrorsCarryDpdkTypes) {
  auto type_of = [](const std::string& text) {
    auto r = parse_flow_rule(text);
    EXPECT_TRUE(r.has_value()) << text;
    auto c = compile_flow(*r, 2);
    return c ? FlowErrorType::none : c.error().type;
  };
  EXPECT_EQ(type_of("egress pattern end actions drop / end"), FlowErrorType::attr_egress);
  EXPECT_EQ(type_of("transfer pattern end actions drop / end"), FlowErrorType::attr_transfer);
  EXPECT_EQ(type_of("pattern end actions drop / end"), FlowErrorType::attr_ingress);
  EXPECT_EQ(type_of("ingress pattern end actions queue index 2 / end"), FlowErrorType::action);
  EXPECT_EQ(type_of("ingress pattern end actions rss queues 0 5 end / end"), FlowErrorType::action_conf);
  EXPECT_EQ(type_of("ingress pattern end actions drop / queue index 0 / end"), FlowErrorType::action);
  EXPECT_EQ(type_of("ingress group 2 pattern end actions jump group 1 / end"), FlowErrorType::action_conf);
  EXPECT_EQ(type_of("ingress pattern udp / ipv4 / end actions drop / end"), FlowErrorType::item);
  EXPECT_EQ(type_of("ingress pattern udp dst spec 9 dst last 8 / end actions drop / end"), FlowErrorType::item_last);
  EXPECT_EQ(type_of("ingress pattern end actions end"), FlowErrorType::action_num);
  EXPECT_EQ(type_of("ingress pattern eth / end actions drop / end"), FlowErrorType::none);
}

TEST_F(FlowTest, PortMovesDropsMarksAndCounts) {
  auto port = create("net_ring0");
  ASSERT_NE(port, nullptr);
  ASSERT_TRUE(port->configure({.rx_queues = 2, .tx_queues = 2}).has_value());
  for (std::uint16_t q = 0; q < 2; ++q) {
    ASSERT_TRUE(port->setup_rx_queue(q, {.pool = pool_.get()}).has_value());
    ASSERT_TRUE(port->setup_tx_queue(q, {}).has_value());
  }
  ASSERT_TRUE(port->start().has_value());
  EXPECT_FALSE(port->software_rss()) << "no rules: the driver's entries";
  FlowTable& flows = port->flows();
  auto add = [&](const std::string& text) {
    auto r = parse_flow_rule(text);
    EXPECT_TRUE(r.has_value()) << text;
    auto id = flows.create(*r);
    EXPECT_TRUE(id.has_value()) << text << ": " << (id ? "" : id.error().message);
    return id.value_or(99);
  };
  EXPECT_EQ(add("ingress pattern eth / ipv4 dst is 192.168.0.2 / udp / end actions count / queue index 1 / end"), 0u);
  EXPECT_EQ(add("ingress pattern eth / ipv4 / tcp / end actions drop / end"), 1u);
  EXPECT_EQ(add("ingress pattern eth / ipv4 / icmp / end actions mark id 42 / end"), 2u);
  EXPECT_TRUE(port->software_rss());
  FrameSpec tcp, icmp;
  tcp.l4_proto = ip_proto_tcp;
  icmp.l4_proto = ip_proto_icmp;
  Mbuf* out[4] = {packet({}), packet(tcp), packet(icmp), packet({})};
  ASSERT_EQ(port->tx_burst(0, out, 4), 4);
  Mbuf* got[8];
  ASSERT_EQ(port->rx_burst(0, got, 8), 1);  // the ICMP packet stays on queue 0, marked
  EXPECT_TRUE(got[0]->ol_flags & mbuf_flag::rx_fdir_id);
  EXPECT_EQ(got[0]->mark, 42u);
  mbuf_free(got[0]);
  ASSERT_EQ(port->rx_burst(1, got, 8), 2);  // both UDP packets moved to queue 1
  mbuf_free_bulk({got, 2});
  auto counts = flows.query_count(0);
  ASSERT_TRUE(counts.has_value());
  EXPECT_EQ(counts->hits, 2u);
  EXPECT_GT(counts->bytes, 0u);
  EXPECT_EQ(flows.query_count(1).error().type, FlowErrorType::action);
  EXPECT_EQ(port->stats().ierrors, 1u);  // the TCP packet
  EXPECT_TRUE(flows.destroy(1).value());
  EXPECT_FALSE(flows.destroy(1).value());
  EXPECT_EQ(add("ingress pattern end actions drop / end"), 3u);  // newest id + 1
  ASSERT_TRUE(flows.flush().has_value());
  EXPECT_FALSE(port->software_rss()) << "no rules left: the driver's entries again";
  port->stop();
}

}  // namespace
}  // namespace ws
