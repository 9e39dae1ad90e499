// SPDX-License-Identifier: BSD-3-Clause
// A virtio-net driver port whose device breaks a ring: the port stays up as a process matter
// (bursts return nothing, the other ring still works), reports the ring unhealthy, logs it once
// however often it is asked, and is healthy again, with a fresh log budget, after a restart.
#include "ws/virtio/net/port.hpp"

#include <gtest/gtest.h>

#include <string>

#include "ws/core/arena.hpp"

namespace ws::virtio {
namespace {

struct TestHotPath {
  static std::uint64_t buffer_addr(const Mbuf* m) noexcept { return reinterpret_cast<std::uint64_t>(m->buf_addr); }
  static void notify(QueueCommon&) noexcept {}
};

// No transport: the "device" is the test, writing the rings in our memory.
class TestPort final : public VirtioNetPort<TestHotPath> {
 public:
  explicit TestPort(Arena& arena) : VirtioNetPort("virtio_test0", "net_virtio_test", arena, 1, 64) {
    features_ = bit(feature::version_1);
  }
  using VirtioNetPort::rings_healthy;
  SplitRing ring(std::uint32_t r) const {
    const RingArea& a = rings_[r]->area;
    return {a.size, reinterpret_cast<SplitDesc*>(a.desc), reinterpret_cast<std::uint16_t*>(a.driver),
            reinterpret_cast<std::uint16_t*>(a.device)};
  }

 protected:
  Result<void> start_device() override { return {}; }
  void stop_device() override {}
  std::uint64_t dma_addr(const void* p) const override { return reinterpret_cast<std::uint64_t>(p); }
};

class BrokenRing : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = Arena::create({"net_port_test", 8u << 20, HugePolicy::never});
    ASSERT_TRUE(a) << a.error().message;
    arena_ = std::move(*a);
    auto p = PktmbufPool::create(*arena_, {"pool", 256, 0});
    ASSERT_TRUE(p) << p.error().message;
    pool_ = std::move(*p);
    port_ = std::make_unique<TestPort>(*arena_);
    ASSERT_TRUE(port_->configure({}));
    RxQueueConfig rx;
    rx.pool = pool_.get();
    ASSERT_TRUE(port_->setup_rx_queue(0, rx));
    ASSERT_TRUE(port_->setup_tx_queue(0, {}));
    ASSERT_TRUE(port_->start());
  }
  void TearDown() override {
    if (port_ != nullptr) {
      port_->stop();
      port_->release_mbufs();
      port_.reset();
    }
    EXPECT_EQ(pool_->in_use(), 0u) << "every mbuf the port held went home";
  }
  // The device returns on RX ring 0 a buffer id that was never made available.
  void device_returns_bad_id() {
    const SplitRing r = port_->ring(0);
    r.used_ring()[0] = {r.size + 5, 100};
    __atomic_store_n(r.used_idx(), std::uint16_t{1}, __ATOMIC_RELEASE);
  }
  // rings_healthy() as the link monitor asks it, with what it logged.
  std::pair<bool, std::string> ask() {
    ::testing::internal::CaptureStderr();
    const bool healthy = port_->rings_healthy();
    return {healthy, ::testing::internal::GetCapturedStderr()};
  }

  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PktmbufPool> pool_;
  std::unique_ptr<TestPort> port_;
};

TEST_F(BrokenRing, IsReportedOnceAndClearedByARestart) {
  EXPECT_TRUE(ask().first);
  device_returns_bad_id();
  Mbuf* pkts[8];
  EXPECT_EQ(port_->rx_burst(0, pkts, 8), 0);
  auto [healthy, said] = ask();
  EXPECT_FALSE(healthy);
  EXPECT_NE(said.find("virtio_test0: RX queue 0 was broken by the device: used_bad_id (id 69)"), std::string::npos)
      << said;
  for (int i = 0; i < 3; ++i) {
    auto [again, more] = ask();
    EXPECT_FALSE(again);
    EXPECT_EQ(more, "") << "logged once, however often asked";
  }
  ::testing::internal::CaptureStderr();
  port_->stop();  // the stop does not log it again
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("was broken"), std::string::npos);
  port_->release_mbufs();
  ASSERT_TRUE(port_->start());
  EXPECT_TRUE(ask().first) << "a restart gives the ring back";
  device_returns_bad_id();
  EXPECT_EQ(port_->rx_burst(0, pkts, 8), 0);
  auto [after, said_again] = ask();
  EXPECT_FALSE(after);
  EXPECT_NE(said_again.find("RX queue 0 was broken"), std::string::npos) << "a new break is logged again";
}

TEST_F(BrokenRing, ABreakNobodyAskedAboutIsLoggedAtTheStop) {
  device_returns_bad_id();
  Mbuf* pkts[8];
  EXPECT_EQ(port_->rx_burst(0, pkts, 8), 0);
  ::testing::internal::CaptureStderr();
  port_->stop();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("RX queue 0 was broken by the device"), std::string::npos) << said;
  port_->release_mbufs();
}

}  // namespace
}  // namespace ws::virtio
