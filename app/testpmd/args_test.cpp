// SPDX-License-Identifier: BSD-3-Clause
// parse_app_args: dpdk-testpmd's option names, both value forms, its defaults, and errors that
// name the option, the value and what is accepted (the EAL part: ws/eal/eal_args_test.cpp).
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "app/testpmd/app_args.hpp"
#include "app/testpmd/fwd/engine.hpp"

namespace ws::testpmd {
namespace {

std::vector<std::string> argv(std::initializer_list<const char*> words) { return {words.begin(), words.end()}; }

AppOptions app_ok(std::initializer_list<const char*> words) {
  const auto args = argv(words);
  auto r = parse_app_args(args);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r ? *r : AppOptions{};
}

// The error text for args that must be refused.
std::string app_error(const std::vector<std::string>& args) {
  auto r = parse_app_args(args);
  EXPECT_FALSE(r.has_value()) << "accepted: " << fmt::format("{}", fmt::join(args, " "));
  return r ? std::string() : r.error().message;
}

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "'" << (text) << "' lacks '" << (needle) << "'"

// ---------------------------------------------------------------- application options

TEST(AppArgs, DefaultsAreDpdkTestpmds) {
  const AppOptions o = app_ok({});
  EXPECT_EQ(o.forward_mode, "io");
  EXPECT_EQ(o.burst, 32);
  EXPECT_EQ(o.mbcache, 250u);
  EXPECT_EQ(o.nb_cores, 1u);
  EXPECT_EQ(o.rxq, 1);
  EXPECT_EQ(o.txq, 1);
  EXPECT_EQ(o.rxd, 0);
  EXPECT_EQ(o.txd, 0);
  EXPECT_EQ(o.txpkts, std::vector<std::uint16_t>{64});
  EXPECT_EQ(o.mbuf_size, 2176);
  EXPECT_EQ(o.total_num_mbufs, 0u);
  EXPECT_EQ(o.flowgen_clones, 0);
  EXPECT_EQ(o.topology, Topology::paired);
  EXPECT_FALSE(o.nb_ports.has_value());
  EXPECT_TRUE(o.eth_peers.empty());
  EXPECT_EQ(o.stats_period_s, 0u);
  EXPECT_EQ(o.tx_first, 0u);
  EXPECT_FALSE(o.interactive);
  EXPECT_FALSE(o.auto_start);
  EXPECT_EQ(o.duration_s, 0.0);
  EXPECT_TRUE(o.summary_json.empty());
  EXPECT_FALSE(o.record_core_cycles);
}

TEST(AppArgs, EqualsAndSeparateValueFormsAgree) {
  const AppOptions a = app_ok({"--forward-mode=mac", "--burst=64", "--nb-cores=2", "--rxq=4", "--txq=4",
                               "--rxd=512", "--txd=4096", "--mbcache=128", "--total-num-mbufs=8192",
                               "--stats-period=1", "--flowgen-clones=16", "--nb-ports=2", "--mbuf-size=4096"});
  const AppOptions b = app_ok({"--forward-mode", "mac", "--burst", "64", "--nb-cores", "2", "--rxq", "4", "--txq",
                               "4", "--rxd", "512", "--txd", "4096", "--mbcache", "128", "--total-num-mbufs",
                               "8192", "--stats-period", "1", "--flowgen-clones", "16", "--nb-ports", "2",
                               "--mbuf-size", "4096"});
  for (const AppOptions* o : {&a, &b}) {
    EXPECT_EQ(o->forward_mode, "mac");
    EXPECT_EQ(o->burst, 64);
    EXPECT_EQ(o->nb_cores, 2u);
    EXPECT_EQ(o->rxq, 4);
    EXPECT_EQ(o->txq, 4);
    EXPECT_EQ(o->rxd, 512);
    EXPECT_EQ(o->txd, 4096);
    EXPECT_EQ(o->mbcache, 128u);
    EXPECT_EQ(o->total_num_mbufs, 8192u);
    EXPECT_EQ(o->stats_period_s, 1u);
    EXPECT_EQ(o->flowgen_clones, 16);
    EXPECT_EQ(o->nb_ports, 2u);
    EXPECT_EQ(o->mbuf_size, 4096);
  }
}

TEST(AppArgs, EveryForwardModeIsAccepted) {
  for (const Engine& e : all_engines()) {
    const std::string_view m = e.name;
    const std::string opt = "--forward-mode=" + std::string(m);
    auto r = parse_app_args(argv({opt.c_str()}));
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(r->forward_mode, m);
  }
  for (std::string_view m : {"io", "mac", "macswap", "flowgen", "txonly", "rxonly"}) EXPECT_TRUE(find_engine(m)) << m;
}

TEST(AppArgs, BurstLimits) {
  EXPECT_EQ(app_ok({"--burst=1"}).burst, 1);
  EXPECT_EQ(app_ok({"--burst=512"}).burst, 512);
  for (const char* bad : {"--burst=513", "--burst=1024", "--burst=0"}) {
    const std::string e = app_error(argv({bad}));
    EXPECT_HAS(e, "--burst");
    EXPECT_HAS(e, "512");
  }
  const std::string e = app_error(argv({"--burst", "many"}));
  EXPECT_HAS(e, "--burst=many");
  EXPECT_HAS(e, "[1, 512]");
}

TEST(AppArgs, TxpktsSegments) {
  EXPECT_EQ(app_ok({"--txpkts=64,1400"}).txpkts, (std::vector<std::uint16_t>{64, 1400}));
  EXPECT_EQ(app_ok({"--txpkts", "1500"}).txpkts, std::vector<std::uint16_t>{1500});
  EXPECT_EQ(app_ok({"--txpkts=42,1,1,1,1,1,1,1"}).txpkts.size(), 8u);

  std::string e = app_error(argv({"--txpkts=64,64,64,64,64,64,64,64,64"}));
  EXPECT_HAS(e, "--txpkts");
  EXPECT_HAS(e, "at most 8 segments");
  e = app_error(argv({"--txpkts=20,100"}));
  EXPECT_HAS(e, "--txpkts=20,100");
  EXPECT_HAS(e, "first segment");
  EXPECT_HAS(e, "42");
  e = app_error(argv({"--txpkts=40"}));
  EXPECT_HAS(e, "--txpkts=40");
  EXPECT_HAS(e, "42");
  for (const char* bad : {"--txpkts=64,abc", "--txpkts=", "--txpkts=64,", "--txpkts=0", "--txpkts=70000"}) {
    e = app_error(argv({bad}));
    EXPECT_HAS(e, "--txpkts");
    EXPECT_HAS(e, "[1, 65535]");
  }
}

TEST(AppArgs, TxpktsSegmentsMustFitAnMbuf) {
  EXPECT_EQ(app_ok({"--txpkts=2048"}).txpkts, std::vector<std::uint16_t>{2048});  // 2176 - 128 headroom
  EXPECT_EQ(app_ok({"--txpkts=1500,1500"}).txpkts.size(), 2u);
  const std::string e = app_error(argv({"--txpkts=64,2049"}));
  EXPECT_HAS(e, "--txpkts=64,2049");
  EXPECT_HAS(e, "2048");
  EXPECT_HAS(e, "--mbuf-size");
  // --mbuf-size may come before or after --txpkts.
  EXPECT_EQ(app_ok({"--txpkts=4000", "--mbuf-size=4224"}).txpkts, std::vector<std::uint16_t>{4000});
  EXPECT_EQ(app_ok({"--mbuf-size=4224", "--txpkts=4000"}).txpkts, std::vector<std::uint16_t>{4000});
  EXPECT_HAS(app_error(argv({"--mbuf-size=1024", "--txpkts=1000"})), "896");
}

TEST(AppArgs, EthPeer) {
  const AppOptions o = app_ok({"--eth-peer=0,02:00:00:00:00:09", "--eth-peer", "1,02:00:00:00:00:0a"});
  ASSERT_EQ(o.eth_peers.size(), 2u);
  EXPECT_EQ(o.eth_peers.at(0), (MacAddress{{0x02, 0, 0, 0, 0, 0x09}}));
  EXPECT_EQ(o.eth_peers.at(1), (MacAddress{{0x02, 0, 0, 0, 0, 0x0a}}));
  std::string e = app_error(argv({"--eth-peer=0"}));
  EXPECT_HAS(e, "--eth-peer=0");
  EXPECT_HAS(e, "PORT,XX:XX:XX:XX:XX:XX");
  e = app_error(argv({"--eth-peer=0,02:00:zz"}));
  EXPECT_HAS(e, "--eth-peer=0,02:00:zz");
  EXPECT_HAS(app_error(argv({"--eth-peer=64,02:00:00:00:00:09"})), "[0, 63]");
}

TEST(AppArgs, TxOffloadsTakeDpdksBitMaskInHexOrDecimal) {
  EXPECT_EQ(app_ok({}).tx_offloads, 0u);
  EXPECT_EQ(app_ok({"--tx-offloads=0xe"}).tx_offloads, 0xeu);
  EXPECT_EQ(app_ok({"--tx-offloads", "14"}).tx_offloads, 14u);
  for (const char* bad : {"--tx-offloads=checksums", "--tx-offloads=0x", "--tx-offloads=0xeg"}) {
    const std::string e = app_error({bad});
    EXPECT_NE(e.find("expected a bit mask such as 0xe"), std::string::npos) << bad << ": " << e;
  }
}

TEST(AppArgs, RunControlFlags) {
  const AppOptions o = app_ok({"--tx-first", "--duration", "0.5", "--summary-json", "/tmp/s.json",
                               "--disable-crc-strip", "--auto-start", "-i", "--record-core-cycles",
                               "--record-burst-stats", "--cmdline-file=/tmp/cmds", "--port-topology=chained"});
  EXPECT_EQ(o.tx_first, 1u);
  EXPECT_DOUBLE_EQ(o.duration_s, 0.5);
  EXPECT_EQ(o.summary_json, "/tmp/s.json");
  EXPECT_TRUE(o.auto_start);
  EXPECT_TRUE(o.interactive);
  EXPECT_TRUE(o.record_core_cycles);
  EXPECT_TRUE(o.record_burst_stats);
  EXPECT_FALSE(app_ok({}).record_burst_stats);
  EXPECT_EQ(o.cmdline_file, "/tmp/cmds");
  EXPECT_EQ(o.topology, Topology::chained);
  EXPECT_DOUBLE_EQ(app_ok({"--duration=2.2"}).duration_s, 2.2);
  EXPECT_EQ(app_ok({"--summary-json=out.json"}).summary_json, "out.json");
  EXPECT_TRUE(app_ok({"-a"}).auto_start);
  EXPECT_TRUE(app_ok({"--interactive"}).interactive);
  EXPECT_EQ(app_ok({"--port-topology", "loop"}).topology, Topology::loop);
  for (const char* bad : {"--duration=0", "--duration=-1", "--duration=soon", "--duration="}) {
    const std::string e = app_error(argv({bad}));
    EXPECT_HAS(e, "--duration");
    EXPECT_HAS(e, "seconds > 0");
  }
  const std::string e = app_error(argv({"--port-topology=ring"}));
  EXPECT_HAS(e, "ring");
  EXPECT_HAS(e, "paired, chained, loop");
}

TEST(AppArgs, ScenarioCommandLinesParse) {
  // The flowgen-with-clones and vhost-pair lines of docs/scenarios.md, exactly as users write them.
  const AppOptions f = app_ok({"--forward-mode=flowgen", "--rxq=6", "--txq=6", "--disable-crc-strip", "--burst=512",
                               "--flowgen-clones=512", "--txd=4096", "--stats-period=1", "--txpkts=64"});
  EXPECT_EQ(f.flowgen_clones, 512);
  EXPECT_EQ(f.burst, 512);
  const AppOptions v = app_ok({"--forward-mode=mac", "-i", "--rxq=4", "--txq=4", "--nb-cores", "4"});
  EXPECT_EQ(v.nb_cores, 4u);
  EXPECT_TRUE(v.interactive);
}

// ---------------------------------------------------------------- application errors

TEST(AppArgs, UnknownOptionListsTheAcceptedOnes) {
  for (const char* bad : {"--bogus", "--enable-lro", "--burst-size=32", "32"}) {
    const std::string e = app_error(argv({bad}));
    EXPECT_HAS(e, std::string("'") + bad + "'");
    EXPECT_HAS(e, "--forward-mode");
    EXPECT_HAS(e, "--burst");
    EXPECT_HAS(e, "--txpkts");
  }
}

TEST(AppArgs, UnknownForwardModeListsTheModes) {
  const std::string e = app_error(argv({"--forward-mode=nope"}));
  EXPECT_HAS(e, "--forward-mode");
  EXPECT_HAS(e, "nope");
  for (const Engine& m : all_engines()) EXPECT_HAS(e, m.name);
}

TEST(AppArgs, OutOfRangeNumbersNameTheRange) {
  struct Case {
    const char* arg;
    const char* range;
  };
  for (const Case& c : {Case{"--mbcache=513", "[0, 512]"}, Case{"--nb-cores=0", "[1, "}, Case{"--rxq=0", "[1, 64]"},
                        Case{"--txq=65", "[1, 64]"}, Case{"--flowgen-clones=513", "[0, 512]"},
                        Case{"--total-num-mbufs=10", "[1025, "}, Case{"--rxd=70000", "[1, 65535]"},
                        Case{"--stats-period=-1", "[0, 86400]"}}) {
    const std::string e = app_error(argv({c.arg}));
    EXPECT_HAS(e, c.arg);
    EXPECT_HAS(e, c.range);
  }
}

TEST(AppArgs, MissingValueNamesTheOption) {
  for (const char* opt : {"--burst", "--forward-mode", "--txpkts", "--nb-cores", "--duration", "--eth-peer"}) {
    const std::string e = app_error(argv({"--rxq=1", opt}));
    EXPECT_HAS(e, opt);
    EXPECT_HAS(e, "needs a value");
  }
}

TEST(AppArgs, FlagsTakeNoValue) {
  for (const char* bad : {"--tx-first=3", "--auto-start=1", "--disable-crc-strip=0", "-i=1"}) {
    const std::string e = app_error(argv({bad}));
    EXPECT_HAS(e, std::string(bad).substr(0, std::string(bad).find('=')));
    EXPECT_HAS(e, "takes no value");
  }
  // A following word is not swallowed as the flag's value: it is parsed (and refused) on its own.
  EXPECT_HAS(app_error(argv({"--tx-first", "3"})), "'3'");
}

// --record-burst-stats prints dpdk-testpmd's line: empty bursts, the two most frequent sizes, other.
TEST(BurstStats, LineNamesEmptyBurstsAndTheTwoMostFrequentSizes) {
  BurstSpread spread;
  EXPECT_EQ(burst_spread_line("RX", spread), "");  // nothing counted: no line
  for (int i = 0; i < 6; ++i) spread.add(0);
  for (int i = 0; i < 3; ++i) spread.add(32);
  spread.add(1);
  EXPECT_EQ(burst_spread_line("RX", spread), "  RX-bursts : 10 [60% of 0 pkts + 30% of 32 pkts + 10% of 1 pkts]");
  spread.add(7);
  spread.add(max_burst_slots);
  EXPECT_EQ(burst_spread_line("TX", spread),
            "  TX-bursts : 12 [50% of 0 pkts + 25% of 32 pkts + 8% of 1 pkts + 17% of other]");
  spread.reset();
  spread.add(32);
  EXPECT_EQ(burst_spread_line("TX", spread), "  TX-bursts : 1 [0% of 0 pkts + 100% of 32 pkts]");
}

}  // namespace
}  // namespace ws::testpmd
