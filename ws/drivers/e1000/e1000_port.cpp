// SPDX-License-Identifier: BSD-3-Clause
// net_e1000_em port: probe (reset, MAC), queue memory in the arena, start (rings, RCTL/TCTL,
// link), statistics from the device's registers.
#include "ws/drivers/e1000/e1000_port.hpp"

#include <array>
#include <mutex>

#include "ws/core/log.hpp"
#include "ws/drivers/e1000/e1000_hw.hpp"
#include "ws/drivers/e1000/e1000_rxtx.hpp"
#include "ws/drivers/e1000/e1000_testing.hpp"
#include "ws/pci/irq.hpp"
#include "ws/port/variant.hpp"

namespace ws {
namespace {

using namespace e1000;

constexpr std::array e1000_params = {
    ParamSpec{"link_wait_ms", "uint", "5000",
              "how long start waits for link (STATUS.LU) before failing; 0: start without waiting"},
};
constexpr std::array e1000_ids = {pci::Id{0x8086, 0x10d3}};  // 82574L

constexpr std::uint16_t default_descriptors = 256, min_descriptors = 32, max_descriptors = 4096;
constexpr std::chrono::milliseconds reset_timeout{100};

struct RingMem {
  std::byte* mem = nullptr;
  std::uint16_t capacity = 0;  // descriptors the memory holds
  std::uint16_t size = 0;      // descriptors in use
};

class E1000Port final : public Port {
 public:
  E1000Port(std::string name, pci::Bar bar, Arena& arena, MacAddress mac, std::chrono::milliseconds link_wait,
            const pci::Device& dev, std::optional<pci::IntrMode> intr_mode)
      : Port(std::move(name), "net_e1000_em"),
        bar_(std::move(bar)),
        arena_(arena),
        link_wait_(link_wait),
        dev_(dev),
        intr_mode_(intr_mode) {
    mac_ = mac;
  }
  ~E1000Port() override {
    if (started()) stop();
    release_mbufs();
  }

  PortInfo info() const override {
    PortInfo i{"net_e1000_em", 1, 1, min_descriptors, max_descriptors};
    i.tx_offload_capa = tx_offload::checksums;
    return i;
  }
  Result<void> do_configure(const PortConfig& c) override {
    if (c.rx_queues != 1 || c.tx_queues != 1)
      return fail("device '{}': {} RX and {} TX queues requested; the 82574L driver has one of each", name(),
                  c.rx_queues, c.tx_queues);
    // Checksum requests go to the device only when the application will make them: the plain
    // variant never looks at ol_flags.
    offload_ = (c.tx_offloads & tx_offload::checksums) != 0;
    txq_ = make_tx_variant<TxCommon, Tx>(offload_);
    return {};
  }
  Result<void> setup_rx_queue(std::uint16_t q, const RxQueueConfig& c) override {
    if (q != 0) return fail("device '{}': RX queue {} does not exist (one queue)", name(), q);
    if (c.pool == nullptr) return fail("device '{}': RX queue 0 needs a mempool", name());
    if (!arena_.contains(c.pool->buffers().data(), c.pool->buffers().size()))
      return fail("device '{}': RX pool '{}' has its buffers outside the DMA arena", name(), c.pool->mempool().name());
    if (c.pool->data_room_bytes() < mbuf_default_headroom + 2048)
      return fail(
          "device '{}': RX pool '{}' has {} bytes of data room; the device writes up to 2048 bytes after "
          "a {}-byte headroom: use --mbuf-size={} or more",
          name(), c.pool->mempool().name(), c.pool->data_room_bytes(), mbuf_default_headroom,
          mbuf_default_headroom + 2048);
    auto ok = ring_memory(rx_ring_, c.descriptors, "RX");
    if (!ok) return ok;
    rxq_.pool = c.pool;
    return {};
  }
  Result<void> setup_tx_queue(std::uint16_t q, const TxQueueConfig& c) override {
    if (q != 0) return fail("device '{}': TX queue {} does not exist (one queue)", name(), q);
    return ring_memory(tx_ring_, c.descriptors, "TX");
  }

  Result<void> do_start() override;
  void do_stop() override;
  void release_mbufs() override {
    rxq_.release();
    if (txq_.queue) (void)txq_->release();
  }
  LinkStatus link() const override;
  Result<void> set_promiscuous(bool on) override {
    (void)Port::set_promiscuous(on);
    if (started()) e1000::set_promiscuous(bar_, on);
    return {};
  }
  PortStats read_stats() const override {
    std::lock_guard lock(stats_mutex_);
    hw_.accumulate(bar_);
    PortStats s;
    hw_.add_to(s);
    s.rx_nombuf = rxq_.counters.nombuf.read();
    s.ierrors += rxq_.counters.errors.read() + rxq_.bad_descriptors.read();
    s.q_ipackets = {rxq_.counters.packets.read()};
    s.q_ibytes = {rxq_.counters.bytes.read()};
    if (txq_.queue) {
      s.oerrors += txq_->counters.errors.read();
      s.q_opackets = {txq_->counters.packets.read()};
      s.q_obytes = {txq_->counters.bytes.read()};
      s.q_errors = {txq_->counters.errors.read()};  // rte_ethdev's rx_q0_errors, as the vdev PMDs fill it
    }
    return s;
  }
  std::vector<XStat> xstats() const override {
    auto out = Port::xstats();  // reads the registers (read_stats)
    {
      std::lock_guard lock(stats_mutex_);
      hw_.add_xstats(out);
    }
    out.push_back({"rx_q0_broken", rxq_.broken ? 1u : 0u});
    out.push_back({"rx_q0_bad_descriptors", rxq_.bad_descriptors.read()});
    out.push_back({"rx_q0_frame_errors", rxq_.counters.errors.read()});  // rx_q0_errors is rte_ethdev's
    if (txq_.queue) out.push_back({"tx_q0_ring_full", txq_->counters.full.read()});
    out.push_back({"tx_checksum_offload", offload_ ? 1u : 0u});
    return out;
  }

 private:
  Result<void> ring_memory(RingMem& r, std::uint16_t wanted, std::string_view what);
  Result<int> do_rx_intr_fd(std::uint16_t queue) override;
  Result<void> do_rx_intr_enable(std::uint16_t queue) override;
  Result<void> do_rx_intr_disable(std::uint16_t queue) override;
  Result<int> do_link_event_fd() override;
  Result<void> interrupts();
  // MSI-X: RX queue 0 on vector 0, link changes on vector 1; MSI and INTx share their one.
  unsigned link_vector() const { return irq_->count() > 1 ? 1 : 0; }
  volatile std::uint32_t* reg_ptr(std::uint32_t off) const {
    return reinterpret_cast<volatile std::uint32_t*>(bar_.base() + off);
  }

  pci::Bar bar_;
  Arena& arena_;
  std::chrono::milliseconds link_wait_;
  RingMem rx_ring_, tx_ring_;
  e1000::Rx rxq_;
  QueueVariant<TxCommon> txq_;
  bool offload_ = false;
  mutable std::mutex stats_mutex_;  // reading the registers clears them: one reader at a time
  mutable HwStats hw_;
  const pci::Device& dev_;
  std::optional<pci::IntrMode> intr_mode_;
  std::unique_ptr<pci::Interrupts> irq_;  // made on the first request for an fd
  bool link_events_ = false;

#ifdef WS_TESTING
  friend Result<void> e1000::testing::post_stray_rx(Port&, std::uint64_t);
  friend Result<std::optional<std::uint16_t>> e1000::testing::take_stray_rx(Port&);
#endif
};

Result<void> E1000Port::ring_memory(RingMem& r, std::uint16_t wanted, std::string_view what) {
  const std::uint16_t n = wanted == 0 ? default_descriptors : wanted;
  if (n < min_descriptors || n > max_descriptors || n % 8 != 0)
    return fail(
        "device '{}': {} ring of {} descriptors; expected a multiple of 8 from {} to {} (RDLEN/TDLEN are "
        "multiples of 128 bytes)",
        name(), what, n, min_descriptors, max_descriptors);
  if (n > r.capacity) {  // the arena does not give memory back: keep the largest ring
    // 4 KiB aligned and, in pa mode, within one huge page: physically contiguous (§7.1.4.4).
    auto mem = arena_.allocate(std::size_t{n} * sizeof(RxDesc), 4096, fmt::format("{} {} ring", name(), what));
    if (!mem) return with_context(mem.error(), fmt::format("device '{}'", name()));
    r.mem = static_cast<std::byte*>(*mem);
    r.capacity = n;
  }
  r.size = n;
  return {};
}

Result<void> E1000Port::do_start() {
  if (rxq_.pool == nullptr || rx_ring_.mem == nullptr || tx_ring_.mem == nullptr)
    return fail("device '{}': RX and TX queue 0 must be set up before start", name());
  // Receive ring (§7.1.4): base, length, head 0; every descriptor gets a buffer.
  rxq_.ring = reinterpret_cast<RxDesc*>(rx_ring_.mem);
  rxq_.size = rx_ring_.size;
  rxq_.slots.assign(rxq_.size, nullptr);
  rxq_.rdt = reg_ptr(reg::rdt);
  rxq_.port_id = id();
  if (auto ok = rxq_.fill(name()); !ok) return ok;
  const std::uint64_t rx_iova = arena_.iova(rx_ring_.mem);
  bar_.write32(reg::rdbal, static_cast<std::uint32_t>(rx_iova));
  bar_.write32(reg::rdbah, static_cast<std::uint32_t>(rx_iova >> 32));
  bar_.write32(reg::rdlen, rxq_.size * static_cast<std::uint32_t>(sizeof(RxDesc)));
  bar_.write32(reg::rdh, 0);
  bar_.write32(reg::rdt, 0);
  bar_.write32(reg::rdtr, 0);  // no interrupt delay: we poll
  bar_.write32(reg::radv, 0);
  bar_.write32(reg::rfctl, 0);  // legacy descriptors
  bar_.write32(reg::rxcsum, rxcsum::ipofl | rxcsum::tuofl);
  for (std::uint32_t i = 0; i < 128; ++i) bar_.write32(reg::mta + 4 * i, 0);
  // Transmit ring (§7.2.10).
  TxCommon& tx = *txq_;
  tx.ring = reinterpret_cast<TxDesc*>(tx_ring_.mem);
  tx.size = tx_ring_.size;
  tx.tdt = reg_ptr(reg::tdt);
  tx.init();
  const std::uint64_t tx_iova = arena_.iova(tx_ring_.mem);
  bar_.write32(reg::tdbal, static_cast<std::uint32_t>(tx_iova));
  bar_.write32(reg::tdbah, static_cast<std::uint32_t>(tx_iova >> 32));
  bar_.write32(reg::tdlen, tx.size * static_cast<std::uint32_t>(sizeof(TxDesc)));
  bar_.write32(reg::tdh, 0);
  bar_.write32(reg::tdt, 0);
  bar_.write32(reg::tidv, 0);
  bar_.write32(reg::tadv, 0);
  bar_.write32(reg::tipg, 8 | 8u << 10 | 6u << 20);  // copper defaults (§10.2.6.2)
  bar_.write32(reg::tctl, tctl::en | tctl::psp | 0x0fu << tctl::ct_shift | 0x3fu << tctl::cold_shift | tctl::rtlc);
  std::uint32_t rctl = rctl::en | rctl::bam | rctl::secrc | rctl::bsize_2048;
  if (promiscuous()) rctl |= rctl::upe | rctl::mpe;
  bar_.write32(reg::rctl, rctl);
  rxq_.buf_bytes = 2048;
  bar_.write32(reg::rdt, rxq_.size - 1u);  // all but one descriptor to the device
  if (auto ok = link_up(bar_, name(), link_wait_); !ok) {
    do_stop();
    release_mbufs();
    return ok;
  }
  publish_rx(0, &rxq_);
  publish_tx(0, txq_.entry());
  const LinkStatus l = read_link(bar_);
  log(LogLevel::info, "{}: started, link {} at {} Mb/s {}", name(), l.up ? "up" : "down", l.speed_mbps,
      l.full_duplex ? "full duplex" : "half duplex");
  return {};
}

// The device's vectors, made once, kept across stop and start (applications hold their fds).
Result<void> E1000Port::interrupts() {
  if (irq_) return {};
  auto irq = pci::Interrupts::enable(dev_, intr_mode_, 2);
  if (!irq) return with_context(irq.error(), fmt::format("device '{}'", name()));
  irq_ = std::move(*irq);
  if (irq_->mode() == pci::IntrMode::msix) {  // a table of one vector: both causes on it
    const std::uint32_t rx = ivar::valid | 0u, other = ivar::valid | link_vector();
    bar_.write32(reg::ivar, rx << ivar::rxq0_shift | other << ivar::other_shift);
  }
  log(LogLevel::info, "{}: interrupts over {}, {} vector{}", name(), pci::intr_mode_name(irq_->mode()), irq_->count(),
      irq_->count() == 1 ? "" : "s");
  return {};
}

Result<int> E1000Port::do_rx_intr_fd(std::uint16_t) {
  if (auto ok = interrupts(); !ok) return std::unexpected(ok.error());
  return irq_->fd(0);
}

// The causes stay in ICR until disable clears them: one that came before the mask opens
// interrupts at once (nothing is lost between the last burst and the wait). QEMU's model also
// notifies a cause again only once it was cleared.
Result<void> E1000Port::do_rx_intr_enable(std::uint16_t) {
  if (auto ok = interrupts(); !ok) return ok;
  irq_->ack(0);  // drains the fd; INTx is unmasked
  bar_.write32(reg::ims, intr::rx);
  return {};
}

Result<void> E1000Port::do_rx_intr_disable(std::uint16_t) {
  if (!irq_) return {};
  bar_.write32(reg::imc, intr::rx);
  bar_.write32(reg::icr, intr::rx);  // write 1 to clear
  return {};
}

Result<int> E1000Port::do_link_event_fd() {
  if (auto ok = interrupts(); !ok) return std::unexpected(ok.error());
  link_events_ = true;
  bar_.write32(reg::icr, intr::link);
  bar_.write32(reg::ims, intr::link);
  return irq_->fd(link_vector());
}

// Reading the link after an event consumes it: the cause is cleared, so that the next change
// raises one again, and the fd drained (INTx unmasked). With one vector for everything (MSI,
// INTx) that also takes a pending RX wake-up: such an application looks at both on each.
LinkStatus E1000Port::link() const {
  if (link_events_) {
    bar_.write32(reg::icr, intr::link);
    irq_->ack(link_vector());
  }
  return read_link(bar_);
}

void E1000Port::do_stop() {
  bar_.write32(reg::rctl, 0);
  bar_.write32(reg::tctl, tctl::psp);
  (void)bar_.read32(reg::status);  // the device has seen both before we take the rings back
  // What the device did not send is dropped with the ring: count it.
  if (txq_.queue) txq_->reclaim();
}

class E1000Driver final : public Driver {
 public:
  std::string_view name() const override { return "net_e1000_em"; }
  std::span<const ParamSpec> params() const override { return e1000_params; }
  std::span<const pci::Id> pci_ids() const override { return e1000_ids; }
  Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv& env) override {
    if (env.pci == nullptr)
      return fail("device '{}': net_e1000_em drives PCI devices; give it with -a PCI_ADDRESS, not --vdev", args.name());
    if (env.arena == nullptr) return fail("device '{}': needs the application's DMA arena", args.name());
    auto wait = args.get_uint("link_wait_ms", 5000, 0, 600000);
    if (!wait) return std::unexpected(wait.error());
    const pci::Device& dev = *env.pci;
    auto bar = dev.map_bar(0, bar0_bytes, "registers");
    if (!bar) return std::unexpected(bar.error());
    if (auto ok = dev.enable(); !ok) return std::unexpected(ok.error());
    if (auto ok = e1000::reset(*bar, dev.name(), reset_timeout); !ok) return std::unexpected(ok.error());
    auto mac = read_mac(*bar, dev.name());
    if (!mac) return std::unexpected(mac.error());
    log(LogLevel::info, "{}: 82574L, MAC {}", dev.describe(), mac->to_string());
    return std::make_unique<E1000Port>(args.name(), std::move(*bar), *env.arena, *mac, std::chrono::milliseconds(*wait),
                                       dev, env.intr_mode);
  }
};

}  // namespace

std::unique_ptr<Driver> make_e1000_driver() { return std::make_unique<E1000Driver>(); }

#ifdef WS_TESTING
namespace e1000::testing {
namespace {
Result<E1000Port*> started_e1000(Port& port) {
  auto* p = dynamic_cast<E1000Port*>(&port);
  if (p == nullptr) return fail("device '{}': not a net_e1000_em port", port.name());
  if (!port.started()) return fail("device '{}': not started", port.name());
  return p;
}
}  // namespace

Result<void> post_stray_rx(Port& port, std::uint64_t iova) {
  auto p = started_e1000(port);
  if (!p) return std::unexpected(p.error());
  (*p)->rxq_.post_stray(iova);
  return {};
}

Result<std::optional<std::uint16_t>> take_stray_rx(Port& port) {
  auto p = started_e1000(port);
  if (!p) return std::unexpected(p.error());
  std::uint16_t len = 0;
  if (!(*p)->rxq_.take_stray(len)) return std::optional<std::uint16_t>{};
  return std::optional<std::uint16_t>{len};
}
}  // namespace e1000::testing
#endif

}  // namespace ws
