// SPDX-License-Identifier: BSD-3-Clause
// Kernel offload of flow rules through a fake driver that "offloads" drop and queue rules into
// numbered slots: only a prefix of group 0's order is offered, a higher-priority software rule
// takes lower ones back out of the kernel (last slot first), a queue rule another rule could
// also match stays in software, a kernel refusal is not retried, counts survive unoffloading,
// and reconfiguring takes every rule out first. Plus the pattern-level helpers
// (flow_exact_match, flow_matches_disjoint).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ws/flow/flow_table.hpp"
#include "ws/flow/parse.hpp"
#include "ws/port/port.hpp"

namespace ws {
namespace {

class OffloadPort final : public Port {
 public:
  OffloadPort() : Port("net_offload0", "net_offload") {}
  PortInfo info() const override { return {"net_offload", 4, 4, 0, 4096}; }
  Result<void> setup_rx_queue(std::uint16_t, const RxQueueConfig&) override { return {}; }
  Result<void> setup_tx_queue(std::uint16_t, const TxQueueConfig&) override { return {}; }

  std::vector<std::string> slots;  // the text of the rule in each slot, slot order
  std::vector<std::string> log;    // "+0", "-0": offload and unoffload calls
  bool refuse_kernel = false;
  std::uint64_t hits_each = 0;  // what the "kernel" counts for every offloaded rule

 protected:
  Result<void> do_start() override { return {}; }
  PortStats read_stats() const override { return {}; }
  FlowOffloadResult do_flow_offload(const FlowRule& rule, std::uint32_t slot) override {
    if (rule.text.find("tcp") != std::string::npos) return std::unexpected(FlowOffloadRefusal{false, "no tcp"});
    if (refuse_kernel) return std::unexpected(FlowOffloadRefusal{true, "kernel says no"});
    EXPECT_EQ(slot, slots.size()) << "slots are filled in order";
    slots.push_back(rule.text);
    log.push_back("+" + std::to_string(slot));
    return FlowOffload{FlowPlace::kernel_xdp, slot};
  }
  void do_flow_unoffload(const FlowOffload& o) override {
    EXPECT_EQ(o.handle + 1, slots.size()) << "the last slot goes first";
    slots.pop_back();
    log.push_back("-" + std::to_string(o.handle));
  }
  FlowCounts do_flow_offload_counts(const FlowOffload&) const override { return {hits_each, hits_each * 60}; }
};

class FlowOffloadTest : public testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(port_.configure({.rx_queues = 2, .tx_queues = 2}).has_value()); }
  std::uint32_t create(const std::string& text) {
    auto rule = parse_flow_rule("ingress " + text);
    EXPECT_TRUE(rule.has_value()) << text;
    rule->text = text;
    auto id = port_.flows().create(*rule);
    EXPECT_TRUE(id.has_value()) << text;
    return id.value_or(~0u);
  }
  std::string places() const {
    std::string out;
    for (const auto* e : port_.flows().list()) out += std::string(flow_place_name(e->place)) + ";";
    return out;
  }
  OffloadPort port_;
};

constexpr const char* udp1 = "pattern eth / ipv4 / udp dst is 1 / end actions drop / count / end";
constexpr const char* udp2 = "pattern eth / ipv4 / udp dst is 2 / end actions drop / end";

TEST_F(FlowOffloadTest, OnlyAPrefixOfTheOrderRunsInTheKernel) {
  create(udp1);
  create("pattern eth / ipv4 / udp / end actions mark id 1 / end");  // software only: the prefix ends
  create(udp2);
  EXPECT_EQ(places(), "kernel XDP;software;software;");
  EXPECT_NE(port_.flows().classifier(), nullptr);
  // The mark rule goes: the drop rule after it joins the prefix.
  ASSERT_TRUE(port_.flows().destroy(1).has_value());
  EXPECT_EQ(places(), "kernel XDP;kernel XDP;");
  EXPECT_EQ(port_.flows().classifier(), nullptr) << "every rule in the kernel, none in software";
}

TEST_F(FlowOffloadTest, AHigherPriorityRuleTakesLowerOnesBackOut) {
  create("priority 2 " + std::string(udp1));
  create("priority 2 " + std::string(udp2));
  EXPECT_EQ(port_.log, (std::vector<std::string>{"+0", "+1"}));
  create("priority 1 pattern eth / ipv4 / tcp / end actions drop / end");  // the driver cannot
  EXPECT_EQ(port_.log, (std::vector<std::string>{"+0", "+1", "-1", "-0"}));
  EXPECT_EQ(places(), "software;software;software;");
  ASSERT_TRUE(port_.flows().destroy(2).has_value());
  EXPECT_EQ(places(), "kernel XDP;kernel XDP;");
}

TEST_F(FlowOffloadTest, QueueRulesOnlyWhenNothingElseCouldMatch) {
  create("pattern eth / ipv4 / udp dst is 7 / end actions queue index 1 / end");
  create("pattern eth / ipv4 / udp dst is 8 / end actions queue index 1 / end");
  EXPECT_EQ(places(), "kernel XDP;kernel XDP;") << "disjoint ports";
  create("pattern eth / ipv4 / udp / end actions mark id 3 / end");  // also matches port 7's packets
  EXPECT_EQ(places(), "software;software;software;");
  ASSERT_TRUE(port_.flows().flush().has_value());
  ASSERT_TRUE(port_.flows().isolate(true).has_value());
  create("pattern eth / ipv4 / udp dst is 7 / end actions queue index 1 / end");
  EXPECT_EQ(places(), "software;") << "isolated: software would drop what the kernel queued";
}

TEST_F(FlowOffloadTest, KernelRefusalStaysInSoftwareAndCountsSurvive) {
  port_.refuse_kernel = true;
  create(udp1);
  EXPECT_EQ(places(), "software;");
  port_.refuse_kernel = false;
  create(udp2);
  EXPECT_EQ(places(), "software;software;") << "refused once: not offered again, nor what follows";
  // Reconfiguring (a fresh kernel program) offers it again; counts carry over unoffloading.
  ASSERT_TRUE(port_.configure({.rx_queues = 2, .tx_queues = 2}).has_value());
  EXPECT_EQ(places(), "kernel XDP;kernel XDP;");
  port_.hits_each = 5;
  ASSERT_TRUE(port_.configure({.rx_queues = 2, .tx_queues = 2}).has_value());
  EXPECT_EQ(port_.flows().query_count(0)->hits, 10u) << "5 before the reconfiguration, 5 now";
}

TEST(FlowExactMatch, DisjointPatterns) {
  const auto m = [](const char* text) { return flow_exact_match(*parse_flow_rule(text)).value(); };
  const auto a = m("ingress pattern eth / ipv4 src is 10.0.0.1 / udp / end actions drop / end");
  EXPECT_FALSE(flow_matches_disjoint(a, m("ingress pattern eth / ipv4 / end actions drop / end")));
  EXPECT_TRUE(flow_matches_disjoint(a, m("ingress pattern eth / ipv4 src is 10.0.0.2 / end actions drop / end")));
  EXPECT_TRUE(flow_matches_disjoint(a, m("ingress pattern eth / ipv4 / tcp / end actions drop / end")));
  EXPECT_TRUE(flow_matches_disjoint(a, m("ingress pattern eth / ipv6 / end actions drop / end")));
  EXPECT_FALSE(
      flow_exact_match(*parse_flow_rule("ingress pattern eth / udp dst spec 1 dst last 9 / end actions drop / end"))
          .has_value());
}

}  // namespace
}  // namespace ws
