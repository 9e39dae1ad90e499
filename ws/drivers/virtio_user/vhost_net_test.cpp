// SPDX-License-Identifier: BSD-3-Clause
// virtio_user over the kernel's vhost-net, what the host can test without the vhost_net module
// (the guest test, tests/pci_guest_test.py, runs it against the real one): which paths select
// the kernel backend and the errors that name them (module missing, no permission, a regular
// file, server mode), the memory-region limit, the TUN_F flags, and the tap's queues against
// the host's real tun driver (flags, header size, a busy tap).
#include "ws/virtio/transport/vhost_net.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "ws/testing/port_fixture.hpp"
#include "ws/virtio/features.hpp"

namespace ws {
namespace {

namespace feature = virtio::feature;
using virtio::bit;

class VhostNetTest : public testing::PortFixture {
 protected:
  void SetUp() override {
    open_arena_and_pool("vhost_net_test", 8u << 20, {.count = 256, .cache_size = 0});
    dir_ = "/tmp/ws-vhost-net-test-" + std::to_string(::getpid());
    ::mkdir(dir_.c_str(), 0755);
  }
  void TearDown() override {
    for (const char* f : {"/vhost-net", "/file", "/regions"}) ::unlink((dir_ + f).c_str());
    ::rmdir(dir_.c_str());
  }
  // A character device node 10:238 (vhost-net's) at dir_/vhost-net, mode `mode`.
  std::string vhost_net_node(mode_t mode) const {
    const std::string p = dir_ + "/vhost-net";
    EXPECT_EQ(::mknod(p.c_str(), S_IFCHR | mode, makedev(virtio::misc_major, virtio::vhost_net_minor)), 0) << p;
    return p;
  }
  static bool module_loaded() { return ::access("/sys/module/vhost_net", F_OK) == 0; }
  std::string dir_;
};

TEST_F(VhostNetTest, PathsThatSelectTheKernelBackend) {
  EXPECT_TRUE(virtio::classify_vhost_path("/dev/vhost-net").vhost_net) << "by name, even when missing";
  EXPECT_FALSE(virtio::classify_vhost_path(dir_ + "/nothing").vhost_net);
  const auto null = virtio::classify_vhost_path("/dev/null");
  EXPECT_TRUE(null.other_chr);
  EXPECT_FALSE(null.vhost_net);
  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  const auto node = virtio::classify_vhost_path(vhost_net_node(0600));
  EXPECT_TRUE(node.vhost_net) << "any name, by its major and minor";
  EXPECT_FALSE(node.other_chr);
}

// Without the module, opening vhost-net's node says to load it; the error names the path.
TEST_F(VhostNetTest, MissingModuleSaysLoadVhostNet) {
  if (::access("/dev/vhost-net", F_OK) != 0) {
    const std::string e = create_error("net_virtio_user0,path=/dev/vhost-net");
    EXPECT_NE(e.find("key 'path' value '/dev/vhost-net'"), std::string::npos) << e;
    EXPECT_NE(e.find("load vhost_net"), std::string::npos) << e;
  }
  if (::geteuid() != 0 || module_loaded()) return;  // a node of ours opens the real module then
  const std::string node = vhost_net_node(0600);
  const std::string e = create_error("net_virtio_user0,path=" + node + ",iface=wsvn%d");
  EXPECT_NE(e.find("key 'path' value '" + node + "'"), std::string::npos) << e;
  EXPECT_NE(e.find("load vhost_net"), std::string::npos) << e;
}

TEST_F(VhostNetTest, NoPermissionNamesThePath) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  const std::string node = vhost_net_node(0600);  // root's alone
  ASSERT_EQ(::seteuid(65534), 0);
  const std::string e = create_error("net_virtio_user0,path=" + node);
  ASSERT_EQ(::seteuid(0), 0);
  EXPECT_NE(e.find("key 'path' value '" + node + "'"), std::string::npos) << e;
  EXPECT_NE(e.find("needs read and write access"), std::string::npos) << e;
}

TEST_F(VhostNetTest, WhatTheKernelBackendRefuses) {
  const std::string file = dir_ + "/file";
  std::ofstream(file) << "not a device\n";
  std::string e = create_error("net_virtio_user0,path=" + file + ",iface=wsvn0");
  EXPECT_NE(e.find("key 'iface' value 'wsvn0' names a vhost-net tap, and path '" + file +
                   "' is not a character device; expected path= the kernel's vhost-net character device"),
            std::string::npos)
      << e;
  e = create_error("net_virtio_user0,path=/dev/vhost-net,server=1");
  EXPECT_NE(e.find("key 'server' value 1: path '/dev/vhost-net' is the kernel's vhost-net"), std::string::npos) << e;
  e = create_error("net_virtio_user0,path=/dev/vhost-net,iface=a-name-of-sixteen");
  EXPECT_NE(e.find("key 'iface' value 'a-name-of-sixteen': expected an interface name of 1 to 15"), std::string::npos)
      << e;
}

TEST_F(VhostNetTest, MemoryRegionLimitIsReadFromTheModule) {
  const std::string f = dir_ + "/regions";
  std::ofstream(f) << "64\n";
  auto n = virtio::vhost_max_mem_regions("dev0", "/dev/vhost-net", f);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 64u);
  auto missing = virtio::vhost_max_mem_regions("dev0", "/dev/vhost-net", dir_ + "/nothing");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("device 'dev0': key 'path' value '/dev/vhost-net': cannot read vhost-net's "
                                         "memory region limit from " +
                                         dir_ + "/nothing"),
            std::string::npos)
      << missing.error().message;
}

// What we accept from the tap, as DPDK's vhost-kernel backend maps it.
TEST_F(VhostNetTest, TapOffloadsFollowTheGuestFeatures) {
  EXPECT_EQ(virtio::tap_offload_flags(0), 0u);
  EXPECT_EQ(virtio::tap_offload_flags(bit(feature::guest_tso4)), 0u) << "TSO needs GUEST_CSUM";
  EXPECT_EQ(virtio::tap_offload_flags(bit(feature::guest_csum)), unsigned{TUN_F_CSUM});
  EXPECT_EQ(virtio::tap_offload_flags(bit(feature::guest_csum) | bit(feature::guest_tso4) | bit(feature::guest_tso6)),
            unsigned{TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6});
  EXPECT_EQ(virtio::tap_offload_flags(bit(feature::csum) | bit(feature::host_tso4)), 0u) << "ours to the tap";
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// The host's own tun driver: two queues of one multi-queue tap with the vnet header.
TEST_F(VhostNetTest, TapQueuesOnTheRealTunDriver) {
  auto t = virtio::open_tap_queues("dev0", "/dev/vhost-net", "wsvn%d", 2);
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->fds.size(), 2u);
  EXPECT_EQ(t->name.rfind("wsvn", 0), 0u) << t->name;
  EXPECT_EQ(t->name.find('%'), std::string::npos) << "the kernel filled in %d: " << t->name;
  const std::string flags = read_line("/sys/class/net/" + t->name + "/tun_flags");
  EXPECT_EQ(std::stoul(flags, nullptr, 16), unsigned{IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE}) << flags;
  for (int fd : t->fds) {
    int hdr = 0;
    ASSERT_EQ(::ioctl(fd, TUNGETVNETHDRSZ, &hdr), 0);
    EXPECT_EQ(hdr, virtio::vhost_net_hdr_bytes);
    EXPECT_EQ(::ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6), 0) << "what setup_device sets";
  }
  for (int fd : t->fds) ::close(fd);
  EXPECT_NE(::access(("/sys/class/net/" + t->name).c_str(), F_OK), 0) << "the tap goes with its queues";
}

TEST_F(VhostNetTest, BusyTapIsRefusedNamingIt) {
  const std::string name = "wsvb" + std::to_string(::getpid() % 100000);
  const int other = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  ASSERT_GE(other, 0);
  ifreq ifr{};
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name.c_str());
  ASSERT_EQ(::ioctl(other, TUNSETIFF, &ifr), 0);
  auto t = virtio::open_tap_queues("dev0", "/dev/vhost-net", name, 1);
  ::close(other);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("device 'dev0': key 'iface' value '" + name +
                                   "' (path '/dev/vhost-net'): TUNSETIFF: Device or resource busy: the tap is busy"),
            std::string::npos)
      << t.error().message;
}

}  // namespace
}  // namespace ws
