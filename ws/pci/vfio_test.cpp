// SPDX-License-Identifier: BSD-3-Clause
// ws/pci/vfio without a device: the IOVA capability chain of VFIO_IOMMU_GET_INFO from byte
// buffers made to order, the choice of IOVAs inside an aperture, and IOMMU groups in a fake sysfs.
#include "ws/pci/vfio.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <linux/vfio.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace ws::pci::vfio {
namespace {

namespace fs = std::filesystem;

// A VFIO_IOMMU_GET_INFO reply: the header, then capabilities appended with put_*.
struct Reply {
  std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(sizeof(vfio_iommu_type1_info));

  Reply() {
    vfio_iommu_type1_info h{};
    h.argsz = sizeof h;
    h.flags = VFIO_IOMMU_INFO_CAPS | VFIO_IOMMU_INFO_PGSIZES;
    std::memcpy(bytes.data(), &h, sizeof h);
  }
  void set_first(std::uint32_t off) {
    std::memcpy(bytes.data() + offsetof(vfio_iommu_type1_info, cap_offset), &off, 4);
  }
  // Appends a capability header (id, next) and `body`; returns its offset.
  std::uint32_t put(std::uint16_t id, std::uint32_t next, const std::vector<std::uint8_t>& body) {
    const auto off = static_cast<std::uint32_t>(bytes.size());
    vfio_info_cap_header h{};
    h.id = id;
    h.version = 1;
    h.next = next;
    bytes.resize(off + sizeof h);
    std::memcpy(bytes.data() + off, &h, sizeof h);
    bytes.insert(bytes.end(), body.begin(), body.end());
    return off;
  }
  std::uint32_t put_ranges(std::uint32_t next, const std::vector<IovaRange>& ranges) {
    std::vector<std::uint8_t> body(8 + 16 * ranges.size());
    const auto n = static_cast<std::uint32_t>(ranges.size());
    std::memcpy(body.data(), &n, 4);
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      std::memcpy(body.data() + 8 + 16 * i, &ranges[i].first, 8);
      std::memcpy(body.data() + 16 + 16 * i, &ranges[i].last, 8);
    }
    return put(VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE, next, body);
  }
  void set_next(std::uint32_t cap, std::uint32_t next) {
    std::memcpy(bytes.data() + cap + offsetof(vfio_info_cap_header, next), &next, 4);
  }
};

constexpr std::uint64_t mib2 = 2u << 20;
// What Intel's IOMMU reports with a 39-bit address width: all of it but the MSI window.
const std::vector<IovaRange> vtd39{{0, 0xfedfffff}, {0xfef00000, (1ull << 39) - 1}};

TEST(VfioIovaRanges, ParsedFromTheCapabilityChainAfterOtherCapabilities) {
  Reply r;
  const auto migration = r.put(VFIO_IOMMU_TYPE1_INFO_CAP_MIGRATION, 0, std::vector<std::uint8_t>(24));
  const auto ranges = r.put_ranges(0, {vtd39[1], vtd39[0]});
  r.set_first(migration);
  r.set_next(migration, ranges);
  auto got = parse_iova_ranges(r.bytes, "0000:00:04.0");
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].first, 0u);  // sorted
  EXPECT_EQ((*got)[0].last, 0xfedfffffu);
  EXPECT_EQ((*got)[1].last, (1ull << 39) - 1);
}

TEST(VfioIovaRanges, NoCapabilitiesMeansNoRanges) {
  Reply r;
  r.bytes[offsetof(vfio_iommu_type1_info, flags)] = VFIO_IOMMU_INFO_PGSIZES;
  auto got = parse_iova_ranges(r.bytes, "x");
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->empty());
  EXPECT_FALSE(parse_iova_ranges(std::span(r.bytes).first(8), "x"));
}

TEST(VfioIovaRanges, HostileChainsAreRefused) {
  {  // points back at itself: offsets must grow
    Reply r;
    const auto cap = r.put(7, 0, {});
    r.set_first(cap);
    r.set_next(cap, cap);
    auto got = parse_iova_ranges(r.bytes, "0000:00:04.0");
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message.find("0000:00:04.0"), std::string::npos) << got.error().message;
    EXPECT_NE(got.error().message.find("outside"), std::string::npos) << got.error().message;
  }
  {  // past the end
    Reply r;
    r.set_first(4096);
    EXPECT_FALSE(parse_iova_ranges(r.bytes, "x"));
  }
  {  // into the header
    Reply r;
    r.put_ranges(0, vtd39);
    r.set_first(4);
    EXPECT_FALSE(parse_iova_ranges(r.bytes, "x"));
  }
  {  // more ranges claimed than the reply holds
    Reply r;
    const auto cap = r.put_ranges(0, vtd39);
    r.set_first(cap);
    r.bytes.resize(r.bytes.size() - 8);
    auto got = parse_iova_ranges(r.bytes, "x");
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message.find("does not fit"), std::string::npos) << got.error().message;
  }
  {  // a range that ends before it starts
    Reply r;
    r.set_first(r.put_ranges(0, {{0x2000, 0x1000}}));
    EXPECT_FALSE(parse_iova_ranges(r.bytes, "x"));
  }
}

TEST(VfioChooseIova, InsideTheApertureAlignedAndAboveTheFloor) {
  // Our mmap addresses lie near 2^47; the IOVA must not.
  auto a = choose_iova(vtd39, 64 << 20, mib2, mib2, "arena");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(*a, mib2);
  // Too big for the range below the MSI window: the one above it, aligned.
  auto b = choose_iova(vtd39, 0xfee00000, mib2, mib2, "arena");
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, 0xff000000u);
  EXPECT_EQ(*b % mib2, 0u);
  // After what is mapped already.
  auto c = choose_iova(vtd39, mib2, mib2, *b + 0xfee00000, "arena");
  ASSERT_TRUE(c);
  EXPECT_GE(*c, *b + 0xfee00000);
  // No ranges reported: all of 64 bits.
  auto d = choose_iova({}, mib2, mib2, mib2, "arena");
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, mib2);
}

TEST(VfioChooseIova, TooBigIsRefusedListingTheRanges) {
  auto a = choose_iova(vtd39, 1ull << 40, mib2, mib2, "arena 'ws'");
  ASSERT_FALSE(a);
  const std::string& m = a.error().message;
  EXPECT_NE(m.find("arena 'ws'"), std::string::npos) << m;
  EXPECT_NE(m.find("0xfef00000-0x7fffffffff"), std::string::npos) << m;
  EXPECT_FALSE(choose_iova({{0, ~0ull}}, mib2, mib2, ~0ull - 4096, "x"));  // no overflow past 2^64
  EXPECT_FALSE(choose_iova(vtd39, 0, mib2, mib2, "x"));
}

class VfioSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fmt::format("ws_vfio_test_{}_{}", ::getpid(),
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    for (const char* d : {"vfio-pci", "virtio-pci", "pcieport"}) fs::create_directories(root_ / "drivers" / d);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path add(const std::string& bdf, const std::string& driver, int group) {
    const fs::path d = root_ / "devices" / bdf;
    fs::create_directories(d);
    if (!driver.empty()) fs::create_directory_symlink(root_ / "drivers" / driver, d / "driver");
    if (group >= 0) {
      const fs::path g = root_ / "kernel" / "iommu_groups" / std::to_string(group);
      fs::create_directories(g / "devices");
      fs::create_directory_symlink(g, d / "iommu_group");
      fs::create_directory_symlink(d, g / "devices" / bdf);
    }
    return d;
  }
  fs::path root_;
};

TEST_F(VfioSysfs, GroupNumberAndWhatKeepsItFromBeingViable) {
  const auto a = add("0000:00:10.0", "vfio-pci", 7);
  add("0000:00:10.1", "virtio-pci", 7);
  add("0000:00:10.2", "", 7);
  add("0000:00:10.3", "pcieport", 7);
  const auto alone = add("0000:00:04.0", "vfio-pci", 3);
  auto g = iommu_group(a.string(), "0000:00:10.0 (8086:10d3)");
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(*g, 7);
  EXPECT_EQ(group_blockers(a.string()), std::vector<std::string>{"0000:00:10.1 (bound to virtio-pci)"});
  EXPECT_TRUE(group_blockers(alone.string()).empty());
}

TEST_F(VfioSysfs, NoGroupSaysTheKernelHasNoIommuAndWhatToDo) {
  const auto d = add("0000:00:04.0", "vfio-pci", -1);
  auto g = iommu_group(d.string(), "0000:00:04.0 (8086:10d3)");
  ASSERT_FALSE(g);
  const std::string& m = g.error().message;
  EXPECT_NE(m.find("0000:00:04.0 (8086:10d3) is in no IOMMU group"), std::string::npos) << m;
  EXPECT_NE(m.find("intel_iommu=on"), std::string::npos) << m;
  EXPECT_NE(m.find("uio_pci_generic"), std::string::npos) << m;
  EXPECT_NE(m.find("--iova-mode=pa"), std::string::npos) << m;
}

}  // namespace
}  // namespace ws::pci::vfio
