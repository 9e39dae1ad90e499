// SPDX-License-Identifier: BSD-3-Clause
// net_virtio port: a virtio-net driver port (ws/virtio/net/port.hpp) on the virtio 1.x PCI
// transport (ws/virtio/transport/pci.hpp): feature negotiation at probe, queue registers and
// DRIVER_OK at start, the control queue for VIRTIO_NET_CTRL_MQ, link and MAC from the device
// configuration, RX-queue and link interrupts.
#include "ws/drivers/virtio_pci/virtio_pci_port.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <thread>

#include "ws/core/log.hpp"
#include "ws/pci/irq.hpp"
#include "ws/port/intr_fd.hpp"
#include "ws/virtio/features.hpp"
#include "ws/virtio/net/keys.hpp"
#include "ws/virtio/net/port.hpp"
#include "ws/virtio/transport/pci.hpp"

namespace ws {
namespace {

using virtio::bit;
using virtio::has;
namespace feature = virtio::feature;

constexpr std::array virtio_pci_params = {
    virtio::keys::packed_vq_on,
    virtio::keys::in_order,
    virtio::keys::mrg_rxbuf,
    virtio::keys::event_idx,
    virtio::keys::csum,
    virtio::keys::tso,
    ParamSpec{"queue_size", "uint", "0", "descriptors per ring, up to what the device takes (0: its maximum)"},
    // DPDK 22.11 net_virtio keys.
    virtio::keys::speed,
    virtio::keys::vectorized,
};
constexpr std::array virtio_pci_ids = {pci::Id{0x1af4, 0x1041}, pci::Id{0x1af4, 0x1000}};

constexpr std::chrono::milliseconds reset_timeout{1000};
constexpr std::uint16_t ctrl_mq_class = 4, ctrl_mq_pairs_set = 0;  // §5.1.6.5.5
constexpr std::uint8_t ctrl_ok = 0;

struct Options : virtio::DriverKeys {
  std::uint32_t queue_size = 0;
};

std::uint64_t wanted_features(const Options& o) {
  return virtio::driver_features(o) | bit(feature::mac) | bit(feature::status) | bit(feature::ctrl_vq) |
         bit(feature::mq) | bit(feature::access_platform);
}

class VirtioPciPort final : public virtio::VirtioNetPort<virtio::PciHotPath> {
 public:
  VirtioPciPort(std::string name, std::unique_ptr<virtio::PciTransport> t, Arena& arena, VirtioPciQueues queues,
                std::uint32_t queue_size, std::uint64_t features, MacAddress mac, std::uint32_t speed,
                const pci::Device& dev, std::optional<pci::IntrMode> intr_mode)
      : VirtioNetPort(std::move(name), "net_virtio", arena, queues.pairs, queue_size),
        t_(std::move(t)),
        speed_(speed),
        ctrl_index_(queues.ctrl_index),
        dev_(dev),
        intr_mode_(intr_mode) {
    features_ = features;
    mac_ = mac;
    rx_intr_.resize(queues.pairs);  // never resized again: lcores of different queues use it at once
  }
  ~VirtioPciPort() override {
    if (started()) stop();
    release_mbufs();
    (void)t_->reset(reset_timeout);
  }

  // Down too once the device broke a ring: the port no longer passes traffic that way.
  LinkStatus link() const override {
    if (link_intr_) {  // the event is consumed: ISR read (INTx lowered and unmasked), fd drained
      (void)t_->read_isr();
      irq_->ack(0);
      link_intr_->drain();
    }
    if (!started() || !rings_healthy()) return {false, speed_, true};
    if (!has(features_, feature::status)) return {true, speed_, true};
    auto s = t_->read_device_config16(6);  // struct virtio_net_config.status (§5.1.4)
    return {s && (*s & 1) != 0, speed_, true};
  }

 protected:
  Result<void> start_device() override;
  void stop_device() override {
    if (auto ok = t_->reset(reset_timeout); !ok) log(LogLevel::warning, "{}", ok.error().message);
  }
  std::uint64_t dma_addr(const void* p) const override { return arena_.iova(p); }
  Result<int> do_link_event_fd() override;
  Result<int> do_rx_intr_fd(std::uint16_t q) override {
    auto f = rx_intr(q);
    if (!f) return std::unexpected(f.error());
    return (*f)->fd();
  }
  Result<void> do_rx_intr_enable(std::uint16_t q) override { return set_rx_intr(q, true); }
  Result<void> do_rx_intr_disable(std::uint16_t q) override { return set_rx_intr(q, false); }

 private:
  Result<void> enable_irq();
  Result<IntrFd*> rx_intr(std::uint16_t q);
  Result<void> set_rx_intr(std::uint16_t q, bool on);
  // One vector per cause (MSI-X: configuration changes on 0, RX queue q on q + 1, as DPDK's
  // virtio PMD), or one for all (INTx, MSI), which ISR tells apart.
  bool shared_irq() const { return irq_->mode() != pci::IntrMode::msix; }
  unsigned rx_vector(std::uint16_t q) const { return shared_irq() ? 0 : q + 1u; }
  Result<void> queue_vector(std::uint16_t q) const;
  Result<void> config_vector() const;
  Result<void> mq_pairs_set(std::uint16_t pairs);
  template <bool Packed>
  Result<void> ctrl_command();

  std::unique_ptr<virtio::PciTransport> t_;
  std::uint32_t speed_;
  std::uint16_t ctrl_index_;  // virtio_pci_queues(): only used with more than one pair
  virtio::RingMemory ctrl_;   // control queue ring, then the command and its ack
  std::uint16_t ctrl_size_ = 0;
  volatile std::uint16_t* ctrl_notify_ = nullptr;
  const pci::Device& dev_;
  std::optional<pci::IntrMode> intr_mode_;
  std::unique_ptr<pci::Interrupts> irq_;  // made on the first link_event_fd() or rx_intr_*()
  // What the application waits on: an epoll fd of ours holding the vector's fd, edge-triggered
  // (ws/port/intr_fd.hpp). With one vector for every cause, each queue's fd and the link's fire
  // at each interrupt, and whoever reads the vector's fd (ack) takes no event from the others.
  std::unique_ptr<IntrFd> link_intr_;             // made by link_event_fd()
  std::vector<std::unique_ptr<IntrFd>> rx_intr_;  // per RX queue, made by its first rx_intr_*()
};

// The device's vectors, once: MSI-X, one for configuration changes and one per RX queue pair
// the device has (as many as its table holds); else the one INTx or MSI vector.
Result<void> VirtioPciPort::enable_irq() {
  if (irq_) return {};
  auto irq = pci::Interrupts::enable(dev_, intr_mode_, 1u + static_cast<unsigned>(rx_intr_.size()));
  if (!irq) return with_context(irq.error(), fmt::format("device '{}'", name()));
  irq_ = std::move(*irq);
  log(LogLevel::info, "{}: interrupts over {}, {} vector{}", name(), pci::intr_mode_name(irq_->mode()), irq_->count(),
      irq_->count() == 1 ? "" : "s");
  return config_vector();
}

// Link changes are configuration changes (VIRTIO_NET_F_STATUS): with MSI-X they go to vector 0,
// msix_config; with INTx the device raises ISR bit 1.
Result<int> VirtioPciPort::do_link_event_fd() {
  if (!has(features_, feature::status))
    return fail("device '{}': no VIRTIO_NET_F_STATUS: the device reports no link changes", name());
  if (auto ok = enable_irq(); !ok) return std::unexpected(ok.error());
  if (!link_intr_) {
    auto f = std::make_unique<IntrFd>();
    if (auto ok = f->open(fmt::format("device '{}': link interrupt", name())); !ok) return std::unexpected(ok.error());
    if (auto ok = f->watch(irq_->fd(0)); !ok) return std::unexpected(ok.error());
    link_intr_ = std::move(f);
  }
  return link_intr_->fd();
}

// RX queue q's fd. Its MSI-X vector is given to the device now when the port is started, else at
// the start (a reset clears it).
Result<IntrFd*> VirtioPciPort::rx_intr(std::uint16_t q) {
  if (rx_intr_[q]) return rx_intr_[q].get();
  if (auto ok = enable_irq(); !ok) return std::unexpected(ok.error());
  const unsigned v = rx_vector(q);
  if (v >= irq_->count())
    return fail(
        "device '{}': RX queue {} needs MSI-X vector {}, but the device has {} (vector 0 takes configuration changes; "
        "QEMU: vectors=N on virtio-net-pci)",
        name(), q, v, irq_->count());
  auto f = std::make_unique<IntrFd>();
  if (auto ok = f->open(fmt::format("device '{}': RX queue {} interrupt", name(), q)); !ok)
    return std::unexpected(ok.error());
  if (auto ok = f->watch(irq_->fd(v)); !ok) return std::unexpected(ok.error());
  rx_intr_[q] = std::move(f);
  if (started())
    if (auto ok = queue_vector(q); !ok) return std::unexpected(ok.error());
  return rx_intr_[q].get();
}

// The polling lcore, between bursts (DPDK's virtqueue_enable_intr/disable_intr): the ring's
// suppression (split: VRING_AVAIL_F_NO_INTERRUPT, used_event with EVENT_IDX; packed: the driver
// event suppression), then a look at the ring, so that a packet that came before the arming is
// not waited for. With a shared vector the interrupt is acknowledged first: ISR read (the device
// lowers INTx) and INTx unmasked, so that the next cause, this queue's or another's, interrupts;
// and the events other causes queued on this queue's fd are dropped.
Result<void> VirtioPciPort::set_rx_intr(std::uint16_t q, bool on) {
  if (!started()) return fail("device '{}': RX queue {}: the port is not started", name(), q);
  auto f = rx_intr(q);
  if (!f) return std::unexpected(f.error());
  if (on && shared_irq()) {
    (*f)->drain();  // what other causes fired before the arming is no news of this queue
    (void)t_->read_isr();
    irq_->ack(0);
  }
  arm_rx_interrupt(q, **f, on);
  return {};
}

Result<void> VirtioPciPort::queue_vector(std::uint16_t q) const {
  if (shared_irq()) return {};
  const auto v = static_cast<std::uint16_t>(rx_vector(q));
  if (const std::uint16_t got = t_->set_queue_vector(static_cast<std::uint16_t>(2 * q), v); got != v)
    return fail("device '{}': the device did not take MSI-X vector {} for RX queue {} (it reads back {:#x})", name(), v,
                q, got);
  return {};
}

Result<void> VirtioPciPort::config_vector() const {
  if (!irq_ || irq_->mode() != pci::IntrMode::msix) return {};
  if (const std::uint16_t got = t_->set_config_vector(0); got != 0)
    return fail("device '{}': the device did not take MSI-X vector 0 for configuration changes (it reads back {:#x})",
                name(), got);
  return {};
}

// §3.1.1: reset, ACKNOWLEDGE, DRIVER, features, FEATURES_OK, queues, DRIVER_OK.
Result<void> VirtioPciPort::start_device() {
  if (auto ok = t_->reset(reset_timeout); !ok) return ok;
  t_->add_status(virtio::status::acknowledge | virtio::status::driver);
  if (auto ok = t_->set_features(features_); !ok) return ok;
  const std::vector<virtio::QueueCommon*> queues = ring_queues();
  for (std::uint32_t r = 0; r < queues.size(); ++r) {
    const virtio::RingArea& a = rings_[r]->area;
    auto notify = t_->setup_queue(static_cast<std::uint16_t>(r), static_cast<std::uint16_t>(queue_size_),
                                  dma_addr(a.desc), dma_addr(a.driver), dma_addr(a.device));
    if (!notify) return std::unexpected(notify.error());
    queues[r]->notify.doorbell = *notify;
    queues[r]->ring = r;
  }
  const auto pairs = static_cast<std::uint16_t>(rxq_.size());
  const bool mq = has(features_, feature::mq) && has(features_, feature::ctrl_vq);
  if (mq && pairs > 1) {  // more than one pair: the probe found the control queue
    const std::uint16_t index = ctrl_index_;
    const std::uint16_t size = std::min<std::uint16_t>(t_->max_queue_size(index), 64);
    if (size == 0) return fail("device '{}': the device has no control queue {}", name(), index);
    if (ctrl_.base == nullptr) {
      ctrl_.bytes = virtio::ring_area_bytes(64) + 64;
      auto mem = arena_.allocate(ctrl_.bytes, 4096, fmt::format("{} control queue", name()));
      if (!mem) return with_context(mem.error(), fmt::format("device '{}'", name()));
      ctrl_.base = static_cast<std::byte*>(*mem);
    }
    ctrl_size_ = packed() ? size : std::bit_floor(size);
    std::memset(ctrl_.base, 0, ctrl_.bytes);
    ctrl_.area = virtio::carve_ring_area(ctrl_.base, ctrl_size_);
    auto notify = t_->setup_queue(index, ctrl_size_, dma_addr(ctrl_.area.desc), dma_addr(ctrl_.area.driver),
                                  dma_addr(ctrl_.area.device));
    if (!notify) return std::unexpected(notify.error());
    ctrl_notify_ = *notify;
  }
  if (auto ok = config_vector(); !ok) return ok;  // the reset cleared the vectors
  for (std::uint16_t q = 0; q < rxq_.size(); ++q)
    if (rx_intr_[q])
      if (auto ok = queue_vector(q); !ok) return ok;
  t_->add_status(virtio::status::driver_ok);
  if ((t_->status() & virtio::status::needs_reset) != 0)
    return fail("device '{}': the device wants a reset right after DRIVER_OK (status {:#x})", name(), t_->status());
  if (mq && pairs > 1) return mq_pairs_set(pairs);
  return {};
}

Result<void> VirtioPciPort::mq_pairs_set(std::uint16_t pairs) {
  // The command: class, cmd, then the number of pairs; the device writes one ack byte after it.
  std::byte* cmd = ctrl_.base + virtio::ring_area_bytes(64);
  cmd[0] = std::byte{ctrl_mq_class};
  cmd[1] = std::byte{ctrl_mq_pairs_set};
  std::memcpy(cmd + 2, &pairs, 2);
  cmd[8] = std::byte{0xff};
  auto ok = packed() ? ctrl_command<true>() : ctrl_command<false>();
  if (!ok) return ok;
  if (std::to_integer<std::uint8_t>(cmd[8]) != ctrl_ok)
    return fail("device '{}': the device refused VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET {} (ack {})", name(), pairs,
                std::to_integer<int>(cmd[8]));
  log(LogLevel::info, "{}: {} queue pairs enabled", name(), pairs);
  return {};
}

// Posts the command chain on the control queue, notifies, and waits up to a second for the
// device to return it (control path: the device answers from its own thread).
template <bool Packed>
Result<void> VirtioPciPort::ctrl_command() {
  virtio::DriverEngine<Packed, false, int> engine;
  virtio::QueueHealth health;
  engine.init(ctrl_.area, &health, false);
  std::byte* cmd = ctrl_.base + virtio::ring_area_bytes(64);
  const virtio::Buffer chain[] = {{dma_addr(cmd), 4, false}, {dma_addr(cmd + 8), 1, true}};
  if (!engine.post(chain, 2, 1)) return fail("device '{}': the control queue is full", name());
  engine.publish();
  *ctrl_notify_ = ctrl_index_;
  int cookie = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (engine.reclaim(&cookie, nullptr, 1) == 0) {
    if (health.broken())
      return fail("device '{}': the device returned garbage on the control queue ({})", name(),
                  virtio::queue_error_name(health.first_error()));
    if (std::chrono::steady_clock::now() > end)
      return fail("device '{}': no answer on the control queue within 1 s", name());
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return {};
}

class VirtioPciDriver final : public Driver {
 public:
  std::string_view name() const override { return "net_virtio"; }
  std::span<const ParamSpec> params() const override { return virtio_pci_params; }
  std::span<const pci::Id> pci_ids() const override { return virtio_pci_ids; }
  Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv& env) override;
};

Result<Options> parse_options(const DevArgs& args) {
  auto shared = virtio::parse_driver_keys(args, true);
  if (!shared) return std::unexpected(shared.error());
  auto size = args.get_uint("queue_size", 0, 0, 32768);
  if (!size) return std::unexpected(size.error());
  Options o;
  static_cast<virtio::DriverKeys&>(o) = *shared;
  o.queue_size = static_cast<std::uint32_t>(*size);
  return o;
}

// Probe: the structures, a reset, the features (negotiated now: the queue variants depend on
// them), the MAC and the number of queue pairs from the device configuration.
Result<std::unique_ptr<Port>> VirtioPciDriver::create(const DevArgs& args, const PortEnv& env) {
  if (env.pci == nullptr)
    return fail(
        "device '{}': net_virtio drives PCI devices; give it with -a PCI_ADDRESS (virtio_user is the "
        "vhost-user one)",
        args.name());
  if (env.arena == nullptr) return fail("device '{}': needs the application's DMA arena", args.name());
  auto o = parse_options(args);
  if (!o) return std::unexpected(o.error());
  const pci::Device& dev = *env.pci;
  auto t = virtio::PciTransport::open(dev);
  if (!t) return std::unexpected(t.error());
  if (auto ok = dev.enable(); !ok) return std::unexpected(ok.error());
  if (auto ok = (*t)->reset(reset_timeout); !ok) return std::unexpected(ok.error());
  (*t)->add_status(virtio::status::acknowledge | virtio::status::driver);
  const std::uint64_t offered = (*t)->device_features();
  if (!has(offered, feature::version_1))
    return fail("PCI device {}: offers features {:#x} without VERSION_1: a legacy device, which is not supported",
                dev.describe(), offered);
  std::uint64_t features = wanted_features(*o) & offered;
  if (!has(features, feature::ctrl_vq)) features &= ~bit(feature::mq);
  if (auto ok = (*t)->set_features(features); !ok) return std::unexpected(ok.error());
  MacAddress mac{{0x02, 0x56, 0x49, 0x52, 0x54, static_cast<std::uint8_t>(dev.address().device)}};
  if (has(features, feature::mac)) {
    if (auto ok = (*t)->read_device_config(0, mac.bytes.data(), 6); !ok) return std::unexpected(ok.error());
  }
  std::uint16_t max_pairs = 1;
  if (has(features, feature::mq)) {
    auto n = (*t)->read_device_config16(8);  // max_virtqueue_pairs
    if (!n) return std::unexpected(n.error());
    if (*n == 0 || *n > 0x8000)
      return fail("PCI device {}: max_virtqueue_pairs {} is outside 1..32768 (§5.1.4)", dev.describe(), *n);
    max_pairs = *n;
  }
  const std::uint16_t max_size = (*t)->max_queue_size(0);
  std::uint32_t size = o->queue_size == 0 ? max_size : o->queue_size;
  if (max_size == 0) return fail("PCI device {}: queue 0 does not exist", dev.describe());
  if (size > max_size)
    return fail("device '{}': key 'queue_size' value {}: the device takes {} descriptors at most", args.name(), size,
                max_size);
  if (!has(features, feature::ring_packed) && !std::has_single_bit(size))
    return fail("device '{}': key 'queue_size' value {}: split rings need a power of two", args.name(), size);
  // More pairs than lcores are of no use to testpmd, but the device decides what it has.
  const bool mq = has(features, feature::mq);
  const std::uint16_t num_queues = (*t)->num_queues();
  const VirtioPciQueues queues = virtio_pci_queues(mq, max_pairs, num_queues, port_max_queues);
  if (mq && !queues.ctrl)
    log(LogLevel::warning,
        "{}: max_virtqueue_pairs {} puts the control queue at index {}, but the device has {} queues (num_queues): "
        "using one queue pair",
        dev.describe(), max_pairs, 2 * std::uint32_t{max_pairs}, num_queues);
  log(LogLevel::info,
      "{}: virtio-net, features offered {:#x}, negotiated {:#x}, {} queue pairs ({} offered) of {} descriptors",
      dev.describe(), offered, features, queues.pairs, max_pairs, size);
  return std::make_unique<VirtioPciPort>(args.name(), std::move(*t), *env.arena, queues, size, features, mac,
                                         o->speed_mbps, dev, env.intr_mode);
}

}  // namespace

VirtioPciQueues virtio_pci_queues(bool mq, std::uint16_t max_pairs, std::uint16_t num_queues, std::uint16_t most) {
  if (!mq || max_pairs == 0) return {};
  const std::uint32_t ctrl = 2 * std::uint32_t{max_pairs};  // 0x10000 for 0x8000 pairs: not 16 bits
  if (ctrl >= num_queues) return {};
  // ctrl < num_queues <= 0xffff, and each pair's queues come before it.
  return {std::min(max_pairs, most), true, static_cast<std::uint16_t>(ctrl)};
}

std::unique_ptr<Driver> make_virtio_pci_driver() { return std::make_unique<VirtioPciDriver>(); }

}  // namespace ws
