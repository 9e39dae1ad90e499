// SPDX-License-Identifier: BSD-3-Clause
// net_ring ports: ring naming, pairing, queue setup and release of held mbufs.
#include "ws/drivers/ring/ring_port.hpp"

#include <array>
#include <map>
#include <vector>

#include "ws/drivers/ring/ring_rxtx.hpp"

namespace ws {
namespace {

using ring_pmd::MbufRing;

constexpr std::array ring_params = {
    ParamSpec{"size", "uint", "1024", "ring size in mbufs, a power of two"},
    ParamSpec{"peer", "string", "", "name of the port to pair with (its TX is our RX and back)"},
    ParamSpec{"rx_ring", "string", "", "receive from the named ring (queue q uses NAME.q when queues > 1)"},
    ParamSpec{"tx_ring", "string", "", "transmit to the named ring"},
    ParamSpec{"count_bytes", "bool", "0", "read each mbuf's length to count ibytes/obytes (DPDK's ring PMD does not)"},
};

class RingDriver;

class RingPort final : public Port {
 public:
  RingPort(RingDriver& driver, std::string name, std::uint32_t ring_size, std::string rx_ring, std::string tx_ring,
           bool count_bytes)
      : Port(std::move(name), "net_ring"),
        driver_(driver),
        ring_size_(ring_size),
        rx_name_(std::move(rx_ring)),
        tx_name_(std::move(tx_ring)),
        count_bytes_(count_bytes) {
    mac_ = MacAddress{{0x02, 0x72, 0x6e, 0x67, 0x00, 0x00}};
  }

  PortInfo info() const override { return {"net_ring", port_max_queues, port_max_queues, 0, 65535}; }
  Result<void> do_configure(const PortConfig& c) override;
  Result<void> setup_rx_queue(std::uint16_t queue, const RxQueueConfig&) override;
  Result<void> setup_tx_queue(std::uint16_t queue, const TxQueueConfig&) override;
  Result<void> do_start() override {
    for (std::uint16_t q = 0; q < rxq_.size(); ++q) {
      if (!rxq_[q]->ring) return fail("RX queue {} was not set up", q);
      publish_rx(q, rxq_[q].get());
    }
    for (std::uint16_t q = 0; q < txq_.size(); ++q) {
      if (!txq_[q]->ring) return fail("TX queue {} was not set up", q);
      publish_tx(q, txq_[q].get());
    }
    return {};
  }
  void release_mbufs() override;
  PortStats read_stats() const override { return sum_queues(rxq_, txq_); }
  std::vector<XStat> xstats() const override {
    auto out = Port::xstats();
    for (std::size_t q = 0; q < txq_.size(); ++q)
      out.push_back({fmt::format("tx_q{}_ring_full", q), txq_[q]->counters.full.read()});
    return out;
  }

 private:
  std::string ring_name(bool rx, std::uint16_t queue) const;

  RingDriver& driver_;
  std::uint32_t ring_size_;
  std::string rx_name_, tx_name_;
  bool count_bytes_;
  std::vector<std::unique_ptr<ring_pmd::RxQueue>> rxq_;
  std::vector<std::unique_ptr<ring_pmd::TxQueue>> txq_;
};

class RingDriver final : public Driver {
 public:
  std::string_view name() const override { return "net_ring"; }
  std::span<const ParamSpec> params() const override { return ring_params; }

  Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv&) override {
    auto size = args.get_uint("size", 1024, 2, ring_size_max);
    if (!size) return std::unexpected(size.error());
    if (!std::has_single_bit(*size))
      return fail("device '{}': key 'size' has value {}, expected a power of two (e.g. 1024)", args.name(), *size);
    auto count_bytes = args.get_bool("count_bytes", false);
    if (!count_bytes) return std::unexpected(count_bytes.error());
    const std::string peer = args.get_string("peer", "");
    if (peer == args.name()) return fail("device '{}': key 'peer' names the port itself", args.name());
    // Every check before the pairing is recorded: a refused device must leave no pairing behind.
    if (args.has("peer") && (args.has("rx_ring") || args.has("tx_ring")))
      return fail("device '{}': 'peer' and 'rx_ring'/'tx_ring' exclude each other", args.name());
    if (!peer.empty()) {
      if (peers_.contains(peer) || peers_.contains(args.name()))
        return fail("device '{}': key 'peer' value '{}': that port is already paired", args.name(), peer);
      peers_[peer] = args.name();
      peers_[args.name()] = peer;
    }
    return std::make_unique<RingPort>(*this, args.name(), static_cast<std::uint32_t>(*size),
                                      args.get_string("rx_ring", ""), args.get_string("tx_ring", ""), *count_bytes);
  }

  std::string peer_of(const std::string& port) const {
    auto it = peers_.find(port);
    return it == peers_.end() ? std::string() : it->second;
  }

  // The ring called `name`, created with `size` slots on first use. Rings live as long as the
  // driver, so a pair's ports may stop and start in any order.
  Result<MbufRing*> ring(const std::string& name, std::uint32_t size) {
    auto it = rings_.find(name);
    if (it != rings_.end()) return it->second.get();
    // Single producer and consumer, as DPDK's ring PMD: one lcore polls each queue.
    auto r = MbufRing::create(name, {size, Sync::single, Sync::single});
    if (!r) return std::unexpected(r.error());
    return (rings_[name] = std::move(*r)).get();
  }

 private:
  std::map<std::string, std::string> peers_;
  std::map<std::string, std::unique_ptr<MbufRing>> rings_;
};

std::string RingPort::ring_name(bool rx, std::uint16_t queue) const {
  const std::string q = std::to_string(queue);
  const std::string& named = rx ? rx_name_ : tx_name_;
  if (!named.empty()) return config().rx_queues > 1 || config().tx_queues > 1 ? named + "." + q : named;
  const std::string peer = driver_.peer_of(name());
  if (peer.empty()) return "ETH_RXTX" + q + "_" + name();  // loopback, DPDK's ring name
  return rx ? peer + ">" + name() + "." + q : name() + ">" + peer + "." + q;
}

Result<void> RingPort::do_configure(const PortConfig& c) {
  rxq_.clear();
  txq_.clear();
  for (std::uint16_t q = 0; q < c.rx_queues; ++q) rxq_.push_back(std::make_unique<ring_pmd::RxQueue>());
  for (std::uint16_t q = 0; q < c.tx_queues; ++q) txq_.push_back(std::make_unique<ring_pmd::TxQueue>());
  return {};
}

Result<void> RingPort::setup_rx_queue(std::uint16_t queue, const RxQueueConfig&) {
  if (queue >= rxq_.size()) return fail("RX queue {} does not exist ({} configured)", queue, rxq_.size());
  auto r = driver_.ring(ring_name(true, queue), ring_size_);
  if (!r) return std::unexpected(r.error());
  rxq_[queue]->ring = *r;
  rxq_[queue]->count_bytes = count_bytes_;
  return {};
}

Result<void> RingPort::setup_tx_queue(std::uint16_t queue, const TxQueueConfig&) {
  if (queue >= txq_.size()) return fail("TX queue {} does not exist ({} configured)", queue, txq_.size());
  auto r = driver_.ring(ring_name(false, queue), ring_size_);
  if (!r) return std::unexpected(r.error());
  txq_[queue]->ring = *r;
  txq_[queue]->count_bytes = count_bytes_;
  return {};
}

void RingPort::release_mbufs() {
  // Called with every port stopped, so draining TX rings too (a tx_ring nobody reads) is safe.
  Mbuf* burst[64];
  auto drain = [&](MbufRing* ring) {
    if (!ring) return;
    while (auto n = ring->dequeue_burst(std::span<Mbuf*>(burst, 64))) mbuf_free_bulk(std::span<Mbuf* const>(burst, n));
  };
  for (auto& q : rxq_) drain(q->ring);
  for (auto& q : txq_) drain(q->ring);
}

}  // namespace

std::unique_ptr<Driver> make_ring_driver() { return std::make_unique<RingDriver>(); }

}  // namespace ws
