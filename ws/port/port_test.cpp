// SPDX-License-Identifier: BSD-3-Clause
// Port base class and DriverRegistry, through a tiny fake driver: configure limits, the burst
// table across start/stop, stats baselines, prefix matching and the errors that list what exists.
#include "ws/port/port.hpp"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "ws/port/driver.hpp"
#include "ws/port/variant.hpp"

namespace ws {
namespace {

// RX "receives" up to `ready` packets (null pointers: the table, not the packets, is under test).
struct FakeRxQueue : QueueBase {
  std::uint16_t ready = 0;
  int calls = 0;
  RxQueueCounters counters;
  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    ++calls;
    const auto got = std::min(ready, n);
    for (std::uint16_t i = 0; i < got; ++i) pkts[i] = nullptr;
    ready = static_cast<std::uint16_t>(ready - got);
    counters.packets.add(got);
    counters.bytes.add(got * 60u);
    return got;
  }
};

// TX takes at most `room` packets; the rest stay with the caller.
struct FakeTxQueue : QueueBase {
  std::uint16_t room = 0xffff;
  int calls = 0;
  TxQueueCounters counters;
  std::uint16_t tx_burst(Mbuf**, std::uint16_t n) noexcept {
    ++calls;
    const auto sent = std::min(room, n);
    counters.packets.add(sent);
    counters.bytes.add(sent * 100u);
    counters.errors.add(n - sent);
    return sent;
  }
};

class FakePort final : public Port {
 public:
  explicit FakePort(std::string name) : Port(std::move(name), "net_fake") {}

  PortInfo info() const override { return {"net_fake", 4, 2, 0, 4096}; }

  Result<void> setup_rx_queue(std::uint16_t q, const RxQueueConfig&) override {
    if (q >= rxq_.size()) return fail("RX queue {} does not exist", q);
    rx_ready_[q] = true;
    return {};
  }
  Result<void> setup_tx_queue(std::uint16_t q, const TxQueueConfig&) override {
    if (q >= txq_.size()) return fail("TX queue {} does not exist", q);
    return {};
  }

  using Port::republish_rx;  // as a driver whose variant changes while the port runs
  using Port::republish_tx;

  std::vector<std::unique_ptr<FakeRxQueue>> rxq_;
  std::vector<std::unique_ptr<FakeTxQueue>> txq_;
  std::array<bool, 4> rx_ready_{};
  int configures = 0, stops = 0;

 protected:
  Result<void> do_configure(const PortConfig& c) override {
    ++configures;
    // Fresh queues with fresh counters, as real drivers do.
    rxq_.clear();
    txq_.clear();
    rx_ready_ = {};
    for (int q = 0; q < c.rx_queues; ++q) rxq_.push_back(std::make_unique<FakeRxQueue>());
    for (int q = 0; q < c.tx_queues; ++q) txq_.push_back(std::make_unique<FakeTxQueue>());
    return {};
  }
  Result<void> do_start() override {
    for (std::uint16_t q = 0; q < rxq_.size(); ++q) {
      if (!rx_ready_[q]) return fail("RX queue {} was not set up", q);
      publish_rx(q, rxq_[q].get());
    }
    for (std::uint16_t q = 0; q < txq_.size(); ++q) publish_tx(q, txq_[q].get());
    return {};
  }
  void do_stop() override { ++stops; }
  PortStats read_stats() const override {
    PortStats s;
    for (const auto& q : rxq_) add_rx(s, q->counters);
    for (const auto& q : txq_) add_tx(s, q->counters);
    return s;
  }
};

std::unique_ptr<FakePort> started_port(std::uint16_t rxq = 1, std::uint16_t txq = 1) {
  auto p = std::make_unique<FakePort>("fake0");
  EXPECT_TRUE(p->configure({rxq, txq}).has_value());
  for (std::uint16_t q = 0; q < rxq; ++q) EXPECT_TRUE(p->setup_rx_queue(q, {}).has_value());
  for (std::uint16_t q = 0; q < txq; ++q) EXPECT_TRUE(p->setup_tx_queue(q, {}).has_value());
  EXPECT_TRUE(p->start().has_value());
  return p;
}

TEST(Port, ConfigureChecksQueueLimits) {
  FakePort p("fake0");
  p.set_id(3);
  auto zero = p.configure({0, 1});
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().message, "port 3 (fake0): 0 RX queues requested, the device supports 1 to 4");
  auto too_many_tx = p.configure({1, 3});
  ASSERT_FALSE(too_many_tx.has_value());
  EXPECT_EQ(too_many_tx.error().message, "port 3 (fake0): 3 TX queues requested, the device supports 1 to 2");
  EXPECT_FALSE(p.configure({5, 1}).has_value());
  EXPECT_EQ(p.configures, 0) << "the driver is not asked when the base refuses";

  ASSERT_TRUE(p.configure({4, 2}).has_value());
  EXPECT_EQ(p.config().rx_queues, 4);
  EXPECT_EQ(p.config().tx_queues, 2);
  EXPECT_EQ(p.rxq_.size(), 4u);
}

TEST(Port, InterruptsAreRefusedByAPortWithNoFdAndQueuesAreChecked) {
  auto p = started_port(2, 1);
  auto fd = p->rx_intr_fd(0);
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().message, "port 0 (fake0): RX interrupts are not supported: the device has no fd to wait on");
  EXPECT_EQ(p->rx_intr_enable(1).error().message, fd.error().message);
  EXPECT_EQ(p->rx_intr_disable(1).error().message, fd.error().message);
  EXPECT_EQ(p->rx_intr_enable(2).error().message, "port 0 (fake0): RX queue 2 out of range: 2 configured");
  EXPECT_NE(p->link_event_fd().error().message.find("link state change events are not supported"), std::string::npos);
}

TEST(Port, ConfigureRefusedWhileStarted) {
  auto p = started_port();
  auto r = p->configure({2, 2});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("stop the port"), std::string::npos) << r.error().message;
  p->stop();
  EXPECT_TRUE(p->configure({2, 2}).has_value());
}

TEST(Port, BurstTableFollowsStartAndStop) {
  FakePort p("fake0");
  ASSERT_TRUE(p.configure({2, 1}).has_value());
  Mbuf* pkts[8];
  // Configured but not started: idle entries, the driver is not called.
  p.rxq_[0]->ready = 5;
  EXPECT_EQ(p.rx_burst(0, pkts, 8), 0);
  EXPECT_EQ(p.tx_burst(0, pkts, 8), 0);
  EXPECT_EQ(p.rxq_[0]->calls, 0);
  EXPECT_EQ(p.txq_[0]->calls, 0);

  ASSERT_TRUE(p.setup_rx_queue(0, {}).has_value());
  ASSERT_TRUE(p.setup_rx_queue(1, {}).has_value());
  ASSERT_TRUE(p.start().has_value());
  EXPECT_TRUE(p.started());
  EXPECT_TRUE(p.link().up);
  EXPECT_TRUE(p.start().has_value()) << "starting twice is harmless";
  EXPECT_EQ(p.rx_burst(0, pkts, 3), 3);
  EXPECT_EQ(p.rx_burst(0, pkts, 8), 2);
  EXPECT_EQ(p.rx_burst(1, pkts, 8), 0);
  EXPECT_EQ(p.rxq_[0]->calls, 2);
  EXPECT_EQ(p.rxq_[1]->calls, 1) << "each queue has its own entry";
  p.txq_[0]->room = 5;
  EXPECT_EQ(p.tx_burst(0, pkts, 8), 5);

  p.stop();
  EXPECT_FALSE(p.started());
  EXPECT_FALSE(p.link().up);
  EXPECT_EQ(p.stops, 1);
  p.stop();
  EXPECT_EQ(p.stops, 1) << "stopping a stopped port does nothing";
  p.rxq_[0]->ready = 5;
  EXPECT_EQ(p.rx_burst(0, pkts, 8), 0);
  EXPECT_EQ(p.tx_burst(0, pkts, 8), 0);
  EXPECT_EQ(p.rxq_[0]->calls, 2);
  EXPECT_EQ(p.txq_[0]->calls, 1);

  // Restart: the same queues come back into the table.
  ASSERT_TRUE(p.start().has_value());
  EXPECT_EQ(p.rx_burst(0, pkts, 8), 5);
}

// A burst function that counts its calls and moves nothing.
int counted_calls = 0;
std::uint16_t counted(QueueBase*, Mbuf**, std::uint16_t) noexcept {
  ++counted_calls;
  return 0;
}

// republish_rx/tx replace the driver's function of a running port wherever the port calls it
// from: the table, or the software RX offload queue (and the software RSS queues) in front of it.
// A stopped port's table stays idle, and its next start publishes what do_start() says.
TEST(Port, RepublishReplacesTheDriversFunctionWhereverItIsCalled) {
  auto p = started_port(2, 1);
  Mbuf* pkts[8];
  counted_calls = 0;
  p->republish_rx(1, &counted);
  p->republish_tx(0, &counted);
  EXPECT_EQ(p->rx_burst(1, pkts, 8), 0);
  EXPECT_EQ(p->tx_burst(0, pkts, 8), 0);
  EXPECT_EQ(counted_calls, 2);
  EXPECT_EQ(p->txq_[0]->calls, 0);

  p->stop();
  p->republish_rx(0, &counted);
  EXPECT_EQ(p->rx_burst(0, pkts, 8), 0);
  EXPECT_EQ(counted_calls, 2) << "stopped: the table stays idle";

  // Software VLAN stripping wraps each RX entry, software RSS wraps the wrappers.
  ASSERT_TRUE(p->set_rx_offloads(rx_offload::vlan_strip).has_value());
  ASSERT_TRUE(p->set_rss({rss_type::ip}).has_value());
  ASSERT_TRUE(p->start().has_value());
  EXPECT_EQ(p->rx_burst(0, pkts, 8), 0);  // software RSS's queue 0 polls every driver queue
  EXPECT_EQ(counted_calls, 2) << "the start published the driver's own again";
  EXPECT_EQ(p->rxq_[0]->calls + p->rxq_[1]->calls, 2);
  p->republish_rx(0, &counted);
  p->republish_rx(1, &counted);
  EXPECT_EQ(p->rx_burst(0, pkts, 8), 0);
  EXPECT_EQ(counted_calls, 4);
  EXPECT_EQ(p->rxq_[0]->calls + p->rxq_[1]->calls, 2);
}

TEST(Port, StartWithoutConfigureUsesOneQueueEach) {
  FakePort p("fake0");
  // Nothing configured yet: start() configures 1 RX + 1 TX, then the driver wants queue 0 set up.
  auto r = p.start();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "port 0 (fake0): RX queue 0 was not set up");
  EXPECT_EQ(p.rxq_.size(), 1u);
  ASSERT_TRUE(p.setup_rx_queue(0, {}).has_value());
  ASSERT_TRUE(p.start().has_value());
  Mbuf* pkts[4];
  p.rxq_[0]->ready = 4;
  EXPECT_EQ(p.rx_burst(0, pkts, 4), 4);
}

TEST(Port, FailedStartLeavesTheTableIdle) {
  FakePort p("fake0");
  ASSERT_TRUE(p.configure({2, 1}).has_value());
  ASSERT_TRUE(p.setup_rx_queue(0, {}).has_value());  // queue 1 is not set up
  auto r = p.start();
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("RX queue 1 was not set up"), std::string::npos) << r.error().message;
  EXPECT_FALSE(p.started());
  // Queue 0 was published before the driver found queue 1 missing; a stopped port must not poll it.
  Mbuf* pkts[4];
  p.rxq_[0]->ready = 4;
  EXPECT_EQ(p.rx_burst(0, pkts, 4), 0);
  EXPECT_EQ(p.rxq_[0]->calls, 0);
  EXPECT_EQ(p.tx_burst(0, pkts, 4), 0);
  EXPECT_EQ(p.txq_[0]->calls, 0);
}

TEST(Port, StatsCountFromTheLastReset) {
  auto p = started_port(2, 2);
  Mbuf* pkts[32];
  p->rxq_[0]->ready = 10;
  p->rxq_[1]->ready = 3;
  EXPECT_EQ(p->rx_burst(0, pkts, 32), 10);
  EXPECT_EQ(p->rx_burst(1, pkts, 32), 3);
  p->txq_[1]->room = 4;
  EXPECT_EQ(p->tx_burst(1, pkts, 6), 4);

  PortStats s = p->stats();
  EXPECT_EQ(s.ipackets, 13u);
  EXPECT_EQ(s.ibytes, 13u * 60);
  EXPECT_EQ(s.opackets, 4u);
  EXPECT_EQ(s.obytes, 400u);
  EXPECT_EQ(s.oerrors, 2u);
  EXPECT_EQ(s.q_ipackets, (std::vector<std::uint64_t>{10, 3}));
  EXPECT_EQ(s.q_opackets, (std::vector<std::uint64_t>{0, 4}));
  EXPECT_EQ(s.q_errors, (std::vector<std::uint64_t>{0, 2}));

  p->reset_stats();
  s = p->stats();
  EXPECT_EQ(s.ipackets, 0u);
  EXPECT_EQ(s.obytes, 0u);
  EXPECT_EQ(s.q_ipackets, (std::vector<std::uint64_t>{0, 0}));

  p->rxq_[1]->ready = 7;
  EXPECT_EQ(p->rx_burst(1, pkts, 32), 7);
  s = p->stats();
  EXPECT_EQ(s.ipackets, 7u);
  EXPECT_EQ(s.q_ipackets, (std::vector<std::uint64_t>{0, 7}));

  const auto xs = p->xstats();
  auto value = [&](std::string_view name) -> std::int64_t {
    for (const auto& x : xs)
      if (x.name == name) return static_cast<std::int64_t>(x.value);
    return -1;
  };
  EXPECT_EQ(value("rx_good_packets"), 7);
  EXPECT_EQ(value("rx_good_bytes"), 420);
  EXPECT_EQ(value("rx_q1_packets"), 7);
  EXPECT_EQ(value("rx_q0_packets"), 0);
  EXPECT_EQ(value("tx_q1_packets"), 0);
  EXPECT_EQ(value("tx_errors"), 0);
}

TEST(Port, ReconfigureDoesNotUnderflowStats) {
  // Reconfiguring replaces the driver's queues and their counters; the old baseline must not be
  // subtracted from the new counters.
  auto p = started_port(1, 1);
  Mbuf* pkts[8];
  p->rxq_[0]->ready = 8;
  EXPECT_EQ(p->rx_burst(0, pkts, 8), 8);
  p->reset_stats();
  p->stop();
  ASSERT_TRUE(p->configure({1, 1}).has_value());
  const PortStats s = p->stats();
  EXPECT_EQ(s.ipackets, 0u);
  EXPECT_EQ(s.ibytes, 0u);
  EXPECT_EQ(s.q_ipackets, std::vector<std::uint64_t>{0});
}

TEST(Port, ControlDefaults) {
  FakePort p("fake0");
  EXPECT_EQ(p.name(), "fake0");
  EXPECT_EQ(p.driver_name(), "net_fake");
  p.set_id(9);
  EXPECT_EQ(p.id(), 9);
  EXPECT_TRUE(p.promiscuous());
  EXPECT_TRUE(p.set_promiscuous(false).has_value());
  EXPECT_FALSE(p.promiscuous());
  EXPECT_EQ(p.mac(), MacAddress{});
  EXPECT_FALSE(p.link().up);
}

// ---- DriverRegistry ----

class FakeDriver final : public Driver {
 public:
  explicit FakeDriver(std::string name, std::vector<std::string_view> aliases = {})
      : name_(std::move(name)), aliases_(std::move(aliases)) {}
  std::string_view name() const override { return name_; }
  std::span<const std::string_view> aliases() const override { return aliases_; }
  std::span<const ParamSpec> params() const override { return params_; }
  Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv&) override {
    ++creates;
    auto n = args.get_uint("n", 1, 1, 4);
    if (!n) return std::unexpected(n.error());
    return std::make_unique<FakePort>(args.name());
  }
  int creates = 0;

 private:
  std::string name_;
  std::vector<std::string_view> aliases_;
  static constexpr std::array<ParamSpec, 2> params_ = {ParamSpec{"n", "uint", "1", "a number"},
                                                       ParamSpec{"mode", "string", "", "a mode"}};
};

TEST(DriverRegistry, LongestPrefixWins) {
  DriverRegistry reg;
  auto fake = std::make_unique<FakeDriver>("net_fake");
  auto fake_ext = std::make_unique<FakeDriver>("net_fake_ext");
  Driver* f = fake.get();
  Driver* fe = fake_ext.get();
  reg.add(std::move(fake_ext));  // registration order must not matter
  reg.add(std::move(fake));
  EXPECT_EQ(reg.find_for_device("net_fake0"), f);
  EXPECT_EQ(reg.find_for_device("net_fake_ext1"), fe);
  EXPECT_EQ(reg.find_for_device("net_fak0"), nullptr);
  EXPECT_EQ(reg.find_for_device("xnet_fake0"), nullptr);
  EXPECT_EQ(reg.names(), (std::vector<std::string_view>{"net_fake_ext", "net_fake"}));
}

// As DPDK's RTE_PMD_REGISTER_ALIAS: "virtio_user0" and "eth_vhost0" reach net_virtio_user and
// net_vhost; the longest prefix still wins across names and aliases alike.
TEST(DriverRegistry, AliasesFindTheirDriver) {
  DriverRegistry reg;
  auto user = std::make_unique<FakeDriver>("net_virtio_user", std::vector<std::string_view>{"virtio_user"});
  auto vhost = std::make_unique<FakeDriver>("net_vhost", std::vector<std::string_view>{"eth_vhost"});
  auto vhost_ext = std::make_unique<FakeDriver>("eth_vhost_ext");
  Driver* u = user.get();
  Driver* v = vhost.get();
  Driver* ve = vhost_ext.get();
  reg.add(std::move(user));
  reg.add(std::move(vhost_ext));
  reg.add(std::move(vhost));
  EXPECT_EQ(reg.find_for_device("net_virtio_user1"), u);
  EXPECT_EQ(reg.find_for_device("virtio_user0"), u);
  EXPECT_EQ(reg.find_for_device("net_vhost0"), v);
  EXPECT_EQ(reg.find_for_device("eth_vhost0"), v);
  EXPECT_EQ(reg.find_for_device("eth_vhost_ext0"), ve) << "a longer name beats a shorter alias";
  EXPECT_EQ(reg.find_for_device("vhost0"), nullptr);
  EXPECT_EQ(reg.names(), (std::vector<std::string_view>{"net_virtio_user", "eth_vhost_ext", "net_vhost"}));

  auto port = reg.create_port("virtio_user3,n=2", {});
  ASSERT_TRUE(port.has_value()) << port.error().message;
  EXPECT_EQ((*port)->name(), "virtio_user3") << "the device keeps the name it was given";

  auto unknown = reg.create_port("eth_bogus0", {});
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(
      unknown.error().message.find("net_virtio_user (alias virtio_user), eth_vhost_ext, net_vhost (alias eth_vhost)"),
      std::string::npos)
      << unknown.error().message;
}

TEST(DriverRegistry, CreatesPortsAndReportsErrors) {
  DriverRegistry reg;
  auto owned = std::make_unique<FakeDriver>("net_fake");
  FakeDriver* fake = owned.get();
  reg.add(std::move(owned));
  reg.add(std::make_unique<FakeDriver>("net_other"));

  auto port = reg.create_port("net_fake0,n=2,mode=x", {});
  ASSERT_TRUE(port.has_value()) << port.error().message;
  EXPECT_EQ((*port)->name(), "net_fake0");
  EXPECT_EQ(fake->creates, 1);

  auto unknown = reg.create_port("net_bogus0,n=1", {});
  ASSERT_FALSE(unknown.has_value());
  const std::string& u = unknown.error().message;
  EXPECT_NE(u.find("device 'net_bogus0,n=1'"), std::string::npos) << u;
  EXPECT_NE(u.find("no driver for 'net_bogus0'"), std::string::npos) << u;
  EXPECT_NE(u.find("net_fake"), std::string::npos) << u;
  EXPECT_NE(u.find("net_other"), std::string::npos) << u;

  auto bad_key = reg.create_port("net_fake0,nn=2", {});
  ASSERT_FALSE(bad_key.has_value());
  EXPECT_EQ(bad_key.error().message, "device 'net_fake0': unknown key 'nn' (known keys: n, mode)");
  EXPECT_EQ(fake->creates, 1) << "unknown keys are refused before the driver runs";

  auto bad_value = reg.create_port("net_fake0,n=9", {});
  ASSERT_FALSE(bad_value.has_value());
  EXPECT_NE(bad_value.error().message.find("key 'n'"), std::string::npos) << bad_value.error().message;

  auto bad_syntax = reg.create_port("net_fake0,n", {});  // a bare key is for booleans only
  ASSERT_FALSE(bad_syntax.has_value());
  EXPECT_NE(bad_syntax.error().message.find("key 'n' has no value, expected key=value"), std::string::npos)
      << bad_syntax.error().message;
}

// Variants: the instance the flags name, and a burst entry that calls exactly it.
struct VariantBase : QueueBase {
  virtual ~VariantBase() = default;
  virtual unsigned flags() const = 0;
};
template <bool A, bool B, bool C>
struct Variant final : VariantBase {
  unsigned flags() const override { return (A ? 4u : 0u) | (B ? 2u : 0u) | (C ? 1u : 0u); }
  std::uint16_t rx_burst(Mbuf**, std::uint16_t n) noexcept { return static_cast<std::uint16_t>(n * 10 + flags()); }
  std::uint16_t tx_burst(Mbuf**, std::uint16_t n) noexcept { return static_cast<std::uint16_t>(n * 100 + flags()); }
};

TEST(QueueVariant, EveryCombinationIsBuiltAndPublishedWithItsOwnBurst) {
  for (unsigned f = 0; f < 8; ++f) {
    const bool a = f & 4, b = f & 2, c = f & 1;
    auto rx = make_rx_variant<VariantBase, Variant>(a, b, c);
    auto tx = make_tx_variant<VariantBase, Variant>(a, b, c);
    ASSERT_NE(rx.get(), nullptr);
    EXPECT_EQ(rx->flags(), f);
    EXPECT_EQ(tx->flags(), f);
    const BurstEntry re = rx.entry(), te = tx.entry();
    EXPECT_EQ(re.queue, static_cast<QueueBase*>(rx.get()));
    EXPECT_EQ(re.fn(re.queue, nullptr, 3), 30 + f) << "the RX burst of Variant<" << a << b << c << ">";
    EXPECT_EQ(te.fn(te.queue, nullptr, 3), 300 + f);
  }
}

}  // namespace
}  // namespace ws
