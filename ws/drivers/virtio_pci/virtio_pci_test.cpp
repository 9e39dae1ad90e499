// SPDX-License-Identifier: BSD-3-Clause
// net_virtio without a device: the virtio capabilities parsed as hostile input, and the probe
// through a fake sysfs device whose BAR is a plain file (a legacy device, a BAR too small for
// the structures, no VERSION_1, bad keys; a good probe reads the MAC from the device config).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ws/drivers/builtin.hpp"
#include "ws/drivers/virtio_pci/virtio_pci_port.hpp"
#include "ws/virtio/transport/pci.hpp"

namespace ws::virtio {
namespace {

namespace fs = std::filesystem;

struct Cap {
  std::uint8_t at, type, bar;
  std::uint32_t offset, length;
  std::uint8_t len = 16;
  std::uint32_t multiplier = 0;
};

// Bytes past the config space are dropped: a capability placed to run past its end is cut off.
void put32(std::vector<std::uint8_t>& c, std::size_t off, std::uint32_t v) {
  for (std::size_t i = 0; i < 4 && off + i < c.size(); ++i) c[off + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// A 256-byte config space with `caps` chained in order (QEMU's layout: everything in one BAR).
std::vector<std::uint8_t> config_with(const std::vector<Cap>& caps) {
  std::vector<std::uint8_t> c(256, 0);
  c[0] = 0xf4;
  c[1] = 0x1a;
  if (caps.empty()) return c;
  c[pci::reg::status] = pci::reg::status_cap_list;
  c[pci::reg::cap_ptr] = caps.front().at;
  for (std::size_t i = 0; i < caps.size(); ++i) {
    const Cap& k = caps[i];
    c[k.at] = pci::cap::vendor;
    c[k.at + 1u] = i + 1 < caps.size() ? caps[i + 1].at : std::uint8_t{0};
    c[k.at + 2u] = k.len;
    c[k.at + 3u] = k.type;
    c[k.at + 4u] = k.bar;
    put32(c, k.at + 8u, k.offset);
    put32(c, k.at + 12u, k.length);
    if (k.len >= 20) put32(c, k.at + 16u, k.multiplier);
  }
  return c;
}

std::vector<Cap> qemu_caps(std::uint32_t notify_length = 0x1000) {
  return {{0x40, pci_cap::common, 0, 0x0000, 0x38},
          {0x50, pci_cap::isr, 0, 0x1000, 0x1000},
          {0x60, pci_cap::notify, 0, 0x3000, notify_length, 20, 4},
          {0x78, pci_cap::device, 0, 0x2000, 0x1000}};
}

std::string message_of(const Result<PciLayout>& r) { return r ? std::string("(no error)") : r.error().message; }

TEST(VirtioPciCaps, FindsEachStructureAndTheNotifyMultiplier) {
  auto l = parse_virtio_caps(config_with(qemu_caps()), "dev");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->common.offset, 0u);
  EXPECT_EQ(l->notify.offset, 0x3000u);
  EXPECT_EQ(l->device.offset, 0x2000u);
  EXPECT_TRUE(l->isr.present);
  EXPECT_EQ(l->notify_off_multiplier, 4u);
}

TEST(VirtioPciCaps, HostileOrLegacyCapabilitiesAreRefusedNamingTheDevice) {
  auto r = parse_virtio_caps(config_with({}), "0000:00:09.0 (1af4:1000)");
  ASSERT_FALSE(r);
  EXPECT_NE(message_of(r).find("0000:00:09.0 (1af4:1000): no virtio 1.x common configuration capability"),
            std::string::npos)
      << message_of(r);

  auto caps = qemu_caps();
  caps[2].len = 16;  // a notify capability without its multiplier
  r = parse_virtio_caps(config_with(caps), "dev");
  EXPECT_NE(message_of(r).find("no notify_off_multiplier"), std::string::npos) << message_of(r);

  caps = qemu_caps();
  caps[3].bar = 6;
  r = parse_virtio_caps(config_with(caps), "dev");
  EXPECT_NE(message_of(r).find("names BAR 6"), std::string::npos) << message_of(r);

  caps = qemu_caps();
  caps[0].length = 0x20;
  r = parse_virtio_caps(config_with(caps), "dev");
  EXPECT_NE(message_of(r).find("the common configuration is 32 bytes; virtio 1.0 gives it 56"), std::string::npos)
      << message_of(r);

  caps = qemu_caps();
  caps[1].len = 8;
  r = parse_virtio_caps(config_with(caps), "dev");
  EXPECT_NE(message_of(r).find("is 8 bytes, less than 16"), std::string::npos) << message_of(r);

  caps = qemu_caps();
  caps[3].at = 0xf8;  // 16 bytes from 0xf8 run past the 256-byte config space
  r = parse_virtio_caps(config_with(caps), "dev");
  EXPECT_NE(message_of(r).find("runs past the config space"), std::string::npos) << message_of(r);
}

// The control queue sits at 2 * max_virtqueue_pairs (§5.1.2); for the 0x8000 pairs §5.1.4 allows
// that is 0x10000, which no 16-bit queue index names. Computed in 16 bits it was 0, and starting
// the port set RX queue 0 up again as the control queue.
TEST(VirtioPciQueues, TheControlQueueIsAfterEveryPairAndBelowNumQueues) {
  auto q = ws::virtio_pci_queues(false, 8, 17, 64);
  EXPECT_EQ(q.pairs, 1u) << "no MQ: one pair";
  EXPECT_FALSE(q.ctrl);

  q = ws::virtio_pci_queues(true, 4, 9, 64);  // QEMU's queues=4: 8 data queues and the control queue
  EXPECT_EQ(q.pairs, 4u);
  EXPECT_TRUE(q.ctrl);
  EXPECT_EQ(q.ctrl_index, 8u);

  q = ws::virtio_pci_queues(true, 100, 201, 64);
  EXPECT_EQ(q.pairs, 64u) << "no more than a port takes";
  EXPECT_EQ(q.ctrl_index, 200u) << "but the control queue is where the device has it";

  q = ws::virtio_pci_queues(true, 0x7fff, 0xffff, 64);
  EXPECT_TRUE(q.ctrl);
  EXPECT_EQ(q.ctrl_index, 0xfffeu) << "the last index num_queues can count";

  for (const std::uint16_t num_queues : {std::uint16_t{0xffff}, std::uint16_t{0}, std::uint16_t{9}}) {
    q = ws::virtio_pci_queues(true, 0x8000, num_queues, 64);
    EXPECT_FALSE(q.ctrl) << "num_queues " << num_queues << ": the control queue would be 0x10000";
    EXPECT_EQ(q.pairs, 1u);
    EXPECT_EQ(q.ctrl_index, 0u);
  }

  q = ws::virtio_pci_queues(true, 4, 8, 64);
  EXPECT_FALSE(q.ctrl) << "num_queues leaves out the control queue at 8";
  EXPECT_EQ(q.pairs, 1u);
}

// A virtio-net device in a fake /sys/bus/pci/devices, its BAR 0 a 16 KiB file laid out as
// qemu_caps() says: common configuration at 0, device configuration (the MAC) at 0x2000.
class FakeVirtioDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fmt::format("ws_virtio_pci_test_{}_{}", ::getpid(),
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    dir_ = root_ / "0000:00:09.0";
    fs::create_directories(dir_);
    put("vendor", "0x1af4\n");
    put("device", "0x1041\n");
    put("class", "0x020000\n");
    put("resource", "0x00000000fe000000 0x00000000fe003fff 0x0000000000040200\n");
    set_config(qemu_caps());
    bar_.assign(16384, 0);
    bar_[24] = 0x00;  // queue_size: 256
    bar_[25] = 0x01;
    const std::uint8_t mac[6] = {0x52, 0x54, 0x00, 0x12, 0x00, 0x09};
    std::copy(std::begin(mac), std::end(mac), bar_.begin() + 0x2000);
    registry_ = std::make_unique<DriverRegistry>();
    register_builtin_drivers(*registry_);
    auto a = Arena::create({"virtio_pci_probe", 4u << 20, HugePolicy::never});
    ASSERT_TRUE(a) << a.error().message;
    arena_ = std::move(*a);
  }
  void TearDown() override { fs::remove_all(root_); }

  void put(const char* name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  void set_config(const std::vector<Cap>& caps) {
    const auto c = config_with(caps);
    std::ofstream(dir_ / "config", std::ios::binary)
        .write(reinterpret_cast<const char*>(c.data()), static_cast<std::streamsize>(c.size()));
  }
  // device_feature reads the same word whatever the select (a file keeps what was written
  // last): `word` is both halves of the features offered.
  void offer(std::uint32_t word) { put32(bar_, 4, word); }
  void put16(std::size_t off, std::uint16_t v) {
    bar_[off] = static_cast<std::uint8_t>(v);
    bar_[off + 1] = static_cast<std::uint8_t>(v >> 8);
  }

  Result<std::unique_ptr<Port>> probe(const std::string& devargs = "0000:00:09.0") {
    std::ofstream(dir_ / "resource0", std::ios::binary)
        .write(reinterpret_cast<const char*>(bar_.data()), static_cast<std::streamsize>(bar_.size()));
    auto dev = pci::Device::open(*pci::Address::parse("0000:00:09.0"), root_.string());
    if (!dev) return std::unexpected(dev.error());
    dev_ = std::make_unique<pci::Device>(std::move(*dev));
    return registry_->create_pci_port(*dev_, devargs, PortEnv{arena_.get(), 1, nullptr});
  }
  static std::string message_of(const Result<std::unique_ptr<Port>>& r) {
    return r ? std::string("(no error)") : r.error().message;
  }

  fs::path root_, dir_;
  std::vector<std::uint8_t> bar_;
  std::unique_ptr<DriverRegistry> registry_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<pci::Device> dev_;
};

TEST_F(FakeVirtioDevice, LegacyDeviceIsRefused) {
  set_config({});
  auto p = probe();
  ASSERT_FALSE(p);
  EXPECT_NE(message_of(p).find("0000:00:09.0 (1af4:1041): no virtio 1.x common configuration"), std::string::npos)
      << message_of(p);
  EXPECT_NE(message_of(p).find("disable-modern=on"), std::string::npos) << message_of(p);
}

TEST_F(FakeVirtioDevice, BarSmallerThanItsStructuresIsRefusedWithBothSizes) {
  set_config(qemu_caps(0x2000));  // notify at 0x3000 for 8 KiB: past the 16 KiB BAR
  auto p = probe();
  ASSERT_FALSE(p);
  EXPECT_NE(message_of(p).find("BAR 0 (virtio structures) is 16384 bytes; the driver needs at least 20480"),
            std::string::npos)
      << message_of(p);
  EXPECT_NE(message_of(p).find("0000:00:09.0"), std::string::npos) << message_of(p);
}

TEST_F(FakeVirtioDevice, DeviceWithoutVersion1IsRefused) {
  offer(0);
  auto p = probe();
  ASSERT_FALSE(p);
  EXPECT_NE(message_of(p).find("0000:00:09.0 (1af4:1041): offers features 0x0 without VERSION_1"), std::string::npos)
      << message_of(p);
}

TEST_F(FakeVirtioDevice, ProbeReadsTheMacAndChecksTheKeys) {
  offer(static_cast<std::uint32_t>(bit(feature::mac)) | 1u);  // bit 0 of the high word: VERSION_1 (bit 32)
  auto p = probe();
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ((*p)->driver_name(), "net_virtio");
  EXPECT_EQ((*p)->mac().to_string(), "52:54:00:12:00:09");
  EXPECT_EQ((*p)->info().max_rx_queues, 1u) << "no MQ offered: one pair";

  p = probe("0000:00:09.0,queue_size=512");
  EXPECT_NE(message_of(p).find("key 'queue_size' value 512: the device takes 256 descriptors at most"),
            std::string::npos)
      << message_of(p);
  p = probe("0000:00:09.0,tso=1");
  EXPECT_NE(message_of(p).find("key 'tso' needs csum=1"), std::string::npos) << message_of(p);
  p = probe("0000:00:09.0,packed_vq=maybe");
  EXPECT_NE(message_of(p).find("packed_vq"), std::string::npos) << message_of(p);
  p = probe("0000:00:09.0,queues=2");
  EXPECT_NE(message_of(p).find("queues"), std::string::npos) << message_of(p);
}

TEST_F(FakeVirtioDevice, PairsAreBoundedByTheQueuesTheDeviceHas) {
  // VERSION_1 (bit 32), CTRL_VQ and MQ: the low and high words read the same (see offer()).
  offer(static_cast<std::uint32_t>(bit(feature::ctrl_vq) | bit(feature::mq)) | 1u);
  const auto max_pairs = [this](std::uint16_t pairs, std::uint16_t num_queues) {
    put16(0x2000 + 8, pairs);  // max_virtqueue_pairs (§5.1.4)
    put16(18, num_queues);     // the common configuration's num_queues
  };
  max_pairs(2, 5);
  auto p = probe();
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ((*p)->info().max_rx_queues, 2u);
  max_pairs(0x8000, 0xffff);  // the control queue at 0x10000: no queue index names it
  p = probe();
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ((*p)->info().max_rx_queues, 1u) << "no control queue to enable a second pair with";
  max_pairs(8, 9);  // 8 pairs offered, 9 queues: the control queue at 16 does not exist
  p = probe();
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ((*p)->info().max_rx_queues, 1u);
  max_pairs(0, 0xffff);
  p = probe();
  EXPECT_NE(message_of(p).find("max_virtqueue_pairs 0 is outside 1..32768"), std::string::npos) << message_of(p);
}

}  // namespace
}  // namespace ws::virtio
