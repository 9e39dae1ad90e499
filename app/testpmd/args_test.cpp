// SPDX-License-Identifier: BSD-3-Clause
// parse_app_args: dpdk-testpmd's option names, both value forms, its defaults, and errors that
// name the option, the value and what is accepted (the EAL part: ws/eal/eal_args_test.cpp).
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "app/testpmd/app_args.hpp"
#include "app/testpmd/fwd/engine.hpp"
#include "app/testpmd/prompt/command.hpp"
#include "ws/port/port.hpp"

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
  const AppOptions a = app_ok({"--forward-mode=mac", "--burst=64", "--nb-cores=2", "--rxq=4", "--txq=4", "--rxd=512",
                               "--txd=4096", "--mbcache=128", "--total-num-mbufs=8192", "--stats-period=1",
                               "--flowgen-clones=16", "--nb-ports=2", "--mbuf-size=4096"});
  const AppOptions b = app_ok({"--forward-mode",
                               "mac",
                               "--burst",
                               "64",
                               "--nb-cores",
                               "2",
                               "--rxq",
                               "4",
                               "--txq",
                               "4",
                               "--rxd",
                               "512",
                               "--txd",
                               "4096",
                               "--mbcache",
                               "128",
                               "--total-num-mbufs",
                               "8192",
                               "--stats-period",
                               "1",
                               "--flowgen-clones",
                               "16",
                               "--nb-ports",
                               "2",
                               "--mbuf-size",
                               "4096"});
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

TEST(AppArgs, TxOffloadsTakeDpdksBitMaskInHex) {
  EXPECT_EQ(app_ok({}).tx_offloads, 0u);
  EXPECT_EQ(app_ok({"--tx-offloads=0xe"}).tx_offloads, 0xeu);
  EXPECT_EQ(app_ok({"--tx-offloads", "14"}).tx_offloads, 0x14u);  // hexadecimal without 0x, as dpdk-testpmd
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

TEST(AppArgs, UnknownOptionPointsAtTheHelp) {
  for (const char* bad : {"--bogus", "--burst-size=32", "32"}) {
    const std::string e = app_error(argv({bad}));
    EXPECT_HAS(e, std::string("'") + bad + "'");
    EXPECT_HAS(e, "unknown option");
    EXPECT_HAS(e, "--help");
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
  for (const Case& c :
       {Case{"--mbcache=513", "[0, 512]"}, Case{"--nb-cores=0", "[1, "}, Case{"--rxq=0", "[1, 64]"},
        Case{"--txq=65", "[1, 64]"}, Case{"--flowgen-clones=513", "[0, 512]"}, Case{"--total-num-mbufs=10", "[1025, "},
        Case{"--rxd=70000", "[1, 65535]"}, Case{"--stats-period=-1", "[0, 86400]"}}) {
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

// ---------------------------------------------------------------- every option of dpdk-testpmd's

// A command line for each option: parse_app_args accepts it (honoured, accepted) or refuses it
// naming what is missing (refused). An option added to the table without a line here fails.
const std::map<std::string_view, std::vector<std::string>>& app_sample_table() {
  static const std::map<std::string_view, std::vector<std::string>> samples = {
      {"--interactive", {"--interactive"}},
      {"-i", {"-i"}},
      {"--cmdline-file", {"--cmdline-file=cmds"}},
      {"--auto-start", {"--auto-start"}},
      {"-a", {"-a"}},
      {"--help", {"--help"}},
      {"--tx-first", {"--tx-first"}},
      {"--stats-period", {"--stats-period=1"}},
      {"--display-xstats", {"--display-xstats", "rx_good_packets,tx_good_bytes"}},
      {"--num-procs", {"--num-procs=1"}},
      {"--proc-id", {"--proc-id=0"}},
      {"--nb-cores", {"--nb-cores=1"}},
      {"--nb-ports", {"--nb-ports=2"}},
      {"--coremask", {"--coremask=0x2"}},
      {"--portmask", {"--portmask=0x3"}},
      {"--portlist", {"--portlist=0,2-3"}},
      {"--numa", {"--numa"}},
      {"--no-numa", {"--no-numa"}},
      {"--port-numa-config", {"--port-numa-config=(0,0),(1,0)"}},
      {"--ring-numa-config", {"--ring-numa-config=(0,3,0)"}},
      {"--socket-num", {"--socket-num=0"}},
      {"--mbuf-size", {"--mbuf-size=2176"}},
      {"--total-num-mbufs", {"--total-num-mbufs=8192"}},
      {"--max-pkt-len", {"--max-pkt-len=9018"}},
      {"--max-lro-pkt-size", {"--enable-lro", "--max-lro-pkt-size=65535"}},
      {"--eth-peers-configfile", {}},  // needs a file: EthPeersConfigFile below
      {"--eth-peer", {"--eth-peer=1,02:00:00:00:00:09"}},
      {"--disable-crc-strip", {"--disable-crc-strip"}},
      {"--enable-scatter", {"--enable-scatter"}},
      {"--enable-lro", {"--enable-lro"}},
      {"--enable-rx-cksum", {"--enable-rx-cksum"}},
      {"--enable-rx-timestamp", {"--enable-rx-timestamp"}},
      {"--enable-hw-vlan", {"--enable-hw-vlan"}},
      {"--enable-hw-vlan-filter", {"--enable-hw-vlan-filter"}},
      {"--enable-hw-vlan-strip", {"--enable-hw-vlan-strip"}},
      {"--enable-hw-vlan-extend", {"--enable-hw-vlan-extend"}},
      {"--enable-hw-qinq-strip", {"--enable-hw-qinq-strip"}},
      {"--enable-drop-en", {"--enable-drop-en"}},
      {"--disable-rss", {"--disable-rss"}},
      {"--port-topology", {"--port-topology=chained"}},
      {"--forward-mode", {"--forward-mode=5tswap"}},
      {"--rss-ip", {"--rss-ip"}},
      {"--rss-udp", {"--rss-udp"}},
      {"--rss-level-inner", {"--rss-level-inner"}},
      {"--rss-level-outer", {"--rss-level-outer"}},
      {"--rxq", {"--rxq=2"}},
      {"--rxd", {"--rxd=512"}},
      {"--txq", {"--txq=2"}},
      {"--txd", {"--txd=512"}},
      {"--hairpinq", {"--hairpinq=1"}},
      {"--hairpin-mode", {"--hairpin-mode=0x10"}},
      {"--burst", {"--burst=64"}},
      {"--flowgen-clones", {"--flowgen-clones=4"}},
      {"--flowgen-flows", {"--flowgen-flows=64"}},
      {"--mbcache", {"--mbcache=128"}},
      {"--rxpt", {"--rxpt=8"}},
      {"--rxht", {"--rxht=8"}},
      {"--rxfreet", {"--rxfreet=32"}},
      {"--rxwt", {"--rxwt=0"}},
      {"--txpt", {"--txpt=36"}},
      {"--txht", {"--txht=0"}},
      {"--txwt", {"--txwt=0"}},
      {"--txfreet", {"--txfreet=32"}},
      {"--txrst", {"--txrst=32"}},
      {"--no-flush-rx", {"--no-flush-rx"}},
      {"--rxoffs", {"--rxoffs=0,64"}},
      {"--rxpkts", {"--rxpkts=64,1024"}},
      {"--rxhdrs", {"--rxhdrs=eth"}},
      {"--txpkts", {"--txpkts=64,64"}},
      {"--multi-rx-mempool", {"--multi-rx-mempool"}},
      {"--txonly-multi-flow", {"--txonly-multi-flow"}},
      {"--tx-ip", {"--tx-ip=10.0.0.1,10.0.0.2"}},
      {"--tx-udp", {"--tx-udp=1000,2000"}},
      {"--eth-link-speed", {"--eth-link-speed=10000"}},
      {"--rxq-share", {"--rxq-share=2"}},
      {"--disable-link-check", {"--disable-link-check"}},
      {"--disable-device-start", {"--disable-device-start"}},
      {"--no-lsc-interrupt", {"--no-lsc-interrupt"}},
      {"--no-rmv-interrupt", {"--no-rmv-interrupt"}},
      {"--bitrate-stats", {"--bitrate-stats=1"}},
      {"--latencystats", {"--latencystats=1"}},
      {"--print-event", {"--print-event", "vf_mbox"}},
      {"--mask-event", {"--mask-event", "intr_lsc"}},
      {"--flow-isolate-all", {"--flow-isolate-all"}},
      {"--tx-offloads", {"--tx-offloads=0x0"}},
      {"--rx-offloads", {"--rx-offloads=0x1"}},
      {"--hot-plug", {"--hot-plug"}},
      {"--vxlan-gpe-port", {"--vxlan-gpe-port=4790"}},
      {"--geneve-parsed-port", {"--geneve-parsed-port=6081"}},
      {"--mlockall", {"--mlockall"}},
      {"--no-mlockall", {"--no-mlockall"}},
      {"--mp-alloc", {"--mp-alloc=native"}},
      {"--noisy-tx-sw-buffer-size", {"--noisy-tx-sw-buffer-size=64"}},
      {"--noisy-tx-sw-buffer-flushtime", {"--noisy-tx-sw-buffer-flushtime=10"}},
      {"--noisy-lkup-memory", {"--noisy-lkup-memory=8"}},
      {"--noisy-lkup-num-writes", {"--noisy-lkup-num-writes=1"}},
      {"--noisy-lkup-num-reads", {"--noisy-lkup-num-reads=1"}},
      {"--noisy-lkup-num-reads-writes", {"--noisy-lkup-num-reads-writes=1"}},
      {"--no-iova-contig", {"--no-iova-contig"}},
      {"--rx-mq-mode", {"--rx-mq-mode=0x1"}},
      {"--record-core-cycles", {"--record-core-cycles"}},
      {"--record-burst-stats", {"--record-burst-stats"}},
      {"--rx-ptype-counts", {"--rx-ptype-counts"}},
      {"--icmpecho-ip", {"--icmpecho-ip=10.0.0.1"}},
      {"--duration", {"--duration=1"}},
      {"--summary-json", {"--summary-json=s.json"}},
      {"--metrics-addr", {"--metrics-addr=127.0.0.1:9100"}},
      {"--capture", {"--capture=0,c.pcapng"}},
  };
  return samples;
}

TEST(AppArgs, EveryOptionIsTakenAsItsStatusSays) {
  for (const OptionDoc& d : app_option_docs()) {
    const auto it = app_sample_table().find(d.name);
    ASSERT_NE(it, app_sample_table().end()) << d.name << " has no sample command line in this test";
    if (it->second.empty()) continue;
    auto r = parse_app_args(it->second);
    if (d.status == OptionStatus::refused) {
      ASSERT_FALSE(r.has_value()) << d.name << " is documented as refused but was accepted";
      EXPECT_HAS(r.error().message, d.name);
      EXPECT_HAS(r.error().message, "not available");
      EXPECT_HAS(r.error().message, d.why);
    } else {
      EXPECT_TRUE(r.has_value()) << d.name << ": " << (r ? "" : r.error().message);
      if (d.status == OptionStatus::accepted) EXPECT_FALSE(d.why.empty()) << d.name << ": an accepted option says why";
    }
  }
}

TEST(AppArgs, OptionsSetWhatDpdkTestpmdSets) {
  const AppOptions o =
      app_ok({"--portmask=0x5", "--coremask=0x6", "--no-numa", "--enable-hw-vlan-strip", "--enable-scatter",
              "--max-pkt-len=9018", "--txonly-multi-flow", "--tx-ip=10.0.0.1,10.0.0.2", "--tx-udp=1000",
              "--no-flush-rx", "--disable-device-start", "--no-lsc-interrupt", "--mask-event", "intr_lsc", "--mlockall",
              "--display-xstats=rx_good_packets"});
  EXPECT_EQ(o.fwd_ports, (std::vector<std::uint16_t>{0, 2}));
  EXPECT_EQ(o.coremask, 0x6u);
  EXPECT_FALSE(o.numa);
  EXPECT_EQ(o.rx_offloads, rx_offload::vlan_strip | rx_offload::scatter);
  EXPECT_EQ(o.max_pkt_len, 9018u);
  EXPECT_TRUE(o.txonly_multi_flow);
  EXPECT_EQ(o.tx_ip_src, 0x0a000001u);
  EXPECT_EQ(o.tx_ip_dst, 0x0a000002u);
  EXPECT_EQ(o.tx_udp_src, 1000);
  EXPECT_EQ(o.tx_udp_dst, 1000);  // one port given: both, as dpdk-testpmd
  EXPECT_FALSE(o.flush_rx);
  EXPECT_FALSE(o.start_devices);
  EXPECT_FALSE(o.lsc_interrupt);
  EXPECT_EQ(o.event_print_mask & event_type::intr_lsc, 0u);
  EXPECT_TRUE(o.mlockall);
  EXPECT_EQ(o.display_xstats, std::vector<std::string>{"rx_good_packets"});
  EXPECT_EQ(app_ok({"--enable-hw-vlan"}).rx_offloads, rx_offload::vlan);
  EXPECT_EQ(app_ok({"--rx-offloads=0x2001"}).rx_offloads, rx_offload::vlan_strip | rx_offload::scatter);
  EXPECT_EQ(app_ok({"--rss-ip", "--disable-rss"}).rss_types, 0u);
  EXPECT_EQ(app_ok({"--rss-udp", "--rx-mq-mode=0x0"}).rss_types, 0u);
  EXPECT_EQ(app_ok({"--portlist=3,1"}).fwd_ports, (std::vector<std::uint16_t>{1, 3}));
  EXPECT_EQ(app_ok({"--mask-event", "all", "--print-event", "intr_lsc"}).event_print_mask, event_type::intr_lsc);
}

TEST(AppArgs, OptionValuesAreChecked) {
  EXPECT_HAS(app_error(argv({"--portmask=0x0"})), "names no port");
  EXPECT_HAS(app_error(argv({"--portlist=1,1"})), "twice");
  EXPECT_HAS(app_error(argv({"--coremask=zz"})), "hexadecimal");
  EXPECT_HAS(app_error(argv({"--socket-num=7"})), "invalid socket id 7");
  EXPECT_HAS(app_error(argv({"--port-numa-config=(0,9)"})), "invalid socket id 9");
  EXPECT_HAS(app_error(argv({"--ring-numa-config=(0,4,0)"})), "flag 4");
  EXPECT_HAS(app_error(argv({"--port-numa-config=0,0"})), "(port,socket)");
  EXPECT_HAS(app_error(argv({"--tx-ip=10.0.0.1"})), "SRC,DST");
  EXPECT_HAS(app_error(argv({"--tx-udp=70000"})), "[0, 65535]");
  EXPECT_HAS(app_error(argv({"--print-event", "bogus"})), "invalid event");
  EXPECT_HAS(app_error(argv({"--eth-link-speed=12345"})), "expected one of");
  EXPECT_HAS(app_error(argv({"--num-procs=2"})), "[1, 1]");
  EXPECT_HAS(app_error(argv({"--mp-alloc=xmem"})), "shared arena");
  EXPECT_HAS(app_error(argv({"--mbuf-size=2176,128"})), "one size only");
  EXPECT_HAS(app_error(argv({"--max-lro-pkt-size=9000"})), "--enable-lro");
  EXPECT_HAS(app_error(argv({"--rx-mq-mode=0x8"})), "RSS");
  EXPECT_HAS(app_error(argv({"--no-such-option"})), "unknown option");
}

TEST(AppArgs, EthPeersConfigFile) {
  const std::string path = ::testing::TempDir() + "/eth_peers.conf";
  {
    std::ofstream f(path);
    f << "02:00:00:00:00:0a\n02:00:00:00:00:0b\n";
  }
  const AppOptions o = app_ok({"--eth-peers-configfile", path.c_str()});
  ASSERT_EQ(o.eth_peers.size(), 2u);
  EXPECT_EQ(o.eth_peers.at(1).to_string(), "02:00:00:00:00:0B");
  {
    std::ofstream f(path);
    f << "02:00:00:00:00:0a\nnot-a-mac\n";
  }
  EXPECT_HAS(app_error({"--eth-peers-configfile", path}), "line 2");
  EXPECT_HAS(app_error(argv({"--eth-peers-configfile=/nonexistent/peers"})), "cannot open");
}

// docs/testpmd.md lists every option, EAL and application, with the status and reason the
// parser has, and the tests covering it: it cannot drift from the tables.
struct DocRow {
  std::string status, why, tests;
};

// Option names may repeat: -a and --help are both EAL and testpmd options.
std::multimap<std::string, DocRow> read_doc_table(const std::string& path) {
  std::ifstream in(path);
  std::multimap<std::string, DocRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("| `")) continue;
    std::vector<std::string> cells;
    std::size_t at = 1;
    while (at < line.size()) {
      const auto bar = line.find(" |", at);
      if (bar == std::string::npos) break;
      std::string cell = line.substr(at, bar - at);
      cell.erase(0, cell.find_first_not_of(' '));
      cells.push_back(cell);
      at = bar + 2;
    }
    if (cells.size() != 4) continue;
    rows.emplace(cells[0].substr(1, cells[0].size() - 2), DocRow{cells[1], cells[2], cells[3]});
  }
  return rows;
}

// Each test file in `tests` ("a.py, b.cpp") exists and names `what` (it runs it).
void expect_tests_name(const std::string& root, std::string_view tests, std::string_view what) {
  while (!tests.empty()) {
    const auto comma = tests.find(", ");
    const std::string file(tests.substr(0, comma));
    std::ifstream f(root + "/" + file);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(text.empty()) << what << ": test file " << file << " does not exist";
    EXPECT_NE(text.find(what), std::string::npos) << "'" << what << "' is not in " << file;
    tests = comma == std::string_view::npos ? std::string_view{} : tests.substr(comma + 2);
  }
}

TEST(Docs, OptionTableMatchesTheParser) {
  const std::string root = WS_SOURCE_DIR;
  const auto rows = read_doc_table(root + "/docs/testpmd.md");
  std::vector<OptionDoc> all = eal_option_docs();
  for (const OptionDoc& d : app_option_docs()) all.push_back(d);
  std::string expected;  // what the table should say, printed on failure
  bool ok = true;
  for (const OptionDoc& d : all) {
    const auto [first, last] = rows.equal_range(std::string(d.name));
    const auto row = std::find_if(
        first, last, [&](const auto& r) { return r.second.status == to_string(d.status) && r.second.why == d.why; });
    const std::string tests = row == last ? "?" : row->second.tests;
    expected += fmt::format("| `{}` | {} | {} | {} |\n", d.name, to_string(d.status), d.why, tests);
    if (row == last) {
      ok = false;
      continue;
    }
    expect_tests_name(root, row->second.tests, d.name);
  }
  EXPECT_EQ(rows.size(), all.size()) << "docs/testpmd.md lists options the parser does not have";
  EXPECT_TRUE(ok) << "docs/testpmd.md's option rows should be:\n" << expected;
}

// The prompt's commands: docs/testpmd.md has a row for each, with its help text and the tests
// that run it (each names the command's words).
TEST(Docs, CommandTableMatchesThePrompt) {
  const std::string root = WS_SOURCE_DIR;
  std::ifstream in(root + "/docs/testpmd.md");
  std::map<std::string, std::pair<std::string, std::string>> rows;  // usage -> help, tests
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("| `")) continue;
    const auto end = line.find("` | ");
    if (end == std::string::npos) continue;
    const std::string usage = line.substr(3, end - 3);
    const std::string rest = line.substr(end + 4);
    const auto bar = rest.rfind(" | ");
    if (bar == std::string::npos || !rest.ends_with(" |")) continue;
    rows[usage] = {rest.substr(0, bar), rest.substr(bar + 3, rest.size() - bar - 5)};
  }
  std::string expected;
  bool ok = true;
  for (const Command& c : all_commands()) {
    const std::string usage = usage_of(c);
    const auto row = rows.find(usage);
    std::string words;
    for (auto w : c.words) words += (words.empty() ? "" : " ") + std::string(w);
    expected += fmt::format("| `{}` | {} | {} |\n", usage, c.help, row == rows.end() ? "?" : row->second.second);
    if (row == rows.end() || row->second.first != c.help) {
      ok = false;
      continue;
    }
    expect_tests_name(root, row->second.second, words);
  }
  EXPECT_TRUE(ok) << "docs/testpmd.md's command rows should be:\n" << expected;
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
