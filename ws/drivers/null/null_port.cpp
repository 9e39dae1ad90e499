// SPDX-License-Identifier: BSD-3-Clause
// net_null port: queue setup, start, stats.
#include "ws/drivers/null/null_port.hpp"

#include <array>
#include <vector>

#include "ws/drivers/null/null_rxtx.hpp"

namespace ws {
namespace {

constexpr std::array null_params = {
    ParamSpec{"size", "uint", "64", "packet length in bytes (RX), 1 to the mbuf data room"},
    ParamSpec{"copy", "bool", "0", "copy packet bytes on RX and TX, as a NIC's DMA would"},
    ParamSpec{"no-rx", "bool", "0", "receive nothing (TX-only port)"},
};

class NullPort final : public Port {
 public:
  NullPort(std::string name, std::uint16_t size, bool copy, bool no_rx)
      : Port(std::move(name), "net_null"), size_(size), copy_(copy), no_rx_(no_rx), packet_(size, 0), sink_(size) {
    // A locally administered MAC derived from the name, stable across runs.
    std::uint32_t h = 2166136261u;
    for (char c : this->name()) h = (h ^ static_cast<std::uint8_t>(c)) * 16777619u;
    mac_ = MacAddress{{0x02, 0x00, static_cast<std::uint8_t>(h >> 24), static_cast<std::uint8_t>(h >> 16),
                       static_cast<std::uint8_t>(h >> 8), static_cast<std::uint8_t>(h)}};
  }

  PortInfo info() const override { return {"net_null", port_max_queues, port_max_queues, 0, 65535}; }

  Result<void> do_configure(const PortConfig& c) override {
    rxq_.clear();
    txq_.clear();
    for (std::uint16_t q = 0; q < c.rx_queues; ++q) rxq_.push_back(std::make_unique<null_pmd::RxQueue>());
    for (std::uint16_t q = 0; q < c.tx_queues; ++q) txq_.push_back(std::make_unique<null_pmd::TxQueue>());
    return {};
  }

  Result<void> setup_rx_queue(std::uint16_t queue, const RxQueueConfig& c) override {
    if (queue >= rxq_.size()) return fail("RX queue {} does not exist ({} configured)", queue, rxq_.size());
    if (!c.pool) return fail("RX queue {} needs an mbuf pool", queue);
    if (size_ > c.pool->data_room_bytes() - mbuf_default_headroom)
      return fail("device '{}': key 'size' is {} but the pool's mbufs hold {} bytes", name(), size_,
                  c.pool->data_room_bytes() - mbuf_default_headroom);
    auto& q = *rxq_[queue];
    q.pool = c.pool;
    q.packet_bytes = size_;
    q.template_packet = copy_ ? packet_.data() : nullptr;
    q.no_rx = no_rx_;
    q.port = id();
    return {};
  }

  Result<void> setup_tx_queue(std::uint16_t queue, const TxQueueConfig&) override {
    if (queue >= txq_.size()) return fail("TX queue {} does not exist ({} configured)", queue, txq_.size());
    auto& q = *txq_[queue];
    q.sink = copy_ ? sink_.data() : nullptr;
    q.packet_bytes = size_;
    return {};
  }

  Result<void> do_start() override {
    for (std::uint16_t q = 0; q < rxq_.size(); ++q) {
      if (!rxq_[q]->pool) return fail("RX queue {} was not set up", q);
      publish_rx(q, rxq_[q].get());
    }
    for (std::uint16_t q = 0; q < txq_.size(); ++q) publish_tx(q, txq_[q].get());
    return {};
  }

  PortStats read_stats() const override { return sum_queues(rxq_, txq_); }

 private:
  std::uint16_t size_;
  bool copy_;
  bool no_rx_;
  std::vector<std::uint8_t> packet_;
  std::vector<std::uint8_t> sink_;
  std::vector<std::unique_ptr<null_pmd::RxQueue>> rxq_;
  std::vector<std::unique_ptr<null_pmd::TxQueue>> txq_;
};

class NullDriver final : public Driver {
 public:
  std::string_view name() const override { return "net_null"; }
  std::span<const ParamSpec> params() const override { return null_params; }
  Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv&) override {
    auto size = args.get_uint("size", 64, 1, mbuf_default_data_room - mbuf_default_headroom);
    if (!size) return std::unexpected(size.error());
    auto copy = args.get_bool("copy", false);
    if (!copy) return std::unexpected(copy.error());
    auto no_rx = args.get_bool("no-rx", false);
    if (!no_rx) return std::unexpected(no_rx.error());
    return std::make_unique<NullPort>(args.name(), static_cast<std::uint16_t>(*size), *copy, *no_rx);
  }
};

}  // namespace

std::unique_ptr<Driver> make_null_driver() { return std::make_unique<NullDriver>(); }

}  // namespace ws
