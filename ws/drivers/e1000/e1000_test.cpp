// SPDX-License-Identifier: BSD-3-Clause
// net_e1000_em without a device: its control path on a BAR of plain memory (a reset that never
// completes, no link, the MAC from RAL/RAH or the EEPROM, clear-on-read statistics), and its
// queues against a simulated device writing descriptors, including garbage.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ws/drivers/builtin.hpp"
#include "ws/drivers/e1000/e1000_hw.hpp"
#include "ws/drivers/e1000/e1000_rxtx.hpp"
#include "ws/net/packet_builder.hpp"

namespace ws::e1000 {
namespace {

using namespace std::chrono_literals;

pci::Bar memory_bar() {
  void* p = ::mmap(nullptr, bar0_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  return pci::Bar(static_cast<std::byte*>(p), bar0_bytes);
}

TEST(E1000Hw, ResetThatNeverCompletesIsAnErrorNamingTheDevice) {
  pci::Bar bar = memory_bar();
  auto ok = reset(bar, "0000:00:02.0", 20ms);  // plain memory keeps CTRL.RST set
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("0000:00:02.0"), std::string::npos) << ok.error().message;
  EXPECT_NE(ok.error().message.find("CTRL.RST"), std::string::npos) << ok.error().message;
  EXPECT_EQ(bar.read32(reg::imc), 0xffffffffu) << "interrupts masked first";
  EXPECT_EQ(bar.read32(reg::rctl), 0u);
}

TEST(E1000Hw, ResetCompletesWhenTheDeviceClearsRst) {
  pci::Bar bar = memory_bar();
  std::atomic<bool> stop{false};
  std::thread device([&] {  // the device: clears RST once it sees it
    while (!stop.load()) {
      const std::uint32_t c = bar.read32(reg::ctrl);
      if (c & ctrl::rst) bar.write32(reg::ctrl, c & ~ctrl::rst);
    }
  });
  auto ok = reset(bar, "dev", 2000ms);
  stop = true;
  device.join();
  EXPECT_TRUE(ok) << (ok ? "" : ok.error().message);
}

TEST(E1000Hw, MacFromReceiveAddressOrEeprom) {
  pci::Bar bar = memory_bar();
  bar.write32(reg::ral0, 0x00563412);
  bar.write32(reg::rah0, 0x80009a78);  // AV
  auto mac = read_mac(bar, "dev");
  ASSERT_TRUE(mac);
  EXPECT_EQ(mac->to_string(), "12:34:56:00:78:9A");
  bar.write32(reg::rah0, 0);  // not valid: the EEPROM is read, and this one never answers
  mac = read_mac(bar, "dev");
  ASSERT_FALSE(mac);
  EXPECT_NE(mac.error().message.find("EEPROM"), std::string::npos);
  std::atomic<bool> stop{false};
  std::thread eeprom([&] {
    const std::uint16_t words[3] = {0x1102, 0x3322, 0x5544};
    while (!stop.load()) {
      const std::uint32_t v = bar.read32(reg::eerd);
      if ((v & eerd::start) && !(v & eerd::done))
        bar.write32(reg::eerd, v | eerd::done | std::uint32_t{words[(v >> eerd::addr_shift) & 3]} << eerd::data_shift);
    }
  });
  mac = read_mac(bar, "dev");
  stop = true;
  eeprom.join();
  ASSERT_TRUE(mac) << mac.error().message;
  EXPECT_EQ(mac->to_string(), "02:11:22:33:44:55");
}

TEST(E1000Hw, NoLinkIsAnErrorThatSaysHowToStartWithout) {
  pci::Bar bar = memory_bar();
  auto ok = link_up(bar, "0000:00:02.0", 20ms);
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("no link"), std::string::npos) << ok.error().message;
  EXPECT_NE(ok.error().message.find("link_wait_ms=0"), std::string::npos) << ok.error().message;
  EXPECT_TRUE(bar.read32(reg::ctrl) & ctrl::slu);
  EXPECT_TRUE(link_up(bar, "dev", 0ms));
  bar.write32(reg::status, status::lu | status::fd | 2u << status::speed_shift);
  EXPECT_TRUE(link_up(bar, "dev", 20ms));
  const LinkStatus l = read_link(bar);
  EXPECT_TRUE(l.up);
  EXPECT_EQ(l.speed_mbps, 1000u);
  EXPECT_TRUE(l.full_duplex);
}

TEST(E1000Hw, StatisticsAccumulateClearOnReadRegisters) {
  pci::Bar bar = memory_bar();
  HwStats hw;
  bar.write32(0x4074, 10);          // GPRC
  bar.write32(0x4088, 0xfffffff0);  // GORC low
  bar.write32(0x408c, 1);           // GORC high
  bar.write32(0x4010, 3);           // MPC
  bar.write32(0x4000, 2);           // CRCERRS
  hw.accumulate(bar);
  bar.write32(0x4074, 5);  // as if cleared by the read, then 5 more
  bar.write32(0x4088, 0x20);
  bar.write32(0x408c, 0);
  bar.write32(0x4010, 0);
  bar.write32(0x4000, 0);
  hw.accumulate(bar);
  PortStats s;
  hw.add_to(s);
  EXPECT_EQ(s.ipackets, 15u);
  EXPECT_EQ(s.ibytes, 0x1fffffff0ull + 0x20);
  EXPECT_EQ(s.imissed, 3u);
  EXPECT_EQ(s.ierrors, 2u);
  std::vector<XStat> x;
  hw.add_xstats(x);
  auto it = std::find_if(x.begin(), x.end(), [](const XStat& v) { return v.name == "rx_crc_errors"; });
  ASSERT_NE(it, x.end());
  EXPECT_EQ(it->value, 2u);
}

// The queues against a device simulated by the test (IOVA = VA in a plain arena).
class E1000Queues : public ::testing::Test {
 protected:
  void SetUp() override {
    arena_ = std::move(*Arena::create({"e1000_test", 32u << 20, HugePolicy::never}));
    pool_ = std::move(*PktmbufPool::create(*arena_, {"e1000_pool", 1024, 0}));
    bar_ = memory_bar();
    rx_.ring = static_cast<RxDesc*>(*arena_->allocate(sizeof(RxDesc) * 64, 4096, "rx ring"));
    rx_.size = 64;
    rx_.slots.assign(64, nullptr);
    rx_.pool = pool_.get();
    rx_.rdt = reinterpret_cast<volatile std::uint32_t*>(bar_.base() + reg::rdt);
    ASSERT_TRUE(rx_.fill("test"));
  }
  void TearDown() override {
    rx_.release();
    EXPECT_EQ(pool_->in_use(), 0u) << "every mbuf back in the pool";
  }
  // The device receives `bytes` into descriptor i.
  void deliver(std::uint16_t i, const std::vector<std::uint8_t>& bytes, std::uint8_t status, std::uint8_t errors = 0,
               std::uint16_t length_override = 0) {
    RxDesc& d = rx_.ring[i];
    std::memcpy(reinterpret_cast<void*>(d.addr), bytes.data(), bytes.size());
    d.length = length_override ? length_override : static_cast<std::uint16_t>(bytes.size());
    d.errors = errors;
    __atomic_store_n(&d.status, static_cast<std::uint8_t>(status | rx_status::dd), __ATOMIC_RELEASE);
  }
  std::uint32_t rdt() const { return bar_.read32(reg::rdt); }

  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PktmbufPool> pool_;
  pci::Bar bar_;
  Rx rx_;
};

TEST_F(E1000Queues, ReceivesWhatTheDeviceWroteAndGivesTheDescriptorsBack) {
  FrameSpec spec;
  spec.l4_proto = ip_proto_tcp;
  const BuiltFrame f = build_frame(spec);
  EXPECT_EQ(rx_.rx_burst(nullptr, 0), 0u);
  deliver(0, f.bytes, rx_status::eop | rx_status::ipcs | rx_status::tcpcs);
  deliver(1, f.bytes, rx_status::eop | rx_status::ipcs | rx_status::tcpcs, rx_error::tcpe);
  deliver(2, f.bytes, rx_status::eop | rx_status::ixsm);
  Mbuf* pkts[8];
  ASSERT_EQ(rx_.rx_burst(pkts, 8), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(pkts[k]->pkt_len, f.bytes.size());
    EXPECT_EQ(std::memcmp(pkts[k]->data(), f.bytes.data(), f.bytes.size()), 0);
  }
  EXPECT_EQ(pkts[0]->ol_flags, mbuf_flag::rx_ip_cksum_good | mbuf_flag::rx_l4_cksum_good);
  EXPECT_EQ(pkts[1]->ol_flags, mbuf_flag::rx_ip_cksum_good | mbuf_flag::rx_l4_cksum_bad);
  EXPECT_EQ(pkts[2]->ol_flags, 0u);
  EXPECT_EQ(rdt(), 0u) << "RDT waits for 8 refilled descriptors (a ring of 64): each write is an MMIO exit";
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(rx_.ring[k].status, 0);
    EXPECT_EQ(rx_.ring[k].addr, rx_.slots[k]->buf_iova + rx_.slots[k]->headroom_default) << "a fresh buffer";
  }
  mbuf_free_bulk(std::span<Mbuf* const>(pkts, 3));
  // A frame error is dropped and counted; the descriptor is reused.
  deliver(3, f.bytes, rx_status::eop, rx_error::ce);
  EXPECT_EQ(rx_.rx_burst(pkts, 8), 0u);
  EXPECT_EQ(rx_.counters.errors.read(), 1u);
  EXPECT_EQ(rdt(), 0u);
  // Wrapping: the last descriptor then the first.
  for (std::uint16_t i = 4; i < 64; ++i) deliver(i, f.bytes, rx_status::eop);
  std::uint16_t total = 0;
  for (std::uint16_t got; (got = rx_.rx_burst(pkts, 8)) > 0; total = static_cast<std::uint16_t>(total + got))
    mbuf_free_bulk(std::span<Mbuf* const>(pkts, got));
  EXPECT_EQ(total, 60u);
  // Written at the last burst that brought the refilled count to 8: one behind the next
  // descriptor to read then (60), so the ring never looks empty to the device.
  EXPECT_EQ(rdt(), 59u);
  deliver(0, f.bytes, rx_status::eop);
  ASSERT_EQ(rx_.rx_burst(pkts, 8), 1u);
  mbuf_free(pkts[0]);
  EXPECT_EQ(rdt(), 59u);
  for (std::uint16_t i = 1; i < 4; ++i) deliver(i, f.bytes, rx_status::eop);
  ASSERT_EQ(rx_.rx_burst(pkts, 8), 3u);
  mbuf_free_bulk(std::span<Mbuf* const>(pkts, 3));
  EXPECT_EQ(rdt(), 3u) << "8 refilled: 60-63 and 0-3";
  EXPECT_EQ(rx_.counters.packets.read(), 67u);
}

TEST_F(E1000Queues, GarbageFromTheDeviceStopsTheQueueAndIsCounted) {
  const BuiltFrame f = build_frame({});
  deliver(0, f.bytes, rx_status::eop);
  // A length beyond the 2048-byte buffer: the device claims to have written past it.
  deliver(1, f.bytes, rx_status::eop, 0, 4000);
  Mbuf* pkts[8];
  ASSERT_EQ(rx_.rx_burst(pkts, 8), 1u) << "the good packet before it is delivered";
  mbuf_free(pkts[0]);
  EXPECT_TRUE(rx_.broken);
  EXPECT_EQ(rx_.bad_descriptors.read(), 1u);
  EXPECT_EQ(rx_.rx_burst(pkts, 8), 0u) << "stopped";
  EXPECT_EQ(rdt(), 0u);
  // A fragment without EOP (no jumbo chaining was enabled) is garbage too.
  rx_.release();
  ASSERT_TRUE(rx_.fill("test"));
  deliver(0, f.bytes, 0);
  EXPECT_EQ(rx_.rx_burst(pkts, 8), 0u);
  EXPECT_TRUE(rx_.broken);
  EXPECT_EQ(rx_.bad_descriptors.read(), 2u);
}

TEST_F(E1000Queues, TransmitsLegacyDescriptorsAndReclaimsAtEachReportedStatus) {
  Tx<false> tx;
  tx.ring = static_cast<TxDesc*>(*arena_->allocate(sizeof(TxDesc) * 32, 4096, "tx ring"));
  tx.size = 32;
  tx.tdt = reinterpret_cast<volatile std::uint32_t*>(bar_.base() + reg::tdt);
  tx.init();
  ASSERT_EQ(tx.rs_thresh, 8u);
  const std::uint32_t base = pool_->in_use();
  Mbuf* pkts[40];
  ASSERT_TRUE(pool_->alloc_bulk(std::span<Mbuf*>(pkts, 40)));
  for (Mbuf* m : pkts) m->append(60);
  ASSERT_EQ(tx.tx_burst(pkts, 40), 31u) << "one descriptor always stays empty";
  EXPECT_EQ(bar_.read32(reg::tdt), 31u);
  EXPECT_EQ(tx.counters.full.read(), 9u);
  EXPECT_EQ(tx.ring[0].addr, pkts[0]->buf_iova + pkts[0]->data_off);
  EXPECT_EQ(tx.ring[0].cmd_len, 60u | txd::eop | txd::ifcs) << "no status report asked";
  for (int i : {7, 15, 23, 30})
    EXPECT_TRUE(tx.ring[i].cmd_len & txd::rs) << i << ": every 8th, and the full ring's last";
  // The device sends the first sixteen; only RS descriptors get DD written back.
  tx.ring[7].upper |= txd::sta_dd;
  tx.ring[15].upper |= txd::sta_dd;
  EXPECT_EQ(tx.tx_burst(pkts + 31, 9), 9u) << "room made by reclaiming what is done";
  EXPECT_EQ(pool_->in_use(), base + 31u - 16u + 9u);
  for (int i = 0; i < 32; ++i)
    if (tx.ring[i].cmd_len & txd::rs) tx.ring[i].upper |= txd::sta_dd;
  tx.reclaim();
  const std::uint32_t left = pool_->in_use() - base;
  EXPECT_LT(left, 8u) << "only packets after the last RS";
  EXPECT_EQ(tx.release(), left);
  EXPECT_EQ(pool_->in_use(), base);
}

TEST_F(E1000Queues, ChecksumRequestsBecomeOneContextAndDataDescriptors) {
  Tx<true> tx;
  tx.ring = static_cast<TxDesc*>(*arena_->allocate(sizeof(TxDesc) * 32, 4096, "tx ring"));
  tx.size = 32;
  tx.tdt = reinterpret_cast<volatile std::uint32_t*>(bar_.base() + reg::tdt);
  tx.init();
  FrameSpec spec;
  spec.l4_proto = ip_proto_tcp;
  const BuiltFrame f = build_frame(spec);
  Mbuf* pkts[3];
  ASSERT_TRUE(pool_->alloc_bulk(std::span<Mbuf*>(pkts, 3)));
  for (Mbuf* m : pkts) {
    std::memcpy(m->append(static_cast<std::uint16_t>(f.bytes.size())), f.bytes.data(), f.bytes.size());
    m->l2_len = f.l2_len;
    m->l3_len = f.l3_len;
    m->ol_flags = mbuf_flag::tx_ipv4 | mbuf_flag::tx_ip_cksum | mbuf_flag::tx_tcp_cksum;
  }
  pkts[2]->ol_flags = 0;  // no request: a data descriptor of its own, the context kept
  ASSERT_EQ(tx.tx_burst(pkts, 3), 3u);
  EXPECT_EQ(bar_.read32(reg::tdt), 4u) << "context + 3 data descriptors";
  const auto& c = reinterpret_cast<const TxContextDesc&>(tx.ring[0]);
  EXPECT_EQ(c.ipcss, 14);
  EXPECT_EQ(c.ipcso, 24);
  EXPECT_EQ(c.ipcse, 33);
  EXPECT_EQ(c.tucss, 34);
  EXPECT_EQ(c.tucso, 50);
  EXPECT_EQ(c.cmd_len, txd::dext | txd::tucmd_ip | txd::tucmd_tcp);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(tx.ring[i].cmd_len, f.bytes.size() | txd::dext | txd::dtyp_data | txd::eop | txd::ifcs);
    EXPECT_EQ(tx.ring[i].upper, txd::popts_ixsm | txd::popts_txsm);
  }
  EXPECT_EQ(tx.ring[3].cmd_len, f.bytes.size() | txd::eop | txd::ifcs) << "legacy: nothing asked";
  // The fields Intel's devices expect: IPv4 checksum 0, TCP checksum the pseudo-header sum.
  const auto* ip = reinterpret_cast<const Ipv4Hdr*>(pkts[0]->data() + 14);
  EXPECT_EQ(ip->hdr_checksum, 0);
  std::uint16_t l4;
  std::memcpy(&l4, pkts[0]->data() + 34 + 16, 2);
  EXPECT_EQ(l4, fold_sum(ipv4_pseudo_sum(*ip, static_cast<std::uint32_t>(f.bytes.size()) - 34)));
  // The context descriptor counts towards the next RS like the data ones.
  EXPECT_EQ(tx.since_rs, 4u);
  EXPECT_EQ(tx.release(), 3u);
  EXPECT_EQ(pool_->in_use(), 64u) << "only the RX ring's buffers are out";
}

// The driver through a fake sysfs device: a register BAR too small, and one that never resets.
TEST(E1000Driver, ProbeRefusesASmallBarAndAResetThatNeverCompletes) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / fmt::format("ws_e1000_test_{}", ::getpid());
  fs::remove_all(root);
  const fs::path d = root / "0000:00:02.0";
  fs::create_directories(d);
  auto put = [&](const char* name, const std::string& text) { std::ofstream(d / name) << text; };
  put("vendor", "0x8086\n");
  put("device", "0x10d3\n");
  put("class", "0x020000\n");
  std::ofstream(d / "config", std::ios::binary) << std::string(256, '\0');
  auto bar_file = [&](std::size_t bytes) {
    put("resource", fmt::format("0x00000000fe000000 0x{:016x} 0x0000000000040200\n", 0xfe000000 + bytes - 1));
    std::ofstream(d / "resource0", std::ios::binary) << std::string(bytes, '\0');
  };
  DriverRegistry registry;
  register_builtin_drivers(registry);
  auto arena = Arena::create({"e1000_probe", 4u << 20, HugePolicy::never});
  ASSERT_TRUE(arena);
  PortEnv env{arena->get(), 1, nullptr};

  bar_file(16 * 1024);
  auto dev = pci::Device::open(*pci::Address::parse("0000:00:02.0"), root.string());
  ASSERT_TRUE(dev) << dev.error().message;
  auto port = registry.create_pci_port(*dev, "0000:00:02.0", env);
  ASSERT_FALSE(port);
  EXPECT_NE(port.error().message.find("BAR 0 (registers) is 16384 bytes; the driver needs at least 131072"),
            std::string::npos)
      << port.error().message;

  bar_file(128 * 1024);
  dev = pci::Device::open(*pci::Address::parse("0000:00:02.0"), root.string());
  ASSERT_TRUE(dev);
  port = registry.create_pci_port(*dev, "0000:00:02.0", env);
  ASSERT_FALSE(port);
  EXPECT_NE(port.error().message.find("0000:00:02.0: the device did not complete its reset"), std::string::npos)
      << port.error().message;

  port = registry.create_pci_port(*dev, "0000:00:02.0,bogus=1", env);
  ASSERT_FALSE(port);
  EXPECT_NE(port.error().message.find("link_wait_ms"), std::string::npos) << port.error().message;
  fs::remove_all(root);
}

}  // namespace
}  // namespace ws::e1000
