// Port control-path state machine and stats bookkeeping.
#include "ws/port/port.hpp"

namespace ws {
namespace {

void subtract(std::vector<std::uint64_t>& v, const std::vector<std::uint64_t>& base) {
  for (std::size_t i = 0; i < v.size() && i < base.size(); ++i) v[i] -= base[i];
}

void add_at(std::vector<std::uint64_t>& v, std::size_t i, std::uint64_t n) {
  if (v.size() <= i) v.resize(i + 1);
  v[i] += n;
}

}  // namespace

PortStats& PortStats::operator-=(const PortStats& b) {
  ipackets -= b.ipackets;
  opackets -= b.opackets;
  ibytes -= b.ibytes;
  obytes -= b.obytes;
  imissed -= b.imissed;
  ierrors -= b.ierrors;
  oerrors -= b.oerrors;
  rx_nombuf -= b.rx_nombuf;
  subtract(q_ipackets, b.q_ipackets);
  subtract(q_opackets, b.q_opackets);
  subtract(q_ibytes, b.q_ibytes);
  subtract(q_obytes, b.q_obytes);
  subtract(q_errors, b.q_errors);
  return *this;
}

std::uint16_t idle_burst(QueueBase*, Mbuf**, std::uint16_t) noexcept { return 0; }

Result<void> Port::configure(const PortConfig& config) {
  if (started_) return fail("port {} ({}): stop the port before configuring it", id_, name_);
  const PortInfo i = info();
  if (config.rx_queues == 0 || config.rx_queues > i.max_rx_queues)
    return fail("port {} ({}): {} RX queues requested, the device supports 1 to {}", id_, name_, config.rx_queues,
                i.max_rx_queues);
  if (config.tx_queues == 0 || config.tx_queues > i.max_tx_queues)
    return fail("port {} ({}): {} TX queues requested, the device supports 1 to {}", id_, name_, config.tx_queues,
                i.max_tx_queues);
  if (auto ok = do_configure(config); !ok) return with_context(ok.error(), fmt::format("port {} ({})", id_, name_));
  config_ = config;
  rx_table_.assign(config.rx_queues, BurstEntry{&idle_burst, nullptr});
  tx_table_.assign(config.tx_queues, BurstEntry{&idle_burst, nullptr});
  // The driver's queues, and their counters, were just replaced: an older baseline would make
  // stats() underflow.
  baseline_ = read_stats();
  return {};
}

Result<void> Port::start() {
  if (started_) return {};
  if (rx_table_.empty()) {
    if (auto ok = configure(config_); !ok) return ok;
  }
  if (auto ok = do_start(); !ok) {
    // do_start() may have published some queues before failing: a port that did not start
    // must not be polled.
    idle_tables();
    return with_context(ok.error(), fmt::format("port {} ({})", id_, name_));
  }
  started_ = true;
  return {};
}

void Port::stop() {
  if (!started_) return;
  do_stop();
  idle_tables();
  started_ = false;
}

void Port::idle_tables() {
  for (auto& e : rx_table_) e = {&idle_burst, nullptr};
  for (auto& e : tx_table_) e = {&idle_burst, nullptr};
}

PortStats Port::stats() const {
  PortStats s = read_stats();
  s -= baseline_;
  return s;
}

void Port::reset_stats() { baseline_ = read_stats(); }

std::vector<XStat> Port::xstats() const {
  const PortStats s = stats();
  std::vector<XStat> out = {{"rx_good_packets", s.ipackets}, {"tx_good_packets", s.opackets},
                            {"rx_good_bytes", s.ibytes},     {"tx_good_bytes", s.obytes},
                            {"rx_missed_errors", s.imissed}, {"rx_errors", s.ierrors},
                            {"tx_errors", s.oerrors},        {"rx_mbuf_allocation_errors", s.rx_nombuf}};
  for (std::size_t q = 0; q < s.q_ipackets.size(); ++q) {
    out.push_back({fmt::format("rx_q{}_packets", q), s.q_ipackets[q]});
    out.push_back({fmt::format("rx_q{}_bytes", q), s.q_ibytes[q]});
  }
  for (std::size_t q = 0; q < s.q_opackets.size(); ++q) {
    out.push_back({fmt::format("tx_q{}_packets", q), s.q_opackets[q]});
    out.push_back({fmt::format("tx_q{}_bytes", q), s.q_obytes[q]});
  }
  return out;
}

void Port::add_rx(PortStats& s, const RxQueueCounters& c) {
  const std::size_t q = s.q_ipackets.size();
  s.ipackets += c.packets.read();
  s.ibytes += c.bytes.read();
  s.ierrors += c.errors.read();
  s.imissed += c.missed.read();
  s.rx_nombuf += c.nombuf.read();
  add_at(s.q_ipackets, q, c.packets.read());
  add_at(s.q_ibytes, q, c.bytes.read());
}

void Port::add_tx(PortStats& s, const TxQueueCounters& c) {
  const std::size_t q = s.q_opackets.size();
  s.opackets += c.packets.read();
  s.obytes += c.bytes.read();
  s.oerrors += c.errors.read();
  add_at(s.q_opackets, q, c.packets.read());
  add_at(s.q_obytes, q, c.bytes.read());
  add_at(s.q_errors, q, c.errors.read());
}

}  // namespace ws
