// SPDX-License-Identifier: BSD-3-Clause
// net_vhost port: socket service on a control thread, vhost-user state (ws/virtio VhostBackend),
// and ring start/stop handed to the polling lcores through RingSlot and the port's burst table.
#include "ws/drivers/vhost/vhost_port.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "ws/core/log.hpp"
#include "ws/drivers/vhost/vhost_ring.hpp"
#include "ws/port/intr_fd.hpp"
#include "ws/virtio/vhost_user/backend.hpp"

namespace ws {
namespace {

using namespace vhost_pmd;
namespace vu = virtio::vhost_user;

constexpr std::array vhost_params = {
    ParamSpec{"iface", "path", "", "unix socket path (required)"},
    ParamSpec{"queues", "uint", "1", "queue pairs, 1..8"},
    ParamSpec{"client", "bool", "0", "connect to the frontend's socket (and reconnect) instead of listening"},
    ParamSpec{"tso", "bool", "0", "offer HOST_TSO4/6 (take TCP GSO packets from the frontend), as DPDK's net_vhost"},
    ParamSpec{"max-mem-mb", "uint", "65536",
              "most memory a frontend may share with this port, all regions together (MiB); more is refused"},
    // The other DPDK 22.11 net_vhost keys, so its device strings carry over unchanged.
    ParamSpec{"linear-buffer", "bool", "0",
              "1: a packet from the frontend that does not fit one mbuf is dropped and counted (xstat "
              "rx_qN_not_linear) instead of chained across mbufs"},
    ParamSpec{"ext-buffer", "bool", "0",
              "0 only: our mbufs have no external buffers (DPDK's rte_pktmbuf_attach_extbuf); a large packet is "
              "chained across mbufs, or dropped with linear-buffer=1"},
    ParamSpec{"legacy-ol-flags", "bool", "0",
              "1: the frontend's checksum/GSO requests become TX offload requests on the received mbuf (DPDK's "
              "legacy mode); 0: checksums completed here, RX flags set (DPDK's compliant mode)"},
    ParamSpec{"iommu-support", "bool", "0", "0 only: no vhost-user IOTLB (VIRTIO_F_IOMMU_PLATFORM) here"},
    ParamSpec{"postcopy-support", "bool", "0", "0 only: no postcopy live migration (userfaultfd) here"},
};

constexpr std::array<std::string_view, 1> vhost_aliases = {"eth_vhost"};  // DPDK's RTE_PMD_REGISTER_ALIAS

constexpr std::uint64_t offered(bool tso) noexcept {
  using virtio::bit;
  namespace feature = virtio::feature;
  return tso ? virtio::backend_offered : virtio::backend_offered & ~(bit(feature::host_tso4) | bit(feature::host_tso6));
}

// What the device string asked for beyond the socket.
struct VhostOptions {
  std::uint16_t queues = 1;
  bool client = false, tso = false, linear = false, legacy_ol = false;
  std::uint64_t max_mem_mb = 65536;
};

class VhostPort final : public Port, public virtio::RingListener {
 public:
  VhostPort(std::string name, std::string iface, VhostOptions o)
      : Port(name, "net_vhost"),
        iface_(std::move(iface)),
        client_(o.client),
        linear_(o.linear),
        legacy_ol_(o.legacy_ol),
        queues_(o.queues),
        slots_(std::make_unique<RingSlot[]>(2u * o.queues)),
        backend_(virtio::BackendOptions{.name = name,
                                        .queue_pairs = o.queues,
                                        .features = offered(o.tso),
                                        .max_mem_bytes = o.max_mem_mb << 20,
                                        .reaper = &reaper_},
                 this) {
    mac_ = MacAddress{{0x56, 0x48, 0x4f, 0x53, 0x54, 0x00}};  // DPDK net_vhost's "VHOST" address
  }
  ~VhostPort() override {
    stop_.store(true, std::memory_order_release);
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
    // A connection's I/O waits at most a poll period or a message deadline; shutting the socket
    // down ends either at once.
    if (const int conn = conn_fd_.load(std::memory_order_acquire); conn >= 0) ::shutdown(conn, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (!client_) ::unlink(iface_.c_str());
  }

  Result<void> open() {
    if (auto ok = reaper_.start(name()); !ok) return ok;
    auto notifier = virtio::Notifier::create(name(), 2u * queues_);
    if (!notifier) return std::unexpected(notifier.error());
    notifier_ = std::move(*notifier);
    for (std::uint32_t r = 0; r < 2u * queues_; ++r) {
      slots_[r].notifier = notifier_.get();
      slots_[r].ring = r;
    }
    for (std::uint16_t q = 0; q < queues_; ++q)
      if (auto ok = intr_[q].open(fmt::format("device '{}': RX queue {} interrupt", name(), q)); !ok) return ok;
    if (!client_) {
      auto fd = vu::listen_unix(iface_);
      if (!fd) return with_context(fd.error(), fmt::format("device '{}': key 'iface'", name()));
      listen_fd_ = *fd;
    }
    thread_ = std::thread([this] { serve(); });
    return {};
  }

  // Checksum requests are always honoured (in the header when the frontend took GUEST_CSUM, else
  // in software). TSO is not advertised: whether the frontend takes GUEST_TSO is known only when
  // it connects, so an application asking for TSO gets the port's software segmentation.
  PortInfo info() const override {
    PortInfo i{"net_vhost", queues_, queues_, 0, 65535};
    i.tx_offload_capa = tx_offload::checksums;
    i.rx_offload_capa = rx_offload::scatter;  // descriptor chains longer than an mbuf arrive chained
    return i;
  }
  Result<void> do_configure(const PortConfig& c) override {
    if (c.rx_queues != c.tx_queues || c.rx_queues > queues_)
      return fail("device '{}': {} RX and {} TX queues requested, expected equal counts up to queues={}", name(),
                  c.rx_queues, c.tx_queues, queues_);
    rxq_.clear();
    txq_.clear();
    tx_offloads_.store(c.tx_offloads, std::memory_order_relaxed);  // read when a ring starts
    for (std::uint16_t q = 0; q < c.rx_queues; ++q) {
      rxq_.push_back(std::make_unique<RxQ>());
      rxq_.back()->slot = &slots_[2u * q + 1];  // frontend TX ring
      txq_.push_back(std::make_unique<TxQ>());
      txq_.back()->slot = &slots_[2u * q];  // frontend RX ring
    }
    return {};
  }
  Result<void> setup_rx_queue(std::uint16_t q, const RxQueueConfig& c) override {
    if (q >= rxq_.size()) return fail("RX queue {} does not exist ({} configured)", q, rxq_.size());
    if (c.pool == nullptr) return fail("device '{}': RX queue {} needs a mempool", name(), q);
    rxq_[q]->stash = std::make_unique<MbufStash>(c.pool);
    return {};
  }
  Result<void> setup_tx_queue(std::uint16_t q, const TxQueueConfig&) override {
    if (q >= txq_.size()) return fail("TX queue {} does not exist ({} configured)", q, txq_.size());
    return {};
  }
  Result<void> do_start() override {
    for (std::uint16_t q = 0; q < rxq_.size(); ++q) {
      if (rxq_[q]->stash == nullptr) return fail("RX queue {} was not set up", q);
      // The variant each ring runs, or the stopped function; ring_started/ring_stopped
      // republish while the port runs (Port::start holds their republish_* meanwhile).
      publish_rx(q, {published_rx(*rxq_[q]->slot), rxq_[q].get()});
      publish_tx(q, {published_tx(*txq_[q]->slot), txq_[q].get()});
    }
    return {};
  }
  void release_mbufs() override {
    for (auto& q : rxq_)
      if (q->stash) q->stash->release();
  }
  PortStats read_stats() const override { return sum_queues(rxq_, txq_); }
  // DPDK 22.11's names first, in its order (generic, then each RX queue's, then each TX
  // queue's; no iotlb_* or inflight_*: neither IOTLB nor inflight tracking is done here), then
  // ours, which DPDK has no counter for.
  std::vector<XStat> xstats() const override {
    auto out = Port::xstats();
    const PortStats st = stats();
    auto dpdk_queue = [&](const char* dir, std::size_t q, const RingSlot& s, std::uint64_t packets,
                          std::uint64_t bytes) {
      const std::string p = fmt::format("{}_q{}_", dir, q);
      append_good_xstats(out, p, packets, bytes);
      s.counters.classes.append_xstats(out, p);
      out.push_back({p + "guest_notifications", s.counters.notify.read()});
    };
    for (std::size_t q = 0; q < rxq_.size(); ++q)
      dpdk_queue("rx", q, *rxq_[q]->slot, queue_stat(st.q_ipackets, q), queue_stat(st.q_ibytes, q));
    for (std::size_t q = 0; q < txq_.size(); ++q)
      dpdk_queue("tx", q, *txq_[q]->slot, queue_stat(st.q_opackets, q), queue_stat(st.q_obytes, q));
    out.push_back({"guest_memory_lost", memory_lost_.read()});
    for (std::uint32_t r = 0; r < 2u * queues_; ++r) {
      const RingSlot& s = slots_[r];
      // Ring 2q is the frontend's RX ring (our TX), 2q+1 its TX ring (our RX).
      const std::string p = fmt::format("{}_q{}_", r % 2 ? "rx" : "tx", r / 2);
      out.push_back({p + "broken", s.health.broken() ? 1u : 0u});
      out.push_back({p + "bad_packet", s.counters.bad_packet.read()});
      out.push_back({p + "too_small", s.counters.too_small.read()});
      if (linear_ && r % 2) out.push_back({p + "not_linear", s.counters.not_linear.read()});
      out.push_back({p + "notify_dropped", notifier_->dropped(r)});
      for (std::size_t e = 0; e < virtio::queue_error_count; ++e) {
        const auto err = static_cast<virtio::QueueError>(e);
        if (const auto n = s.health.count(err)) out.push_back({p + std::string(virtio::queue_error_name(err)), n});
      }
    }
    return out;
  }
  LinkStatus link() const override { return {started() && ready_.load(std::memory_order_acquire), 10000, true}; }

  // ---- RingListener: control thread, inside VhostBackend::handle ----
  // The ring's variant goes into the burst table while the slot is still closed, so a burst
  // that reads the table once the slot opens calls it.
  void ring_started(std::uint32_t r, bool fresh) override {
    RingSlot& s = slots_[r];
    const SlotStart where =
        start_slot(s, backend_, r, fresh, {linear_, legacy_ol_, tx_offloads_.load(std::memory_order_relaxed)});
    republish(r);
    s.start();  // release: the engine and variant before an lcore enters
    if (r % 2 == 1) rx_ring_started(r);
    // Once per ring start, in the connection's budget: a frontend can start rings as often as it
    // likes, and these lines must not crowd out a broken ring's.
    if (where.resynced())
      log_.log(LogLevel::notice,
               "{}: ring {} resumes at its used index {}, not at base {}: it ran on while its backend was away; "
               "chains the last backend took and did not return are taken again",
               name(), r, where.resumed, where.base);
  }
  std::uint16_t ring_stopped(std::uint32_t r) override {
    RingSlot& s = slots_[r];
    stop_slot(s);
    if (r % 2 == 1) (void)intr_[r / 2].watch(-1);  // before the backend closes the kick fd
    republish(r);
    if (s.health.broken() && !s.broken_logged) {
      s.broken_logged = true;
      ring_log_.log(LogLevel::warning, "{}: ring {} was broken by the frontend: {}", name(), r,
                    virtio::queue_error_detail(s.health.first_error(), s.health.first_detail()));
    }
    return last_avail_idx(s, backend_.packed());
  }
  void ring_call_changed(std::uint32_t r, int fd) override {
    if (auto ok = notifier_->set_fd(r, fd); !ok) {
      log_.log(LogLevel::warning, "{}", ok.error().message);
    } else if (fd >= 0 && backend_.ring(r).started) {
      // QEMU drops what its masked notifier got before it sends the guest's: an interrupt we
      // sent there since the kick would be lost, and with EVENT_IDX the used index would then be
      // past the driver's used_event for good. One spurious interrupt on the new fd instead.
      notifier_->signal(r);
    }
  }

 protected:
  // RX interrupts: RX queue q's interrupt is the kick fd of the frontend's TX ring 2q+1, which the
  // frontend writes when it makes buffers available while the ring asks for kicks
  // (VRING_USED_F_NO_NOTIFY clear, or avail_event with EVENT_IDX; packed: the device event
  // suppression). The kick fd is the frontend's (docs/vhost.md: epoll on it, never a read), and a
  // new one comes with each SET_VRING_KICK, so the application gets an IntrFd of ours holding
  // the current one (intr_fd.hpp): the fd stays valid across reconnections.
  Result<int> do_rx_intr_fd(std::uint16_t q) override { return intr_[q].fd(); }
  Result<void> do_rx_intr_enable(std::uint16_t q) override { return set_intr(q, true); }
  Result<void> do_rx_intr_disable(std::uint16_t q) override { return set_intr(q, false); }

 private:
  // The polling lcore, between bursts. A ring that is not running has nothing to arm:
  // rx_ring_started arms it when it starts while armed_ says the application waits.
  Result<void> set_intr(std::uint16_t q, bool on) {
    RingSlot& s = slots_[2u * q + 1];
    armed_[q].store(on, std::memory_order_seq_cst);  // before the gate's load: see rx_ring_started
    bool pending = false;
    if (s.gate.enter()) {
      if (on)
        pending = s.packed_ring ? s.packed.arm_kick() : s.split.arm_kick();
      else if (s.packed_ring)
        s.packed.disarm_kick();
      else
        s.split.disarm_kick();
      s.gate.leave();
    }
    if (pending) intr_[q].signal();  // came before the request: the application must not wait for it
    if (!on) intr_[q].drain();
    return {};
  }
  // Control thread, ring r (the frontend's TX ring, our RX queue r/2) just started: its kick fd
  // into the queue's IntrFd, and, if the application sleeps on it, the kick asked for again
  // (start_slot suppressed it) and the fd fired so that it polls the ring once.
  void rx_ring_started(std::uint32_t r) {
    const std::uint16_t q = static_cast<std::uint16_t>(r / 2);
    if (auto ok = intr_[q].watch(backend_.ring(r).kick_fd); !ok) log_.log(LogLevel::warning, "{}", ok.error().message);
    if (!armed_[q].load(std::memory_order_seq_cst)) return;
    RingSlot& s = slots_[r];
    if (s.gate.enter()) {
      (void)(s.packed_ring ? s.packed.arm_kick() : s.split.arm_kick());
      s.gate.leave();
    }
    intr_[q].signal();
  }
  // Ring r's function into the burst table of its queue: the frontend's TX ring 2q+1 is our RX
  // queue q, its RX ring 2q our TX queue q (nothing when the port is stopped or has no such queue).
  void republish(std::uint32_t r) {
    const auto q = static_cast<std::uint16_t>(r / 2);
    if (r % 2 == 1)
      republish_rx(q, published_rx(slots_[r]));
    else
      republish_tx(q, published_tx(slots_[r]));
  }
  void serve();
  void serve_connection(int conn);
  // Handles one message of the connection; false when the connection must be closed.
  bool handle_message(int conn, const virtio::vhost_user::Message& msg, virtio::vhost_user::FdSet& fds);
  int connect_client();

  std::string iface_;
  bool client_;
  bool linear_;     // linear-buffer=1
  bool legacy_ol_;  // legacy-ol-flags=1
  std::uint16_t queues_;
  std::unique_ptr<RingSlot[]> slots_;
  virtio::FdReaper reaper_;  // closes the frontend's fds; outlives backend_, which hands it fds
  virtio::VhostBackend backend_;
  std::unique_ptr<virtio::Notifier> notifier_;  // writes the frontend's call fds (set in open())
  // What a frontend can make us log, rate-limited: connections and refused messages, and broken
  // rings apart (a flood of the first must not hide the second).
  LogBudget log_{name() + " (connections)"};
  LogBudget ring_log_{name() + " (rings)"};
  int listen_fd_ = -1;
  std::atomic<int> conn_fd_{-1};  // the connection being served, for the destructor to shut down
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> tx_offloads_{0};  // PortConfig::tx_offloads, for ring_started
  std::atomic<bool> ready_{false};
  Counter memory_lost_;  // connections closed because the frontend shrank its memory
  std::vector<std::unique_ptr<RxQ>> rxq_;
  std::vector<std::unique_ptr<TxQ>> txq_;
  // RX interrupts, per RX queue: the fd the application waits on, and whether it asked for kicks.
  std::unique_ptr<IntrFd[]> intr_ = std::make_unique<IntrFd[]>(queues_);
  std::unique_ptr<std::atomic<bool>[]> armed_ = std::make_unique<std::atomic<bool>[]>(queues_);
};

int VhostPort::connect_client() {
  auto fd = vu::connect_unix(iface_);  // not there yet, or refused: serve() tries again
  return fd ? *fd : -1;
}

void VhostPort::serve() {
  while (!stop_.load(std::memory_order_acquire)) {
    log_.flush();
    ring_log_.flush();
    int conn = -1;
    if (client_) {
      conn = connect_client();
      if (conn < 0) {
        ::usleep(100 * 1000);  // reconnect every 100 ms
        continue;
      }
    } else {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
    }
    conn_fd_.store(conn, std::memory_order_release);
    if (stop_.load(std::memory_order_acquire)) ::shutdown(conn, SHUT_RDWR);  // the destructor ran meanwhile
    log_.log(LogLevel::info, "{}: frontend connected on {}", name(), iface_);
    serve_connection(conn);
    ready_.store(false, std::memory_order_release);
    backend_.reset();  // stops rings (ring_stopped), unmaps memory, closes fds
    for (std::uint32_t r = 0; r < 2u * queues_; ++r) slots_[r].enabled.store(false, std::memory_order_relaxed);
    // No ring runs now: the next frontend gets a notifier without this one's fds (or a thread
    // this one managed to stall).
    if (auto ok = notifier_->restart(); !ok) log(LogLevel::err, "{}", ok.error().message);
    conn_fd_.store(-1, std::memory_order_release);
    ::close(conn);
    log_.log(LogLevel::info, "{}: frontend disconnected; waiting for the next one", name());
  }
  log_.flush(true);
  ring_log_.flush(true);
}

// Serves one connection until it closes, misbehaves or the port stops. Poll-driven: a message
// is read as its bytes come (MessageReader), so a frontend that sends part of one and stops
// keeps us waiting for nothing. It has io_timeout_ms to finish; a new frontend that connects
// meanwhile is served at once (this connection gives way to it), for a frontend that restarts
// in the middle of a message is the one it was waiting for.
void VhostPort::serve_connection(int conn) {
  using Clock = std::chrono::steady_clock;
  vu::MessageReader reader(&reaper_);
  while (!stop_.load(std::memory_order_acquire)) {
    std::array<pollfd, 2> p{{{conn, POLLIN, 0}, {listen_fd_, POLLIN, 0}}};
    const nfds_t watched = reader.partial() && listen_fd_ >= 0 ? 2 : 1;
    int wait_ms = 100;
    if (reader.partial()) {
      const auto left = reader.started() + std::chrono::milliseconds(vu::io_timeout_ms) - Clock::now();
      wait_ms = std::clamp(static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count()), 0, 100);
    }
    const int r = ::poll(p.data(), watched, wait_ms);
    if (stop_.load(std::memory_order_acquire)) return;  // the destructor shut the sockets down
    log_.flush();
    ring_log_.flush();
    if (backend_.memory_lost()) {
      // The frontend shrank memory it shared: the faulting pages now read zeros (MappingGuard).
      // Its rings are garbage from here; the connection goes, and the next frontend starts clean.
      memory_lost_.add(1);
      log_.log(LogLevel::warning,
               "{}: the frontend shrank the memory it shared (SIGBUS caught); closing the connection", name());
      return;
    }
    if (r < 0 && errno != EINTR) return;
    if (r > 0 && (p[0].revents & POLLNVAL)) return;
    if (reader.partial()) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - reader.started());
      if (waited.count() >= vu::io_timeout_ms) {
        log_.log(LogLevel::warning, "{}: {}; closing", name(), reader.describe_partial(waited));
        return;
      }
      if (watched == 2 && (p[1].revents & POLLIN)) {
        log_.log(LogLevel::warning, "{}: {}, and a new frontend connected; closing this one for it", name(),
                 reader.describe_partial(waited));
        return;
      }
    }
    if (r <= 0 || !(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    auto msg = reader.read(conn);
    if (!msg) {
      if (msg.error().message.find("closed") == std::string::npos)
        log_.log(LogLevel::warning, "{}: {}; closing the connection", name(), msg.error().message);
      return;
    }
    if (!msg->has_value()) continue;  // the rest of the message is still to come
    if (!handle_message(conn, **msg, reader.fds())) return;
  }
}

bool VhostPort::handle_message(int conn, const vu::Message& msg, vu::FdSet& fds) {
  log(LogLevel::debug, "{}: vhost-user {} size {} payload {:#x}", name(), vu::request_name(msg.header.request),
      msg.header.size, msg.header.size >= 8 ? msg.payload.u64 : 0);
  // Our replies are a few bytes each: a socket buffer too full to take one means the frontend
  // stopped reading long ago, so the send does not wait for room.
  vu::Message reply;
  auto handled = backend_.handle(msg, fds, reply);
  if (!handled) {
    log_.log(LogLevel::warning, "{}; closing the connection", handled.error().message);  // names the device
    if (reply.header.size == 8) (void)vu::send_message(conn, reply, {}, 0);
    return false;
  }
  if (*handled) {
    if (auto sent = vu::send_message(conn, reply, {}, 0); !sent) {
      log_.log(LogLevel::warning, "{}: {}", name(), sent.error().message);
      return false;
    }
  }
  for (std::uint32_t ring = 0; ring < 2u * queues_; ++ring)
    slots_[ring].enabled.store(backend_.ring(ring).enabled, std::memory_order_relaxed);  // advisory, per burst
  const bool ready = backend_.device_ready();
  if (ready != ready_.load(std::memory_order_relaxed)) {
    ready_.store(ready, std::memory_order_release);
    log_.log(LogLevel::info, "{}: device {} ({} rings, features {:#x})", name(), ready ? "ready" : "not ready",
             backend_.packed() ? "packed" : "split", backend_.features());
  }
  return true;
}

class VhostDriver final : public Driver {
 public:
  std::string_view name() const override { return "net_vhost"; }
  std::span<const std::string_view> aliases() const override { return vhost_aliases; }
  std::span<const ParamSpec> params() const override { return vhost_params; }
  Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv&) override {
    const std::string iface = args.get_string("iface", "");
    if (iface.empty())
      return fail("device '{}': key 'iface' is required (the vhost-user socket path, e.g. iface=/tmp/vhost0)",
                  args.name());
    auto queues = args.get_uint("queues", 1, 1, 8);
    if (!queues) return std::unexpected(queues.error());
    auto max_mem = args.get_uint("max-mem-mb", 65536, 1, std::uint64_t{1} << 30);
    if (!max_mem) return std::unexpected(max_mem.error());
    auto client = args.get_bool("client", false);
    auto tso = args.get_bool("tso", false);
    auto linear = args.get_bool("linear-buffer", false);
    auto legacy_ol = args.get_bool("legacy-ol-flags", false);
    auto ext = args.get_bool("ext-buffer", false);
    auto iommu = args.get_bool("iommu-support", false);
    auto postcopy = args.get_bool("postcopy-support", false);
    for (const auto* b : {&client, &tso, &linear, &legacy_ol, &ext, &iommu, &postcopy})
      if (!*b) return std::unexpected(b->error());
    if (*ext)
      return fail(
          "device '{}': key 'ext-buffer' value 1 is not supported: our mbufs have no external buffers "
          "(DPDK's rte_pktmbuf_attach_extbuf); a large packet is chained across mbufs (the default) or "
          "dropped with linear-buffer=1; expected ext-buffer=0",
          args.name());
    if (*iommu)
      return fail(
          "device '{}': key 'iommu-support' value 1 is not supported: no vhost-user IOTLB messages "
          "(VIRTIO_F_IOMMU_PLATFORM) here; expected iommu-support=0",
          args.name());
    if (*postcopy)
      return fail(
          "device '{}': key 'postcopy-support' value 1 is not supported: no postcopy live migration "
          "(userfaultfd) here; expected postcopy-support=0",
          args.name());
    const VhostOptions o{static_cast<std::uint16_t>(*queues), *client, *tso, *linear, *legacy_ol, *max_mem};
    auto port = std::make_unique<VhostPort>(args.name(), iface, o);
    if (auto ok = port->open(); !ok) return std::unexpected(ok.error());
    return port;
  }
};

}  // namespace

std::unique_ptr<Driver> make_vhost_driver() { return std::make_unique<VhostDriver>(); }

}  // namespace ws
