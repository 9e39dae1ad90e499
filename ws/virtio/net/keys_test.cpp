// SPDX-License-Identifier: BSD-3-Clause
// The shared virtio-net device keys: defaults, each key's effect, and the refusals both drivers
// now give in the same words.
#include "ws/virtio/net/keys.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ws::virtio {
namespace {

Result<DriverKeys> parse(const std::string& text, bool packed_default = false) {
  auto args = DevArgs::parse(text);
  EXPECT_TRUE(args.has_value()) << text;
  return parse_driver_keys(*args, packed_default);
}

TEST(DriverKeys, DefaultsAreDpdksAndPackedFollowsTheDriver) {
  auto user = parse("net_virtio_user0,path=/x", false);
  ASSERT_TRUE(user) << user.error().message;
  EXPECT_FALSE(user->packed);
  EXPECT_TRUE(user->in_order && user->mrg && user->event_idx);
  EXPECT_FALSE(user->csum || user->tso);
  EXPECT_EQ(user->speed_mbps, 10000u);
  auto pci = parse("0000:00:04.0", true);
  ASSERT_TRUE(pci) << pci.error().message;
  EXPECT_TRUE(pci->packed);
}

TEST(DriverKeys, EachKeyChoosesItsFeature) {
  auto k = parse("x,packed_vq=1,in_order=0,mrg_rxbuf=0,event_idx=0,csum=1,tso=1,speed=25000,vectorized=1");
  ASSERT_TRUE(k) << k.error().message;
  EXPECT_TRUE(k->packed);
  EXPECT_FALSE(k->in_order || k->mrg || k->event_idx);
  EXPECT_TRUE(k->csum && k->tso);
  EXPECT_EQ(k->speed_mbps, 25000u);
  EXPECT_NE(driver_features(*k) & bit(feature::host_tso4), 0u);
}

TEST(DriverKeys, RefusalsNameTheDeviceTheKeyAndWhatItTakes) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c :
       {Case{"dev0,tso=1", "device 'dev0': key 'tso' needs csum=1"},
        Case{"dev0,speed=1000", "key 'speed' value 1000: expected a link speed in Mbps that DPDK accepts"},
        Case{"dev0,speed=fast", "speed"}, Case{"dev0,in_order=maybe", "in_order"}}) {
    auto k = parse(c.text);
    ASSERT_FALSE(k.has_value()) << c.text;
    EXPECT_NE(k.error().message.find(c.says), std::string::npos) << c.text << ": " << k.error().message;
  }
}

}  // namespace
}  // namespace ws::virtio
