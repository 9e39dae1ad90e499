// SPDX-License-Identifier: BSD-3-Clause
// net_null through the driver registry: RX makes packets of `size` bytes and counts them, TX frees
// everything it is given, no-rx receives nothing, and bad device strings name device and key.
#include <gtest/gtest.h>

#include <vector>

#include "ws/testing/port_fixture.hpp"

namespace ws {
namespace {

class NullTest : public testing::PortFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(open_arena("null_test", 8u << 20));
    pool_ = make_pool(256, mbuf_default_data_room);
  }

  std::unique_ptr<PktmbufPool> make_pool(std::uint32_t count, std::uint16_t data_room) {
    PktmbufPool::Options o;
    o.name = "null_pool" + std::to_string(pools_++);
    o.count = count;
    o.cache_size = 0;
    o.data_room_bytes = data_room;
    auto p = PktmbufPool::create(*arena_, o);
    EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
    return p ? std::move(*p) : nullptr;
  }

  // Creates, configures, sets up and starts a port with `queues` RX and TX queues on `pool`.
  std::unique_ptr<Port> start_port(std::string_view device, std::uint16_t queues = 1, PktmbufPool* pool = nullptr) {
    std::unique_ptr<Port> p = create(device);
    if (!p) return nullptr;
    Port& port = *p;
    EXPECT_TRUE(port.configure({queues, queues}).has_value());
    for (std::uint16_t q = 0; q < queues; ++q) {
      EXPECT_TRUE(port.setup_rx_queue(q, {0, pool ? pool : pool_.get()}).has_value());
      EXPECT_TRUE(port.setup_tx_queue(q, {}).has_value());
    }
    auto ok = port.start();
    EXPECT_TRUE(ok.has_value()) << (ok ? "" : ok.error().message);
    return p;
  }

  int pools_ = 0;
};

TEST_F(NullTest, BuiltinDriversAreRegistered) {
  const auto names = registry_.names();
  EXPECT_NE(std::find(names.begin(), names.end(), "net_null"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "net_ring"), names.end());
  auto p = registry_.create_port("net_null0", env());
  ASSERT_TRUE(p.has_value()) << p.error().message;
  EXPECT_EQ((*p)->name(), "net_null0");
  EXPECT_EQ((*p)->driver_name(), "net_null");
  EXPECT_EQ((*p)->info().driver, "net_null");
  EXPECT_EQ((*p)->mac().bytes[0] & 0x03, 0x02) << "a locally administered unicast MAC";
  auto other = registry_.create_port("net_null1", env());
  ASSERT_TRUE(other.has_value());
  EXPECT_NE((*p)->mac(), (*other)->mac()) << "the MAC follows the name";
}

TEST_F(NullTest, RxMakesPacketsOfSizeTxFreesThemAll) {
  auto port = start_port("net_null0,size=100");
  ASSERT_TRUE(port);
  port->set_id(0);
  std::vector<Mbuf*> pkts(32);
  ASSERT_EQ(port->rx_burst(0, pkts.data(), 32), 32);
  EXPECT_EQ(pool_->in_use(), 32u);
  for (Mbuf* m : pkts) {
    ASSERT_TRUE(pool_->mempool().owns(m));
    EXPECT_EQ(m->data_len, 100);
    EXPECT_EQ(m->pkt_len, 100u);
    EXPECT_EQ(m->nb_segs, 1);
    EXPECT_EQ(m->next, nullptr);
    EXPECT_EQ(m->headroom(), mbuf_default_headroom);
  }
  PortStats s = port->stats();
  EXPECT_EQ(s.ipackets, 32u);
  EXPECT_EQ(s.ibytes, 3200u);

  // TX takes every packet, whatever its length, and frees it.
  pkts[0]->append(50);
  ASSERT_EQ(port->tx_burst(0, pkts.data(), 32), 32);
  EXPECT_EQ(pool_->in_use(), 0u);
  s = port->stats();
  EXPECT_EQ(s.opackets, 32u);
  EXPECT_EQ(s.obytes, 3250u);
  EXPECT_EQ(s.oerrors, 0u);
}

TEST_F(NullTest, TxFreesChainsAndClones) {
  auto port = start_port("net_null0");
  ASSERT_TRUE(port);
  Mbuf* a = pool_->alloc();
  Mbuf* b = pool_->alloc();
  ASSERT_TRUE(a && b);
  a->append(10);
  b->append(20);
  ASSERT_TRUE(a->chain(b));
  Mbuf* c = pool_->clone(a);
  ASSERT_NE(c, nullptr);
  Mbuf* pkts[2] = {a, c};
  EXPECT_EQ(port->tx_burst(0, pkts, 2), 2);
  EXPECT_EQ(pool_->in_use(), 0u);
  EXPECT_EQ(port->stats().obytes, 60u);
}

TEST_F(NullTest, CopyModeWritesAndReadsPacketBytes) {
  auto port = start_port("net_null0,size=64,copy=1");
  ASSERT_TRUE(port);
  std::vector<Mbuf*> pkts(8);
  ASSERT_EQ(port->rx_burst(0, pkts.data(), 8), 8);
  // Dirty a packet, let it go back to the pool, and receive it again: copy=1 rewrites the bytes.
  std::memset(pkts[0]->data(), 0xee, 64);
  ASSERT_EQ(port->tx_burst(0, pkts.data(), 8), 8);
  EXPECT_EQ(pool_->in_use(), 0u);
  std::vector<Mbuf*> again(256);
  ASSERT_EQ(port->rx_burst(0, again.data(), 256), 256);
  for (Mbuf* m : again)
    for (int i = 0; i < 64; ++i) ASSERT_EQ(m->data()[i], 0) << "byte " << i;
  ASSERT_EQ(port->tx_burst(0, again.data(), 256), 256);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(NullTest, NoRxReceivesNothing) {
  auto port = start_port("net_null0,no-rx=1");
  ASSERT_TRUE(port);
  Mbuf* pkts[32];
  EXPECT_EQ(port->rx_burst(0, pkts, 32), 0);
  EXPECT_EQ(pool_->in_use(), 0u);
  EXPECT_EQ(port->stats().ipackets, 0u);
  // TX still works.
  Mbuf* m = pool_->alloc();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(port->tx_burst(0, &m, 1), 1);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(NullTest, EmptyPoolCountsNombuf) {
  auto small = make_pool(16, mbuf_default_data_room);
  auto port = start_port("net_null0", 1, small.get());
  ASSERT_TRUE(port);
  std::vector<Mbuf*> pkts(32);
  EXPECT_EQ(port->rx_burst(0, pkts.data(), 32), 0) << "all or nothing, as the pool gives";
  EXPECT_EQ(port->stats().rx_nombuf, 32u);
  EXPECT_EQ(small->in_use(), 0u);
  ASSERT_EQ(port->rx_burst(0, pkts.data(), 16), 16);
  EXPECT_EQ(small->in_use(), 16u);
  ASSERT_EQ(port->tx_burst(0, pkts.data(), 16), 16);
  EXPECT_EQ(small->in_use(), 0u);
}

TEST_F(NullTest, QueuesCountSeparately) {
  auto port = start_port("net_null0,size=60", 2);
  ASSERT_TRUE(port);
  std::vector<Mbuf*> pkts(8);
  ASSERT_EQ(port->rx_burst(1, pkts.data(), 8), 8);
  ASSERT_EQ(port->tx_burst(0, pkts.data(), 3), 3);
  ASSERT_EQ(port->tx_burst(1, pkts.data() + 3, 5), 5);
  const PortStats s = port->stats();
  EXPECT_EQ(s.q_ipackets, (std::vector<std::uint64_t>{0, 8}));
  EXPECT_EQ(s.q_opackets, (std::vector<std::uint64_t>{3, 5}));
  EXPECT_EQ(s.q_obytes, (std::vector<std::uint64_t>{180, 300}));
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(NullTest, BadKeysAndValuesNameDeviceAndKey) {
  std::string e = create_error("net_null0,sise=64");
  EXPECT_NE(e.find("device 'net_null0'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'sise'"), std::string::npos) << e;
  EXPECT_NE(e.find("size, copy, no-rx"), std::string::npos) << e;

  for (std::string_view dev : {"net_null0,size=0", "net_null0,size=4096", "net_null0,size=big"}) {
    e = create_error(dev);
    EXPECT_NE(e.find("device 'net_null0'"), std::string::npos) << e;
    EXPECT_NE(e.find("key 'size'"), std::string::npos) << e;
    EXPECT_NE(e.find("[1, 2048]"), std::string::npos) << e;
  }
  e = create_error("net_null0,copy=maybe");
  EXPECT_NE(e.find("key 'copy'"), std::string::npos) << e;
  EXPECT_NE(e.find("'maybe'"), std::string::npos) << e;
  e = create_error("net_null0,no-rx=2");
  EXPECT_NE(e.find("key 'no-rx'"), std::string::npos) << e;
}

TEST_F(NullTest, SizeMustFitThePoolsMbufs) {
  auto small_room = make_pool(8, mbuf_default_headroom + 64);
  auto p = registry_.create_port("net_null0,size=100", env());
  ASSERT_TRUE(p.has_value());
  ASSERT_TRUE((*p)->configure({1, 1}).has_value());
  auto r = (*p)->setup_rx_queue(0, {0, small_room.get()});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("device 'net_null0'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("key 'size' is 100"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("hold 64 bytes"), std::string::npos) << r.error().message;

  auto no_pool = (*p)->setup_rx_queue(0, {});
  ASSERT_FALSE(no_pool.has_value());
  EXPECT_NE(no_pool.error().message.find("needs an mbuf pool"), std::string::npos);
  EXPECT_FALSE((*p)->setup_rx_queue(1, {0, pool_.get()}).has_value());

  auto start = (*p)->start();
  ASSERT_FALSE(start.has_value());
  EXPECT_NE(start.error().message.find("RX queue 0 was not set up"), std::string::npos) << start.error().message;
}

}  // namespace
}  // namespace ws
