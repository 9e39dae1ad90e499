// SPDX-License-Identifier: BSD-3-Clause
// Eal: ports from --vdev in order, pools owned by the Eal, -m checked against what the
// application needs, bad devices named, and run_on_lcores running once per lcore as that lcore.
#include "ws/eal/eal.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

namespace ws {
namespace {

EalOptions options(std::vector<std::string> args) {
  auto o = parse_eal_args(args);
  EXPECT_TRUE(o.has_value()) << o.error().message;
  return o ? *o : EalOptions{};
}

TEST(SplitArgs, EalBeforeDoubleDashAppAfter) {
  const char* argv[] = {"prog", "-l", "0", "--vdev", "net_null0", "--", "-p", "0x3", "--", "x"};
  const SplitArgs s = split_args(10, argv);
  EXPECT_EQ(s.eal, (std::vector<std::string>{"-l", "0", "--vdev", "net_null0"}));
  EXPECT_EQ(s.app, (std::vector<std::string>{"-p", "0x3", "--", "x"}));  // only the first "--" splits
  const char* no_dash[] = {"prog", "-l", "0"};
  EXPECT_TRUE(split_args(3, no_dash).app.empty());
}

TEST(Eal, PortsFromVdevsInOrderAndAPoolThatForwards) {
  auto eal = Eal::create(options({"--lcores", "0@0", "--no-huge", "--file-prefix", "ws_eal_test", "--vdev", "net_ring0",
                                  "--vdev", "net_null0,size=80"}),
                         16u << 20);
  ASSERT_TRUE(eal.has_value()) << eal.error().message;
  Eal& e = **eal;
  ASSERT_EQ(e.port_count(), 2);
  EXPECT_EQ(e.port(0).name(), "net_ring0");
  EXPECT_EQ(e.port(1).name(), "net_null0");
  EXPECT_EQ(e.port(1).id(), 1);
  EXPECT_EQ(lcore_id(), 0u);  // the calling thread is the main lcore
  auto pool = e.create_pktmbuf_pool({"pool", 1024, 32});
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  for (std::uint16_t p = 0; p < e.port_count(); ++p) {
    ASSERT_TRUE(e.port(p).configure({}).has_value());
    ASSERT_TRUE(e.port(p).setup_rx_queue(0, {0, *pool}).has_value());
    ASSERT_TRUE(e.port(p).setup_tx_queue(0, {}).has_value());
    ASSERT_TRUE(e.port(p).start().has_value());
  }
  // null RX -> ring TX -> ring RX (loopback): the 80-byte packets come back.
  Mbuf* burst[32];
  const std::uint16_t n = e.port(1).rx_burst(0, burst, 32);
  ASSERT_EQ(n, 32);
  EXPECT_EQ(e.port(0).tx_burst(0, burst, n), n);
  EXPECT_EQ(e.port(0).rx_burst(0, burst, 32), n);
  EXPECT_EQ(burst[0]->pkt_len, 80u);
  // Left in flight on purpose: the Eal's destructor stops the ports before freeing the pool.
  EXPECT_EQ(e.port(0).tx_burst(0, burst, n), n);
  EXPECT_EQ(e.port(1).stats().ipackets, 32u);
}

TEST(Eal, MemoryOptionSmallerThanNeededIsAnError) {
  auto eal = Eal::create(options({"--lcores", "0@0", "--no-huge", "-m", "8"}), 64u << 20);
  ASSERT_FALSE(eal.has_value());
  EXPECT_NE(eal.error().message.find("-m/--socket-mem 8 MiB is too small"), std::string::npos) << eal.error().message;
  EXPECT_NE(eal.error().message.find("68 MiB are needed for this application; raise -m"), std::string::npos)
      << eal.error().message;
}

TEST(Eal, BadDeviceIsNamed) {
  auto eal = Eal::create(options({"--lcores", "0@0", "--no-huge", "--vdev", "net_nosuch0"}), 4u << 20);
  ASSERT_FALSE(eal.has_value());
  EXPECT_NE(eal.error().message.find("net_nosuch0"), std::string::npos) << eal.error().message;
  auto bad_key = Eal::create(options({"--lcores", "0@0", "--no-huge", "--vdev", "net_null0,sise=64"}), 4u << 20);
  ASSERT_FALSE(bad_key.has_value());
  EXPECT_NE(bad_key.error().message.find("sise"), std::string::npos) << bad_key.error().message;
}

TEST(Eal, PciDevicesAreProbedFromTheAllowList) {
  // No device sits at this address: -a is probed (as DPDK's PCI bus does), not refused, and the
  // error names the device before anything is allocated.
  auto eal = Eal::create(options({"--lcores", "0@0", "--no-huge", "-a", "0000:7f:1f.7"}), 4u << 20);
  ASSERT_FALSE(eal.has_value());
  EXPECT_NE(eal.error().message.find("0000:7f:1f.7"), std::string::npos) << eal.error().message;
  // --no-pci: no device is looked for.
  auto none = Eal::create(options({"--lcores", "0@0", "--no-huge", "--no-pci", "--vdev", "net_null0"}), 4u << 20);
  ASSERT_TRUE(none.has_value()) << none.error().message;
  EXPECT_EQ((*none)->port_count(), 1);
  EXPECT_EQ((*none)->iova_mode(), IovaMode::va) << "virtual devices alone: IOVA = VA";
}

TEST(Eal, PlacePortReplacesASlotOrAppends) {
  auto eal = Eal::create(options({"--lcores", "0@0", "--no-huge", "--no-pci", "--vdev", "net_null0"}), 4u << 20);
  ASSERT_TRUE(eal.has_value()) << eal.error().message;
  Eal& e = **eal;
  auto second = e.drivers().create_port("net_null1", e.port_env());
  ASSERT_TRUE(second.has_value()) << second.error().message;
  Port& appended = e.place_port(1, std::move(*second));
  EXPECT_EQ(appended.id(), 1);
  EXPECT_EQ(e.port_count(), 2);
  auto third = e.drivers().create_port("net_null2", e.port_env());
  ASSERT_TRUE(third.has_value());
  Port& replaced = e.place_port(0, std::move(*third));
  EXPECT_EQ(replaced.id(), 0);
  EXPECT_EQ(e.port(0).name(), "net_null2");
  EXPECT_EQ(e.port_count(), 2);
}

TEST(Eal, RunOnLcoresRunsOncePerLcoreAsThatLcore) {
  // Three lcores on CPU 0, so the test runs on any machine; lcore 2 is the main one.
  auto eal = Eal::create(options({"--lcores", "0@0,1@0,2@0", "--main-lcore", "2", "--no-huge"}), 4u << 20);
  ASSERT_TRUE(eal.has_value()) << eal.error().message;
  EXPECT_EQ((*eal)->main_lcore(), 2u);
  EXPECT_EQ((*eal)->lcore_ids(), (std::vector<unsigned>{0, 1, 2}));
  EXPECT_TRUE((*eal)->has_lcore(1));
  EXPECT_FALSE((*eal)->has_lcore(3));
  std::mutex m;
  std::vector<std::pair<unsigned, unsigned>> seen;  // (argument, lcore_id())
  (*eal)->run_on_lcores([&](unsigned lcore) {
    std::lock_guard lock(m);
    seen.emplace_back(lcore, lcore_id());
  });
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::pair<unsigned, unsigned>>{{0, 0}, {1, 1}, {2, 2}}));
}

}  // namespace
}  // namespace ws
