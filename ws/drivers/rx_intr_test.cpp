// SPDX-License-Identifier: BSD-3-Clause
// RX interrupts (Port::rx_intr_*) of net_vhost and virtio_user in one process, joined by their
// socket, split with EVENT_IDX (used_event, avail_event) and packed without (the flags): an armed queue's fd fires on
// the next packet, a disarmed one's does not, a packet that came before the enable fires it at once, the disable drains
// it, and net_vhost's fd stays the same across a frontend that reconnects.
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "ws/testing/port_fixture.hpp"

namespace ws {
namespace {

// Whether `fd` becomes readable within `ms`.
bool readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1 && (p.revents & POLLIN) != 0;
}

class RxInterrupts : public ws::testing::PortFixture, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    PktmbufPool::Options o;
    o.name = "intr";
    o.count = 4096;
    o.cache_size = 0;  // the test thread is no lcore: counts must be exact
    ASSERT_NO_FATAL_FAILURE(open_arena_and_pool("rx_intr", 64u << 20, o));
    char dir[] = "/tmp/ws-intr-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    sock_ = dir_ + "/vhost.sock";
  }
  void TearDown() override {
    for (Port* p : {virtio_.get(), vhost_.get()})
      if (p != nullptr) {
        p->stop();
        p->release_mbufs();
      }
    virtio_.reset();
    vhost_.reset();
    EXPECT_EQ(pool_->in_use(), 0u);
    ::rmdir(dir_.c_str());
  }

  std::unique_ptr<Port> start_port(const std::string& device) {
    auto port = create(device);
    EXPECT_NE(port, nullptr);
    if (port == nullptr) return nullptr;
    EXPECT_TRUE(port->configure({}));
    EXPECT_TRUE(port->setup_rx_queue(0, {0, pool_.get()}));
    EXPECT_TRUE(port->setup_tx_queue(0, {}));
    auto ok = port->start();
    EXPECT_TRUE(ok) << ok.error().message;
    return port;
  }
  void connect() {
    virtio_ = start_port(std::string("virtio_user0,path=") + sock_ + GetParam());
    ASSERT_NE(virtio_, nullptr);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!vhost_->link().up && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_TRUE(vhost_->link().up);
  }

  void send_one(Port& from) {
    Mbuf* m = pool_->alloc();
    ASSERT_NE(m, nullptr);
    m->data_len = 60;
    m->pkt_len = 60;
    std::memset(m->data(), 0xab, 60);
    ASSERT_EQ(from.tx_burst(0, &m, 1), 1);
  }
  // Polls `to` until it has received `n` packets (one second at most); frees them.
  void receive(Port& to, unsigned n) {
    unsigned got = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (got < n && std::chrono::steady_clock::now() < end) {
      Mbuf* pkts[8];
      const std::uint16_t k = to.rx_burst(0, pkts, 8);
      mbuf_free_bulk(std::span<Mbuf* const>(pkts, k));
      got += k;
    }
    EXPECT_EQ(got, n);
  }

  // The interrupt cycle on `rx`, fed by `tx`: DPDK's semantics.
  void check_cycle(Port& tx, Port& rx) {
    auto fd = rx.rx_intr_fd(0);
    ASSERT_TRUE(fd.has_value()) << fd.error().message;
    ASSERT_TRUE(rx.rx_intr_enable(0));
    EXPECT_FALSE(readable(*fd, 20)) << "armed with nothing pending";
    send_one(tx);
    EXPECT_TRUE(readable(*fd, 2000)) << "the next packet fires the fd";
    ASSERT_TRUE(rx.rx_intr_disable(0));
    EXPECT_FALSE(readable(*fd, 0)) << "the disable drains it";
    receive(rx, 1);
    send_one(tx);  // disarmed: polling, no interrupt
    EXPECT_FALSE(readable(*fd, 50));
    ASSERT_TRUE(rx.rx_intr_enable(0));  // a packet came before the enable: it fires at once
    EXPECT_TRUE(readable(*fd, 0));
    ASSERT_TRUE(rx.rx_intr_disable(0));
    receive(rx, 1);
  }

  std::string dir_, sock_;
  std::unique_ptr<Port> vhost_, virtio_;
};

TEST_P(RxInterrupts, VhostRxFiresOnTheFrontendsKick) {
  vhost_ = start_port("net_vhost0,iface=" + sock_);
  ASSERT_NE(vhost_, nullptr);
  auto fd = vhost_->rx_intr_fd(0);  // before the frontend comes: the same fd after
  ASSERT_TRUE(fd.has_value());
  ASSERT_NO_FATAL_FAILURE(connect());
  ASSERT_NO_FATAL_FAILURE(check_cycle(*virtio_, *vhost_));
  EXPECT_EQ(*vhost_->rx_intr_fd(0), *fd);
  // A new frontend: the fd stays, and an armed queue fires once the new ring starts.
  ASSERT_TRUE(vhost_->rx_intr_enable(0));
  virtio_->stop();
  virtio_->release_mbufs();
  virtio_.reset();
  ASSERT_TRUE(vhost_->rx_intr_disable(0));
  ASSERT_NO_FATAL_FAILURE(connect());
  EXPECT_EQ(*vhost_->rx_intr_fd(0), *fd);
  ASSERT_NO_FATAL_FAILURE(check_cycle(*virtio_, *vhost_));
}

TEST_P(RxInterrupts, VirtioUserRxFiresOnTheBackendsCall) {
  vhost_ = start_port("net_vhost0,iface=" + sock_);
  ASSERT_NE(vhost_, nullptr);
  ASSERT_NO_FATAL_FAILURE(connect());
  ASSERT_NO_FATAL_FAILURE(check_cycle(*vhost_, *virtio_));
}

INSTANTIATE_TEST_SUITE_P(Rings, RxInterrupts, ::testing::Values(",packed_vq=0", ",packed_vq=1,event_idx=0"));

class NoRxInterrupts : public ws::testing::PortFixture {};

TEST_F(NoRxInterrupts, NullAndRingPortsRefuseNamingThePort) {
  PktmbufPool::Options o;
  o.name = "none";
  o.count = 512;
  ASSERT_NO_FATAL_FAILURE(open_arena_and_pool("no_intr", 16u << 20, o));
  for (const char* device : {"net_null0", "net_ring0"}) {
    auto port = create(device);
    ASSERT_NE(port, nullptr);
    ASSERT_TRUE(port->configure({}));
    ASSERT_TRUE(port->setup_rx_queue(0, {0, pool_.get()}));
    ASSERT_TRUE(port->setup_tx_queue(0, {}));
    ASSERT_TRUE(port->start());
    const std::string why =
        fmt::format("port 0 ({}): RX interrupts are not supported: the device has no fd to wait on", device);
    EXPECT_EQ(port->rx_intr_fd(0).error().message, why);
    EXPECT_EQ(port->rx_intr_enable(0).error().message, why);
    EXPECT_EQ(port->rx_intr_disable(0).error().message, why);
    port->stop();
    port->release_mbufs();
  }
}

}  // namespace
}  // namespace ws
