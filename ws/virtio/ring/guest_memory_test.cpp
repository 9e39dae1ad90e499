// SPDX-License-Identifier: BSD-3-Clause
// GuestMemory: translate() accepts a range only inside one region, refuses overflow; add()
// refuses zero size, overlap, overflow and a ninth region.
#include "ws/virtio/ring/guest_memory.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace ws::virtio {
namespace {

constexpr std::uint64_t max64 = std::numeric_limits<std::uint64_t>::max();

TEST(GuestMemory, TranslatesOnlyInsideOneRegion) {
  std::vector<std::byte> a(4096), b(4096);
  GuestMemory m;
  ASSERT_TRUE(m.add({0x10000, 0x7f0000, 4096, a.data()}));
  ASSERT_TRUE(m.add({0x11000, 0x7f1000, 4096, b.data()}));  // adjacent in guest space
  EXPECT_EQ(m.translate(0x10000, 4096), a.data());
  EXPECT_EQ(m.translate(0x10010, 16), a.data() + 16);
  EXPECT_EQ(m.translate(0x11ff0, 16), b.data() + 0xff0);
  EXPECT_EQ(m.translate(0x10ff0, 32), nullptr) << "crosses from one region into the next";
  EXPECT_EQ(m.translate(0x0fff0, 16), nullptr);
  EXPECT_EQ(m.translate(0x12000, 1), nullptr);
  EXPECT_EQ(m.translate(0x12000, 0), nullptr) << "zero length with an address outside";
  EXPECT_NE(m.translate(0x10000, 0), nullptr);
  EXPECT_EQ(m.translate(0x10001, max64), nullptr) << "addr + len overflows";
  EXPECT_EQ(m.translate(max64, 2), nullptr);
  EXPECT_EQ(m.translate_user(0x7f0010, 16), a.data() + 16);
  EXPECT_EQ(m.translate_user(0x10010, 16), nullptr);
}

TEST(GuestMemory, RefusesBadRegions) {
  std::vector<std::byte> a(4096);
  GuestMemory m;
  auto zero = m.add({0, 0, 0, a.data()});
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().message.find("size 0"), std::string::npos) << zero.error().message;
  EXPECT_FALSE(m.add({max64 - 10, 0, 4096, a.data()})) << "guest range overflows";
  EXPECT_FALSE(m.add({0, max64 - 10, 4096, a.data()})) << "user range overflows";
  EXPECT_FALSE(m.add({0, 0, 4096, nullptr}));
  ASSERT_TRUE(m.add({0x1000, 0x1000, 4096, a.data()}));
  auto over = m.add({0x1800, 0x9000, 4096, a.data()});
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().message.find("overlaps region 0"), std::string::npos) << over.error().message;
  EXPECT_FALSE(m.add({0x9000, 0x1fff, 16, a.data()})) << "user ranges overlap";
  for (std::uint64_t i = 1; i < GuestMemory::max_regions; ++i)
    ASSERT_TRUE(m.add({0x100000 * i, 0x100000 * i, 4096, a.data()})) << i;
  auto ninth = m.add({0x9000000, 0x9000000, 4096, a.data()});
  ASSERT_FALSE(ninth);
  EXPECT_NE(ninth.error().message.find("at most 8"), std::string::npos) << ninth.error().message;
  EXPECT_EQ(m.size(), GuestMemory::max_regions);
  m.clear();
  EXPECT_EQ(m.translate(0x1000, 1), nullptr);
}

}  // namespace
}  // namespace ws::virtio
