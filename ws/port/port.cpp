// SPDX-License-Identifier: BSD-3-Clause
// Port control-path state machine and stats bookkeeping.
#include "ws/port/port.hpp"

#include <algorithm>
#include <bit>
#include <utility>

#include "ws/flow/flow_table.hpp"
#include "ws/port/software_rss.hpp"
#include "ws/port/software_rx.hpp"
#include "ws/port/software_tx.hpp"
#include "ws/port/xstats.hpp"

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

// Here, where SoftwareRss and SoftwareTxQueue are complete types.
Port::Port(std::string name, std::string driver)
    : name_(std::move(name)), driver_(std::move(driver)), flows_(std::make_unique<FlowTable>(*this)) {}
Port::~Port() = default;

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

std::string tx_offload::names(std::uint64_t offloads) {
  static constexpr std::pair<std::uint64_t, const char*> known[] = {
      {vlan_insert, "vlan_insert"}, {ipv4_cksum, "ipv4_cksum"}, {udp_cksum, "udp_cksum"},  {tcp_cksum, "tcp_cksum"},
      {tcp_tso, "tcp_tso"},         {udp_tso, "udp_tso"},       {multi_segs, "multi_segs"}};
  std::string out;
  for (const auto& [bit, name] : known) {
    if ((offloads & bit) == 0) continue;
    if (!out.empty()) out += ',';
    out += name;
    offloads &= ~bit;
  }
  if (offloads) out += fmt::format("{}{:#x}", out.empty() ? "" : ",", offloads);
  return out.empty() ? "none" : out;
}

Result<void> Port::check_tx_offloads(std::uint64_t offloads, PktmbufPool* segment_pool) const {
  const std::uint64_t capa = info().tx_offload_capa;
  if (const std::uint64_t bad = offloads & ~(capa | tx_offload::software))
    return fail("TX offloads {} requested: the device does {} and the port can add {} in software",
                tx_offload::names(bad), tx_offload::names(capa), tx_offload::names(tx_offload::software));
  if ((offloads & ~capa & tx_offload::segmentation) && segment_pool == nullptr)
    return fail("software {} needs a pool for its segments (PortConfig::tx_segment_pool)",
                tx_offload::names(offloads & ~capa & tx_offload::segmentation));
  return {};
}

Result<void> Port::check_rss(const RssConfig& rss, std::uint16_t rx_queues) const {
  if (rss.types & ~(rss_type::ip | rss_type::tcp | rss_type::udp))
    return fail("RSS types {:#x}: accepted ip, tcp, udp ({:#x})", rss.types,
                rss_type::ip | rss_type::tcp | rss_type::udp);
  if (!rss.reta.empty() && (rss.reta.size() > RssReta::max_size || !std::has_single_bit(rss.reta.size())))
    return fail("RSS redirection table of {} entries: a power of two up to {} expected", rss.reta.size(),
                RssReta::max_size);
  for (std::size_t i = 0; i < rss.reta.size(); ++i)
    if (rss.reta[i] >= rx_queues)
      return fail("RSS redirection table entry {} points at RX queue {}; the port has {} RX queues", i, rss.reta[i],
                  rx_queues);
  return {};
}

Result<void> Port::set_rss(const RssConfig& rss) {
  if (started_) return fail("port {} ({}): stop the port before changing its RSS configuration", id_, name_);
  if (auto ok = check_rss(rss, config_.rx_queues); !ok) return with_context(ok.error(), context());
  config_.rss = rss;
  // A software hash moves what a kernel queue rule placed: the offload is decided again.
  if (auto ok = flows_->recompile(); !ok) return fail("port {} ({}): {}", id_, name_, ok.error().message);
  return {};
}

// Software RSS hashes for devices without a hash of their own; flow rules are matched on the
// same path, with no hash when only rules need it.
Result<void> Port::start_software_rss() {
  if (sw_rss_) rss_missed_before_ += sw_rss_->missed();
  sw_rss_.reset();
  const bool hash = config_.rss.types != 0 && info().rss_types_capa == 0;
  const FlowClassifier* flows = flows_->classifier();
  if (!hash && flows == nullptr) return {};  // the driver's entries stay: no cost
  RssConfig rss = config_.rss;
  if (!hash) rss.types = 0;
  auto made = SoftwareRss::create(rss, rx_table_, flows);
  if (!made) return std::unexpected(made.error());
  sw_rss_ = std::move(*made);
  for (std::uint16_t q = 0; q < rx_table_.size(); ++q) rx_table_[q] = sw_rss_->entry(q);
  return {};
}

Result<void> Port::apply_flows() {
  if (!started_) return {};  // start() puts the classifier in place
  const FlowClassifier* flows = flows_->classifier();
  if (sw_rss_) {
    const bool hash = config_.rss.types != 0 && info().rss_types_capa == 0;
    if (flows || hash) {
      sw_rss_->set_flows(flows);
      return {};
    }
    // No rules left and nothing to hash: the driver's entries again, as if started without.
    std::ranges::copy(sw_rss_->driver_entries(), rx_table_.begin());
    rss_missed_before_ += sw_rss_->missed();
    sw_rss_.reset();  // frees what waits in its rings
    return {};
  }
  if (flows == nullptr) return {};
  return start_software_rss();
}

Result<void> Port::set_tx_offloads(std::uint64_t offloads, PktmbufPool* segment_pool) {
  if (started_) return fail("port {} ({}): stop the port before changing its TX offloads", id_, name_);
  if (auto ok = check_tx_offloads(offloads, segment_pool); !ok) return with_context(ok.error(), context());
  config_.tx_offloads = offloads;
  config_.tx_segment_pool = segment_pool;
  return {};
}

std::uint64_t Port::software_tx_offloads() const {
  return config_.tx_offloads & ~info().tx_offload_capa & tx_offload::software;
}

void Port::wrap_tx_queues() {
  const std::uint64_t soft = software_tx_offloads();
  if (soft == 0) return;  // the driver's burst functions stay as they are: no cost
  const bool checksums = (soft & (tx_offload::checksums | tx_offload::vlan_insert)) != 0;
  const bool segment = (soft & tx_offload::segmentation) != 0;
  BurstFn fn = checksums ? (segment ? &software_offload_tx<true, true> : &software_offload_tx<true, false>)
                         : &software_offload_tx<false, true>;
  const bool sw_checksums = (info().tx_offload_capa & tx_offload::checksums) != tx_offload::checksums;
  for (std::size_t q = 0; q < tx_table_.size(); ++q) {
    SoftwareTxQueue& sq = *sw_tx_[q];
    sq.driver = tx_table_[q];
    sq.segment_pool = config_.tx_segment_pool;
    sq.sw_checksums = sw_checksums;
    tx_table_[q] = {fn, &sq};
  }
}

// DPDK's rte_eth_dev_configure() messages, so that scripts matching them carry over.
Result<void> Port::check_rx(std::uint64_t rx_offloads, std::uint16_t mtu) const {
  const PortInfo i = info();
  const std::uint64_t capa = i.rx_offload_capa | rx_offload::software;
  if (rx_offloads & ~capa)
    return fail(
        "Ethdev port_id={} requested Rx offloads {:#x} doesn't match Rx offloads capabilities {:#x} in "
        "rte_eth_dev_configure()",
        id_, rx_offloads, capa);
  if (mtu < i.min_mtu) return fail("Ethdev port_id={} MTU ({}) < device min MTU ({})", id_, mtu, i.min_mtu);
  if (mtu > i.max_mtu) return fail("Ethdev port_id={} MTU ({}) > device max MTU ({})", id_, mtu, i.max_mtu);
  return {};
}

Result<void> Port::set_rx_offloads(std::uint64_t offloads) {
  if (started_) return fail("port {} ({}): stop the port before changing its RX offloads", id_, name_);
  if (auto ok = check_rx(offloads, config_.mtu); !ok) return ok;
  config_.rx_offloads = offloads;
  return {};
}

Result<void> Port::set_mtu(std::uint16_t mtu) {
  if (auto ok = check_rx(config_.rx_offloads, mtu); !ok) return ok;
  config_.mtu = mtu;
  return {};
}

std::uint64_t Port::software_rx_offloads() const {
  return config_.rx_offloads & ~info().rx_offload_capa & rx_offload::software;
}

Result<void> Port::set_vlan_filter(std::uint16_t vid, bool on) {
  if (vid > 4095) return fail("port {} ({}): VLAN id {} out of range [0, 4095]", id_, name_, vid);
  vlan_filter_->set(vid, on);
  return {};
}

Result<void> Port::check_rx_queue(std::uint16_t queue) const {
  if (queue >= config_.rx_queues)
    return fail("port {} ({}): RX queue {} out of range: {} configured", id_, name_, queue, config_.rx_queues);
  return {};
}

Result<int> Port::rx_intr_fd(std::uint16_t queue) {
  if (auto ok = check_rx_queue(queue); !ok) return std::unexpected(ok.error());
  return do_rx_intr_fd(queue);
}

Result<void> Port::rx_intr_enable(std::uint16_t queue) {
  if (auto ok = check_rx_queue(queue); !ok) return ok;
  return do_rx_intr_enable(queue);
}

Result<void> Port::rx_intr_disable(std::uint16_t queue) {
  if (auto ok = check_rx_queue(queue); !ok) return ok;
  return do_rx_intr_disable(queue);
}

Result<int> Port::link_event_fd() { return do_link_event_fd(); }

Result<int> Port::do_rx_intr_fd(std::uint16_t) {
  return fail("port {} ({}): RX interrupts are not supported: the device has no fd to wait on", id_, name_);
}

Result<void> Port::do_rx_intr_enable(std::uint16_t queue) {
  if (auto fd = do_rx_intr_fd(queue); !fd) return std::unexpected(fd.error());
  return fail("port {} ({}): RX queue {} has an fd but no way to arm it", id_, name_, queue);
}

Result<void> Port::do_rx_intr_disable(std::uint16_t queue) { return do_rx_intr_enable(queue); }

Result<int> Port::do_link_event_fd() {
  return fail("port {} ({}): link state change events are not supported: its link changes only with start and stop",
              id_, name_);
}

FlowOffloadResult Port::do_flow_offload(const FlowRule&, std::uint32_t) {
  return std::unexpected(FlowOffloadRefusal{false, "the driver offloads no flow rules"});
}
void Port::do_flow_unoffload(const FlowOffload&) {}
FlowCounts Port::do_flow_offload_counts(const FlowOffload&) const { return {}; }

std::vector<std::uint16_t> Port::vlan_filter_ids() const {
  std::vector<std::uint16_t> ids;
  for (std::uint16_t v = 0; v < VlanFilter::size(); ++v)
    if (vlan_filter_->test(v)) ids.push_back(v);
  return ids;
}

void Port::wrap_rx_queues() {
  const std::uint64_t soft = software_rx_offloads();
  if (soft == 0) return;  // the driver's burst functions stay as they are: no cost
  const bool filter = (soft & rx_offload::vlan_filter) != 0;
  const bool strip = (soft & rx_offload::vlan_strip) != 0;
  BurstFn fn = filter ? (strip ? &software_offload_rx<true, true> : &software_offload_rx<true, false>)
                      : &software_offload_rx<false, true>;
  for (std::size_t q = 0; q < rx_table_.size(); ++q) {
    SoftwareRxQueue& sq = *sw_rx_[q];
    sq.driver = rx_table_[q];
    sq.filter = vlan_filter_.get();
    rx_table_[q] = {fn, &sq};
  }
}

Result<void> Port::configure(const PortConfig& config) {
  if (started_) return fail("port {} ({}): stop the port before configuring it", id_, name_);
  const PortInfo i = info();
  if (config.rx_queues == 0 || config.rx_queues > i.max_rx_queues)
    return fail("port {} ({}): {} RX queues requested, the device supports 1 to {}", id_, name_, config.rx_queues,
                i.max_rx_queues);
  if (config.tx_queues == 0 || config.tx_queues > i.max_tx_queues)
    return fail("port {} ({}): {} TX queues requested, the device supports 1 to {}", id_, name_, config.tx_queues,
                i.max_tx_queues);
  if (auto ok = check_tx_offloads(config.tx_offloads, config.tx_segment_pool); !ok)
    return with_context(ok.error(), context());
  if (auto ok = check_rss(config.rss, config.rx_queues); !ok) return with_context(ok.error(), context());
  if (auto ok = check_rx(config.rx_offloads, config.mtu); !ok) return ok;
  // The driver may replace its kernel program or interface: rules leave the old one first.
  flows_->unoffload_all();
  if (auto ok = do_configure(config); !ok) return with_context(ok.error(), context());
  config_ = config;
  rx_table_.assign(config.rx_queues, BurstEntry{&idle_burst, nullptr});
  tx_table_.assign(config.tx_queues, BurstEntry{&idle_burst, nullptr});
  sw_tx_.clear();
  for (std::uint16_t q = 0; q < config.tx_queues; ++q) sw_tx_.push_back(std::make_unique<SoftwareTxQueue>());
  // Filter counts of the old queues stay in the baseline below, through raw_stats().
  for (const auto& q : sw_rx_) rx_filtered_before_ += q->filtered.read();
  sw_rx_.clear();
  for (std::uint16_t q = 0; q < config.rx_queues; ++q) sw_rx_.push_back(std::make_unique<SoftwareRxQueue>());
  // The driver's queues, and their counters, were just replaced: an older baseline would make
  // stats() underflow.
  baseline_ = raw_stats();
  // Rules were checked against the old queue count.
  if (auto ok = flows_->recompile(); !ok) return fail("port {} ({}): {}", id_, name_, ok.error().message);
  return {};
}

Result<void> Port::start() {
  if (started_) return {};
  if (rx_table_.empty()) {
    if (auto ok = configure(config_); !ok) return ok;
  }
  const std::scoped_lock lock(publish_mu_);  // a driver's republish_* waits for the tables
  if (auto ok = do_start(); !ok) {
    // do_start() may have published some queues before failing: a port that did not start
    // must not be polled.
    idle_tables();
    return with_context(ok.error(), context());
  }
  wrap_tx_queues();
  wrap_rx_queues();  // before software RSS, which then hashes what the filter let in
  if (auto ok = start_software_rss(); !ok) {
    do_stop();
    idle_tables();
    return with_context(ok.error(), context());
  }
  find_driver_entries();
  started_ = true;
  return {};
}

void Port::stop() {
  if (!started_) return;
  const std::scoped_lock lock(publish_mu_);
  rx_driver_.clear();
  tx_driver_.clear();
  do_stop();
  idle_tables();
  if (sw_rss_) sw_rss_->drain();  // packets spread to queues nobody polls any more
  started_ = false;
}

void Port::idle_tables() {
  for (auto& e : rx_table_) e = {&idle_burst, nullptr};
  for (auto& e : tx_table_) e = {&idle_burst, nullptr};
}

// The innermost entry of each queue: wrap_rx_queues() moved the driver's RX entry into its
// software queue, start_software_rss() the table's (the driver's or the wrapper's) into its own.
void Port::find_driver_entries() {
  const bool rx_wrapped = software_rx_offloads() != 0, tx_wrapped = software_tx_offloads() != 0;
  rx_driver_.clear();
  tx_driver_.clear();
  for (std::uint16_t q = 0; q < rx_table_.size(); ++q)
    rx_driver_.push_back(rx_wrapped ? &sw_rx_[q]->driver : sw_rss_ ? &sw_rss_->driver(q) : &rx_table_[q]);
  for (std::uint16_t q = 0; q < tx_table_.size(); ++q)
    tx_driver_.push_back(tx_wrapped ? &sw_tx_[q]->driver : &tx_table_[q]);
}

namespace {
void store_fn(BurstEntry& e, BurstFn fn) noexcept {
  std::atomic_ref<BurstFn>(e.fn).store(fn, std::memory_order_relaxed);  // BurstEntry::operator() loads it
}
}  // namespace

void Port::republish_rx(std::uint16_t queue, BurstFn fn) {
  const std::scoped_lock lock(publish_mu_);
  if (queue < rx_driver_.size()) store_fn(*rx_driver_[queue], fn);
}

void Port::republish_tx(std::uint16_t queue, BurstFn fn) {
  const std::scoped_lock lock(publish_mu_);
  if (queue < tx_driver_.size()) store_fn(*tx_driver_[queue], fn);
}

PortStats Port::raw_stats() const {
  PortStats s = read_stats();
  for (const auto& q : sw_tx_) s.oerrors += q->dropped.read();
  s.ierrors += rx_filtered_before_;
  for (const auto& q : sw_rx_) s.ierrors += q->filtered.read();
  s.imissed += rss_missed_before_ + (sw_rss_ ? sw_rss_->missed() : 0);
  s.ierrors += flows_->dropped().read();  // packets flow rules dropped, as a NIC's filter drops
  return s;
}

PortStats Port::stats() const {
  PortStats s = raw_stats();
  s -= baseline_;
  return s;
}

void Port::reset_stats() { baseline_ = raw_stats(); }

std::vector<XStat> Port::xstats() const { return generic_xstats(stats(), true); }

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
