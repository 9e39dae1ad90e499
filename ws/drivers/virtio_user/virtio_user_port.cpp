// SPDX-License-Identifier: BSD-3-Clause
// virtio_user port: a virtio-net driver port (ws/virtio/net/port.hpp) whose transport is the
// vhost-user frontend (ws/virtio/vhost_user/frontend.hpp), with its device keys and, in server mode,
// the thread that serves a backend that went away and came back; or, with path= the kernel's
// vhost-net, the vhost-net transport (ws/virtio/transport/vhost_net.hpp) and a tap.
#include "ws/drivers/virtio_user/virtio_user_port.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <thread>

#include "ws/core/log.hpp"
#include "ws/port/intr_fd.hpp"
#include "ws/virtio/features.hpp"
#include "ws/virtio/net/keys.hpp"
#include "ws/virtio/net/port.hpp"
#include "ws/virtio/transport/vhost_net.hpp"
#include "ws/virtio/vhost_user/frontend.hpp"

namespace ws {
namespace {

using virtio::bit;
using virtio::has;
namespace feature = virtio::feature;

constexpr std::array virtio_user_params = {
    ParamSpec{"path", "path", "",
              "vhost-user socket path, or the kernel's vhost-net character device (/dev/vhost-net) (required)"},
    ParamSpec{"queues", "uint", "1", "queue pairs, 1..8"},
    ParamSpec{"queue_size", "uint", "256", "descriptors per ring (split: a power of two), 32..4096"},
    virtio::keys::packed_vq_off,
    virtio::keys::in_order,
    virtio::keys::mrg_rxbuf,
    ParamSpec{"server", "bool", "0", "listen on path and wait (30 s) for the backend to connect"},
    virtio::keys::event_idx,
    virtio::keys::csum,
    virtio::keys::tso,
    ParamSpec{"keep_num_buffers", "bool", "0",
              "TX leaves num_buffers in the header as RX left it, as DPDK's driver does, instead of zeroing it "
              "(virtio 1.2 §5.1.6.2.1); spares DPDK's vhost a store per packet with split rings and mrg_rxbuf=1"},
    // DPDK 22.11 net_virtio_user keys, so its device strings carry over unchanged.
    ParamSpec{"mac", "mac", "02:56:49:52:54:00", "the port's MAC address, xx:xx:xx:xx:xx:xx"},
    ParamSpec{"cq", "bool", "0",
              "accepted for DPDK compatibility: DPDK emulates a control queue in the frontend only to enable queue "
              "pairs; we enable every pair directly (SET_VRING_ENABLE), so queues>1 works with cq=0 too"},
    virtio::keys::speed,
    virtio::keys::vectorized,
    ParamSpec{"iface", "string", "tap%d",
              "with path= the kernel's vhost-net (/dev/vhost-net): the tap's name, %d filled in by the kernel"},
};

constexpr std::array<std::string_view, 1> virtio_user_aliases = {"virtio_user"};  // DPDK's RTE_PMD_REGISTER_ALIAS

struct Options : virtio::DriverKeys {
  std::string path;
  std::string iface;  // vhost-net: the tap's name
  std::uint16_t queues = 1;
  std::uint32_t queue_size = 256;
  bool server = false;
  bool keep_num_buffers = false;
  MacAddress mac{{0x02, 0x56, 0x49, 0x52, 0x54, 0x00}};
};

// The features we take when the backend offers them.
std::uint64_t wanted_features(const Options& o) {
  return virtio::driver_features(o) | (o.queues > 1 ? bit(feature::mq) : 0);
}

class VirtioUserPort final : public virtio::VirtioNetPort<virtio::VhostUserHotPath> {
 public:
  VirtioUserPort(std::string name, Options o, Arena& arena)
      : VirtioNetPort(std::move(name), "net_virtio_user", arena, o.queues, o.queue_size),
        o_(std::move(o)),
        frontend_({this->name(), o_.path, o_.server, o_.queues, o_.queue_size, wanted_features(o_)}) {
    mac_ = o_.mac;
    keep_num_buffers_ = o_.keep_num_buffers;
    intr_.resize(o_.queues);  // never resized again: lcores of different queues use it at once
  }
  ~VirtioUserPort() override { stop_monitor(); }

  Result<void> connect() {
    if (auto ok = frontend_.connect(); !ok) return ok;
    features_ = frontend_.features();
    return {};
  }
  // Down once the backend has gone, as DPDK's virtio_user: server mode knows it from the
  // monitor, client mode asks the socket (nothing else reads it while the port runs). Down too
  // once the backend broke a ring: the port no longer passes traffic that way.
  LinkStatus link() const override {
    const bool up = started() && rings_healthy() &&
                    (frontend_.server() ? backend_up_.load(std::memory_order_acquire) : !frontend_.backend_closed());
    return {up, o_.speed_mbps, true};
  }

 protected:
  // RX interrupts: RX queue q's interrupt is the call eventfd of ring 2q, which the backend
  // writes when it used a buffer while the ring asks for interrupts (VRING_AVAIL_F_NO_INTERRUPT
  // clear, or used_event with EVENT_IDX; packed: the driver event suppression). The application
  // gets an IntrFd holding it: the backend shares the eventfd's open file description (see
  // intr_fd.hpp), and the eventfds are new at each start while the IntrFd stays.
  Result<int> do_rx_intr_fd(std::uint16_t q) override {
    auto f = intr(q);
    if (!f) return std::unexpected(f.error());
    return (*f)->fd();
  }
  Result<void> do_rx_intr_enable(std::uint16_t q) override { return set_intr(q, true); }
  Result<void> do_rx_intr_disable(std::uint16_t q) override { return set_intr(q, false); }

  Result<void> start_device() override {
    if (auto ok = setup_device(false); !ok) return ok;
    for (std::uint16_t q = 0; q < intr_.size(); ++q)
      if (intr_[q] != nullptr)
        if (auto ok = intr_[q]->watch(frontend_.call_fd(2u * q)); !ok) return ok;
    if (frontend_.server()) {  // server=1: serve a backend that goes away and comes back
      backend_up_.store(true, std::memory_order_release);
      monitor_stop_.store(false, std::memory_order_relaxed);
      monitor_ = std::thread([this] { monitor(); });
    }
    return {};
  }
  // The monitor stops first: while the stop waits for TX completions it must not reset the
  // rings under it, and from then on the socket is ours alone (stop_device()).
  void do_stop() override {
    stop_monitor();
    VirtioNetPort::do_stop();
  }
  void stop_device() override {
    for (auto& f : intr_)
      if (f != nullptr) (void)f->watch(-1);  // before the call fds close
    frontend_.stop_device(static_cast<std::uint32_t>(2 * rxq_.size()));
  }
  std::uint64_t dma_addr(const void* p) const override { return reinterpret_cast<std::uint64_t>(p); }

 private:
  Result<void> setup_device(bool resume) {
    const std::vector<virtio::QueueCommon*> queues = ring_queues();
    std::vector<virtio::RingArea> areas;
    for (std::size_t r = 0; r < queues.size(); ++r) areas.push_back(rings_[r]->area);
    return frontend_.setup_device(arena_, queues, areas, resume);
  }
  void monitor();
  Result<IntrFd*> intr(std::uint16_t q) {
    if (intr_[q] == nullptr) {
      auto f = std::make_unique<IntrFd>();
      if (auto ok = f->open(fmt::format("device '{}': RX queue {} interrupt", name(), q)); !ok)
        return std::unexpected(ok.error());
      if (started())
        if (auto ok = f->watch(frontend_.call_fd(2u * q)); !ok) return std::unexpected(ok.error());
      intr_[q] = std::move(f);
    }
    return intr_[q].get();
  }
  // The polling lcore, between bursts. The ring's gate keeps out a reset (server mode) meanwhile;
  // a ring being reset is refilled and polled again, so there is nothing to arm.
  Result<void> set_intr(std::uint16_t q, bool on) {
    if (!started()) return fail("device '{}': RX queue {}: the port is not started", name(), q);
    auto f = intr(q);
    if (!f) return std::unexpected(f.error());
    arm_rx_interrupt(q, **f, on);
    return {};
  }
  void stop_monitor() {
    monitor_stop_.store(true, std::memory_order_relaxed);
    if (monitor_.joinable()) monitor_.join();
  }

  Options o_;
  virtio::VhostFrontend frontend_;
  // server=1: reconnects a backend while started; between start and stop it alone uses the socket.
  std::thread monitor_;
  std::atomic<bool> backend_up_{true};  // server=1: false from the backend's leaving to its return
  std::atomic<bool> monitor_stop_{false};
  std::vector<std::unique_ptr<IntrFd>> intr_;  // per RX queue, made by the first rx_intr_* call
};

// server=1, control thread: notices the backend going away and serves the next one that
// connects. The lcores keep polling the rings meanwhile (they are in our memory); nothing moves
// until a backend is back. Each split ring resumes at its used index -- what the old backend
// completed; chains it had taken without completing are offered again (a TX packet may go out
// twice, an RX buffer is refilled), none is lost. Packed rings are reset (reset_rings()) once a
// new backend has connected.
void VirtioUserPort::monitor() {
  while (!monitor_stop_.load(std::memory_order_relaxed)) {
    if (!frontend_.backend_gone(100)) continue;
    backend_up_.store(false, std::memory_order_release);
    log(LogLevel::warning, "{}: the vhost backend went away; waiting for it on '{}'", name(), o_.path);
    bool rings_ready = !packed();  // split rings resume at their used index
    for (;;) {
      if (!frontend_.accept_backend(monitor_stop_)) return;  // stopping
      if (!rings_ready) {
        const std::uint64_t dropped = reset_rings();
        log(LogLevel::info,
            "{}: packed rings reset for the new backend; {} TX packets the old one did not complete dropped", name(),
            dropped);
        rings_ready = true;
      }
      auto ok = frontend_.negotiate(true);
      if (ok) ok = setup_device(true);
      if (ok) break;
      log(LogLevel::warning, "{}: the reconnected backend: {}", name(), ok.error().message);
    }
    backend_up_.store(true, std::memory_order_release);
    log(LogLevel::info, "{}: the vhost backend is back", name());
  }
}

// virtio_user over the kernel's vhost-net: the same driver port, the third transport. The
// kernel thread of each queue pair's vhost-net fd moves packets between our rings and a tap
// (DPDK's "exception path"); it reads our memory by virtual address, as a vhost-user backend
// does, and the lcores kick it through eventfds of ours (VhostNetHotPath).
class VhostNetPort final : public virtio::VirtioNetPort<virtio::VhostNetHotPath> {
 public:
  VhostNetPort(std::string name, const Options& o, Arena& arena, std::unique_ptr<virtio::VhostNetTransport> t)
      : VirtioNetPort(std::move(name), "net_virtio_user", arena, o.queues, o.queue_size),
        speed_(o.speed_mbps),
        kernel_(std::move(t)) {
    mac_ = o.mac;
    keep_num_buffers_ = o.keep_num_buffers;
    features_ = kernel_->features();
    log(LogLevel::info, "{}: vhost-net on tap {}", this->name(), kernel_->iface());
  }
  LinkStatus link() const override { return {started() && rings_healthy(), speed_, true}; }

 protected:
  Result<void> start_device() override {
    const std::vector<virtio::QueueCommon*> queues = ring_queues();
    std::vector<virtio::RingArea> areas;
    for (std::size_t r = 0; r < queues.size(); ++r) areas.push_back(rings_[r]->area);
    return kernel_->setup_device(arena_, queues, areas);
  }
  void stop_device() override { kernel_->stop_device(); }
  std::uint64_t dma_addr(const void* p) const override { return reinterpret_cast<std::uint64_t>(p); }

 private:
  std::uint32_t speed_;
  std::unique_ptr<virtio::VhostNetTransport> kernel_;
};

// The keys both transports take, checked; `o.path` is set and names the backend.
Result<void> parse_common(const DevArgs& args, Options& o) {
  auto queues = args.get_uint("queues", 1, 1, 8);
  if (!queues) return std::unexpected(queues.error());
  auto size = args.get_uint("queue_size", 256, 32, 4096);
  if (!size) return std::unexpected(size.error());
  auto shared = virtio::parse_driver_keys(args, false);
  if (!shared) return std::unexpected(shared.error());
  static_cast<virtio::DriverKeys&>(o) = *shared;
  auto server = args.get_bool("server", false);
  auto cq = args.get_bool("cq", false);  // see the param help: nothing to do
  auto keep_num_buffers = args.get_bool("keep_num_buffers", false);
  for (const auto* b : {&server, &cq, &keep_num_buffers})
    if (!*b) return std::unexpected(b->error());
  if (auto text = args.get("mac")) {
    auto mac = MacAddress::parse(*text);
    if (!mac)
      return fail("device '{}': key 'mac' value '{}': expected six hex bytes xx:xx:xx:xx:xx:xx ({})", args.name(),
                  *text, mac.error().message);
    o.mac = *mac;
  }
  if (!o.packed && !std::has_single_bit(*size))
    return fail("device '{}': key 'queue_size' value {}: split rings need a power of two", args.name(), *size);
  o.queues = static_cast<std::uint16_t>(*queues);
  o.queue_size = static_cast<std::uint32_t>(*size);
  o.server = *server;
  o.keep_num_buffers = *keep_num_buffers;
  return {};
}

// path= the kernel's vhost-net: a tap named by iface=, split rings only (vhost-net has no
// packed ones: packed_vq=1 falls back to split, as with a vhost-user backend that lacks them),
// no server mode (the kernel is always there).
Result<std::unique_ptr<Port>> create_vhost_net(const DevArgs& args, Options o, Arena& arena) {
  if (o.server)
    return fail(
        "device '{}': key 'server' value 1: path '{}' is the kernel's vhost-net, which does not connect; "
        "expected server=0",
        args.name(), o.path);
  if (!std::has_single_bit(o.queue_size))
    return fail("device '{}': key 'queue_size' value {}: vhost-net runs split rings, which need a power of two",
                args.name(), o.queue_size);
  o.iface = args.get_string("iface", "tap%d");
  if (o.iface.empty() || o.iface.size() >= 16)
    return fail("device '{}': key 'iface' value '{}': expected an interface name of 1 to 15 characters", args.name(),
                o.iface);
  auto wanted = wanted_features(o);
  auto t = virtio::VhostNetTransport::open({args.name(), o.path, o.iface, o.queues, o.queue_size, wanted});
  if (!t) return std::unexpected(t.error());
  return std::make_unique<VhostNetPort>(args.name(), o, arena, std::move(*t));
}

class VirtioUserDriver final : public Driver {
 public:
  std::string_view name() const override { return "net_virtio_user"; }
  std::span<const std::string_view> aliases() const override { return virtio_user_aliases; }
  std::span<const ParamSpec> params() const override { return virtio_user_params; }
  Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv& env) override {
    Options o;
    o.path = args.get_string("path", "");
    if (o.path.empty())
      return fail("device '{}': key 'path' is required (a vhost-user socket, e.g. path=/tmp/vhost0, or /dev/vhost-net)",
                  args.name());
    if (auto ok = parse_common(args, o); !ok) return std::unexpected(ok.error());
    const virtio::VhostPathKind kind = virtio::classify_vhost_path(o.path);
    if (kind.other_chr)
      return fail(
          "device '{}': key 'path' value '{}' is a character device that is not vhost-net (vhost-vdpa?); expected a "
          "vhost-user unix socket or the kernel's vhost-net (/dev/vhost-net, misc 10:238)",
          args.name(), o.path);
    if (auto iface = args.get("iface"); iface && !kind.vhost_net)
      return fail(
          "device '{}': key 'iface' value '{}' names a vhost-net tap, and path '{}' is {}; expected path= the "
          "kernel's vhost-net character device (/dev/vhost-net)",
          args.name(), *iface, o.path, kind.exists ? "not a character device" : "missing");
    if (env.arena == nullptr) return fail("device '{}': needs the application's shared arena", args.name());
    if (kind.vhost_net) return create_vhost_net(args, std::move(o), *env.arena);
    auto port = std::make_unique<VirtioUserPort>(args.name(), std::move(o), *env.arena);
    if (auto ok = port->connect(); !ok) return std::unexpected(ok.error());
    return port;
  }
};

}  // namespace

std::unique_ptr<Driver> make_virtio_user_driver() { return std::make_unique<VirtioUserDriver>(); }

}  // namespace ws
