// SPDX-License-Identifier: BSD-3-Clause
// DPDK 22.11's device strings for net_vhost and net_virtio_user, through the driver registry:
// DPDK's driver names and aliases, every key DPDK accepts, and the values we cannot honour refused
// with errors that name the key and say why. The virtio_user ports connect to a net_vhost port of
// the same process (its control thread answers them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "ws/testing/port_fixture.hpp"

namespace ws {
namespace {

class VirtioDevArgsTest : public testing::PortFixture {
 protected:
  void SetUp() override {
    open_arena_and_pool("virtio_devargs_test", 8u << 20, {.count = 256, .cache_size = 0});
    sock_ = "/tmp/ws-devargs-test-" + std::to_string(::getpid()) + ".sock";
  }
  // `text` with "{sock}" replaced by this test's socket path.
  std::string dev(std::string text) const {
    const auto at = text.find("{sock}");
    if (at != std::string::npos) text.replace(at, 6, sock_);
    return text;
  }
  static bool has_xstat(const Port& p, std::string_view name) {
    const auto x = p.xstats();
    return std::any_of(x.begin(), x.end(), [&](const XStat& s) { return s.name == name; });
  }
  std::string sock_;
};

TEST_F(VirtioDevArgsTest, DpdkNamesAndAliasesFindTheVirtioDrivers) {
  for (const char* device : {"net_vhost0", "eth_vhost1"}) {
    const Driver* d = registry_.find_for_device(device);
    ASSERT_NE(d, nullptr) << device;
    EXPECT_EQ(d->name(), "net_vhost") << device;
  }
  for (const char* device : {"net_virtio_user1", "virtio_user0"}) {
    const Driver* d = registry_.find_for_device(device);
    ASSERT_NE(d, nullptr) << device;
    EXPECT_EQ(d->name(), "net_virtio_user") << device;
  }
  const std::string e = create_error("eth_bogus0");
  EXPECT_NE(e.find("net_vhost (alias eth_vhost)"), std::string::npos) << e;
  EXPECT_NE(e.find("net_virtio_user (alias virtio_user)"), std::string::npos) << e;
}

// Every key of DPDK 22.11's net_vhost and net_virtio_user (their PMD_INFO_STRING, plus vhost's
// legacy-ol-flags), as DTS and DPDK's perf reports write them.
TEST_F(VirtioDevArgsTest, EveryDpdkKeyIsAccepted) {
  auto vhost =
      create(dev("eth_vhost0,iface={sock},queues=1,client=0,iommu-support=0,postcopy-support=0,tso=0,"
                 "linear-buffer=1,ext-buffer=0,legacy-ol-flags=1"));
  ASSERT_TRUE(vhost);
  EXPECT_EQ(vhost->driver_name(), "net_vhost");
  EXPECT_TRUE(has_xstat(*vhost, "rx_q0_not_linear")) << "linear-buffer=1 counts what it drops";
  auto virtio =
      create(dev("net_virtio_user1,mac=00:01:02:03:04:05,path={sock},cq=1,queue_size=256,queues=1,"
                 "server=0,mrg_rxbuf=1,in_order=1,packed_vq=1,speed=25000,vectorized=1"));
  ASSERT_TRUE(virtio);
  EXPECT_EQ(virtio->driver_name(), "net_virtio_user");
  EXPECT_EQ(virtio->mac().to_string(), "00:01:02:03:04:05");
  EXPECT_EQ(virtio->link().speed_mbps, 25000u);
  virtio.reset();
  auto by_alias = create(dev("virtio_user0,path={sock},cq=0,vectorized=0"));
  ASSERT_TRUE(by_alias);
  EXPECT_EQ(by_alias->link().speed_mbps, 10000u) << "the default speed";
}

TEST_F(VirtioDevArgsTest, WhatWeCannotHonourIsRefusedSayingWhy) {
  struct Case {
    const char* device;
    const char* expected;
  };
  for (const Case& c : {
           Case{"eth_vhost0,iface={sock},ext-buffer=1",
                "key 'ext-buffer' value 1 is not supported: our mbufs have no external buffers"},
           Case{"eth_vhost0,iface={sock},iommu-support=1", "key 'iommu-support' value 1 is not supported"},
           Case{"eth_vhost0,iface={sock},postcopy-support=1", "key 'postcopy-support' value 1 is not supported"},
           Case{"eth_vhost0,iface={sock},linear-buffer=2", "key 'linear-buffer' has value '2', expected 0 or 1"},
           Case{"net_virtio_user0,path={sock},mac=00:01:02:03:04",
                "key 'mac' value '00:01:02:03:04': expected six hex bytes xx:xx:xx:xx:xx:xx"},
           Case{"net_virtio_user0,path={sock},speed=1000",
                "key 'speed' value 1000: expected a link speed in Mbps that DPDK accepts"},
           Case{"net_virtio_user0,path={sock},iface=tap0",
                "key 'iface' value 'tap0' names a vhost-net tap, and path '{sock}' is missing; expected path= the "
                "kernel's vhost-net character device"},
           Case{"net_virtio_user0,path=/dev/null",
                "key 'path' value '/dev/null' is a character device that is not vhost-net"},
           Case{"net_virtio_user0,path={sock},cq=2", "key 'cq' has value '2', expected 0 or 1"},
       }) {
    const std::string e = create_error(dev(c.device));
    EXPECT_NE(e.find(dev(c.expected)), std::string::npos) << c.device << "\n  " << e;
  }
}

}  // namespace
}  // namespace ws
