// SPDX-License-Identifier: BSD-3-Clause
// ws/pci without a device: addresses, and a fake sysfs tree in a temporary directory (ids,
// driver links, config space with a capability list, BARs as plain files mapped like resourceN).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ws/pci/address.hpp"
#include "ws/pci/device.hpp"

namespace ws::pci {
namespace {

namespace fs = std::filesystem;

TEST(PciAddress, ParsesBothFormsAndPrintsAsDpdk) {
  auto a = Address::parse("0000:00:04.0");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->to_string(), "0000:00:04.0");
  auto b = Address::parse("3a:1F.7");
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->to_string(), "0000:3a:1f.7");
  auto c = Address::parse("10000:02:00.1");  // domains above 0xffff do not exist in sysfs
  EXPECT_FALSE(c);
  auto d = Address::parse("00ab:02:00.1");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->domain, 0xabu);
  EXPECT_LT(*b, *d);
}

TEST(PciAddress, RefusesMalformedWithTheExpectedForm) {
  for (const char* bad : {"", "0000:00:04", "0000:00:4.0", "0000:00:20.0", "0000:00:04.8", "00:04.0x", "zz:00.0",
                          "0000:00:04.0,", "0000:000:04.0", "net_null0"}) {
    auto a = Address::parse(bad);
    ASSERT_FALSE(a) << bad;
    EXPECT_NE(a.error().message.find(bad), std::string::npos) << a.error().message;
    EXPECT_NE(a.error().message.find("0000:00:04.0"), std::string::npos) << a.error().message;
  }
}

TEST(PciAddress, LooksLikeTellsPciFromVirtualDevices) {
  EXPECT_TRUE(Address::looks_like("0000:00:04.0"));
  EXPECT_TRUE(Address::looks_like("00:04.0"));
  EXPECT_TRUE(Address::looks_like("0000:zz"));  // then refused by parse, with the form
  EXPECT_FALSE(Address::looks_like("net_null0"));
  EXPECT_FALSE(Address::looks_like("eth0"));
  EXPECT_FALSE(Address::looks_like("a:00.0"));
}

// A fake /sys/bus/pci/devices with devices made to order.
class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fmt::format("ws_pci_test_{}_{}", ::getpid(),
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "devices");
    fs::create_directories(root_ / "drivers" / "uio_pci_generic");
    fs::create_directories(root_ / "drivers" / "virtio-pci");
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string devices() const { return (root_ / "devices").string(); }

  static void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  static void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }

  // A device with a 256-byte config space holding `caps` (id, offset, next) and one 16 KiB
  // memory BAR 0 (and an I/O BAR 2).
  fs::path add(const std::string& bdf, std::uint16_t vendor, std::uint16_t device, const std::string& driver,
               const std::vector<std::array<std::uint8_t, 3>>& caps) {
    const fs::path d = root_ / "devices" / bdf;
    fs::create_directories(d);
    write(d / "vendor", fmt::format("0x{:04x}\n", vendor));
    write(d / "device", fmt::format("0x{:04x}\n", device));
    write(d / "subsystem_vendor", "0x1af4\n");
    write(d / "subsystem_device", "0x1100\n");
    write(d / "class", "0x020000\n");
    write(d / "numa_node", "-1\n");
    std::vector<std::uint8_t> config(256, 0);
    config[0] = static_cast<std::uint8_t>(vendor);
    config[1] = static_cast<std::uint8_t>(vendor >> 8);
    config[reg::command] = reg::command_io;
    if (!caps.empty()) {
      config[reg::status] = reg::status_cap_list;
      config[reg::cap_ptr] = caps.front()[1];
      for (const auto& c : caps) {
        config[c[1]] = c[0];
        config[c[1] + 1u] = c[2];
      }
    }
    write_bytes(d / "config", config);
    write(d / "resource",
          "0x00000000fe000000 0x00000000fe003fff 0x0000000000040200\n"
          "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
          "0x000000000000c000 0x000000000000c01f 0x0000000000040101\n");
    write_bytes(d / "resource0", std::vector<std::uint8_t>(16384, 0));
    if (!driver.empty()) fs::create_directory_symlink(root_ / "drivers" / driver, d / "driver");
    return d;
  }

  fs::path root_;
};

TEST_F(FakeSysfs, OpenReadsIdsDriverAndBars) {
  add("0000:00:02.0", 0x8086, 0x10d3, "uio_pci_generic", {});
  auto d = Device::open(*Address::parse("0000:00:02.0"), devices());
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->id(), (Id{0x8086, 0x10d3}));
  EXPECT_EQ(d->subsystem(), (Id{0x1af4, 0x1100}));
  EXPECT_EQ(d->class_code(), 0x020000u);
  EXPECT_EQ(d->driver(), "uio_pci_generic");
  EXPECT_EQ(d->describe(), "0000:00:02.0 (8086:10d3)");
  EXPECT_EQ(d->bar(0).size, 16384u);
  EXPECT_TRUE(d->bar(0).memory());
  EXPECT_EQ(d->bar(1).size, 0u);
  EXPECT_TRUE(d->bar(2).io());
  EXPECT_EQ(d->bar(5).size, 0u);
  EXPECT_TRUE(d->check_binding());
}

TEST_F(FakeSysfs, MissingDeviceListsThoseThere) {
  add("0000:00:02.0", 0x8086, 0x10d3, "", {});
  add("0000:00:03.0", 0x1af4, 0x1041, "virtio-pci", {});
  auto d = Device::open(*Address::parse("0000:00:09.0"), devices());
  ASSERT_FALSE(d);
  const std::string& m = d.error().message;
  EXPECT_NE(m.find("0000:00:09.0 does not exist"), std::string::npos) << m;
  EXPECT_NE(m.find("0000:00:02.0 (8086:10d3)"), std::string::npos) << m;
  EXPECT_NE(m.find("0000:00:03.0 (1af4:1041)"), std::string::npos) << m;
  const auto all = scan(devices());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name(), "0000:00:02.0");
  EXPECT_EQ(all[1].driver(), "virtio-pci");
}

TEST_F(FakeSysfs, KernelDriverIsRefusedWithTheBindCommands) {
  add("0000:00:03.0", 0x1af4, 0x1041, "virtio-pci", {});
  auto d = Device::open(*Address::parse("0000:00:03.0"), devices());
  ASSERT_TRUE(d);
  auto ok = d->check_binding();
  ASSERT_FALSE(ok);
  const std::string& m = ok.error().message;
  EXPECT_NE(m.find("0000:00:03.0 (1af4:1041) is bound to the kernel driver virtio-pci"), std::string::npos) << m;
  EXPECT_NE(m.find("modprobe vfio-pci; echo vfio-pci > /sys/bus/pci/devices/0000:00:03.0/driver_override"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("echo uio_pci_generic > /sys/bus/pci/devices/0000:00:03.0/driver_override"), std::string::npos) << m;
  EXPECT_NE(m.find("echo 0000:00:03.0 > /sys/bus/pci/devices/0000:00:03.0/driver/unbind"), std::string::npos) << m;
  EXPECT_NE(m.find("echo 0000:00:03.0 > /sys/bus/pci/drivers_probe"), std::string::npos) << m;
  // Unbound: nothing to unbind in the commands, and the device is ours to drive.
  EXPECT_EQ(bind_commands(d->address(), "", "vfio-pci").find("unbind"), std::string::npos);
}

TEST_F(FakeSysfs, VfioPciAndUioAreOursToDrive) {
  fs::create_directories(root_ / "drivers" / "vfio-pci");
  add("0000:00:03.0", 0x1af4, 0x1041, "vfio-pci", {});
  add("0000:00:04.0", 0x8086, 0x10d3, "uio_pci_generic", {});
  auto v = Device::open(*Address::parse("0000:00:03.0"), devices());
  auto u = Device::open(*Address::parse("0000:00:04.0"), devices());
  ASSERT_TRUE(v && u);
  EXPECT_TRUE(v->check_binding());
  EXPECT_TRUE(v->on_vfio());
  EXPECT_TRUE(u->check_binding());
  EXPECT_FALSE(u->on_vfio());
}

TEST_F(FakeSysfs, NoDriverThoughDriverOverrideNamesOneIsRefused) {
  const fs::path d = add("0000:00:04.0", 0x8086, 0x10d3, "", {});
  std::ofstream(d / "driver_override") << "(null)\n";
  auto plain = Device::open(*Address::parse("0000:00:04.0"), devices());
  ASSERT_TRUE(plain);
  EXPECT_TRUE(plain->check_binding()) << "no driver and no override: ours to drive";
  std::ofstream(d / "driver_override") << "vfio-pci\n";
  auto meant = Device::open(*Address::parse("0000:00:04.0"), devices());
  ASSERT_TRUE(meant);
  auto ok = meant->check_binding();
  ASSERT_FALSE(ok);
  const std::string& m = ok.error().message;
  EXPECT_NE(m.find("0000:00:04.0 (8086:10d3) is bound to no driver, though its driver_override names vfio-pci"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("modprobe vfio-pci; echo 0000:00:04.0 > /sys/bus/pci/drivers_probe"), std::string::npos) << m;
}

TEST_F(FakeSysfs, CapabilityListIsWalkedAndCheckedAsHostileInput) {
  // vendor (0x40) -> MSI-X (0x50) -> vendor (0x60) -> end
  add("0000:00:03.0", 0x1af4, 0x1041, "", {{cap::vendor, 0x40, 0x50}, {cap::msix, 0x50, 0x60}, {cap::vendor, 0x60, 0}});
  auto d = Device::open(*Address::parse("0000:00:03.0"), devices());
  ASSERT_TRUE(d);
  auto caps = d->capabilities();
  ASSERT_TRUE(caps) << caps.error().message;
  ASSERT_EQ(caps->size(), 3u);
  EXPECT_EQ((*caps)[0].id, cap::vendor);
  EXPECT_EQ((*caps)[1].offset, 0x50);
  EXPECT_EQ((*caps)[2].offset, 0x60);

  auto config = d->config();
  ASSERT_TRUE(config);
  auto looped = *config;
  looped[0x61] = 0x40;  // the last entry points back at the first
  auto r = Device::parse_capabilities(looped, "x");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("loops"), std::string::npos) << r.error().message;
  auto into_header = *config;
  into_header[0x51] = 0x10;
  r = Device::parse_capabilities(into_header, "x");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("0x10"), std::string::npos) << r.error().message;
  auto none = *config;
  none[reg::status] = 0;
  r = Device::parse_capabilities(none, "x");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->empty());
  r = Device::parse_capabilities(std::vector<std::uint8_t>(32), "x");
  EXPECT_FALSE(r);
}

TEST_F(FakeSysfs, BarIsMappedSharedAndSizeChecked) {
  const auto dir = add("0000:00:02.0", 0x8086, 0x10d3, "uio_pci_generic", {});
  auto d = Device::open(*Address::parse("0000:00:02.0"), devices());
  ASSERT_TRUE(d);
  auto small = d->map_bar(0, 128 * 1024, "registers");
  ASSERT_FALSE(small);
  EXPECT_NE(small.error().message.find("BAR 0 (registers) is 16384 bytes; the driver needs at least 131072"),
            std::string::npos)
      << small.error().message;
  auto io = d->map_bar(2, 16, "I/O");
  ASSERT_FALSE(io);
  EXPECT_NE(io.error().message.find("not a memory BAR"), std::string::npos);
  EXPECT_FALSE(d->map_bar(1, 16, "absent"));
  auto bar = d->map_bar(0, 16384, "registers");
  ASSERT_TRUE(bar) << bar.error().message;
  bar->write32(0x3400, 0x12345678);  // lands in the file, as a register write lands in the device
  std::ifstream f(dir / "resource0", std::ios::binary);
  f.seekg(0x3400);
  std::uint32_t v = 0;
  f.read(reinterpret_cast<char*>(&v), 4);
  EXPECT_EQ(v, 0x12345678u);
  EXPECT_EQ(bar->read32(0x3400), 0x12345678u);
}

TEST_F(FakeSysfs, EnableSetsMemoryMasterAndIntxDisable) {
  add("0000:00:02.0", 0x8086, 0x10d3, "", {});
  auto d = Device::open(*Address::parse("0000:00:02.0"), devices());
  ASSERT_TRUE(d);
  ASSERT_TRUE(d->enable());
  auto c = d->config();
  ASSERT_TRUE(c);
  const auto command = static_cast<std::uint16_t>((*c)[reg::command] | (*c)[reg::command + 1] << 8);
  EXPECT_EQ(command, reg::command_io | reg::command_memory | reg::command_master | reg::command_intx_disable);
}

}  // namespace
}  // namespace ws::pci
