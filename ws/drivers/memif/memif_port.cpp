// SPDX-License-Identifier: BSD-3-Clause
// net_memif ports: device keys, the connection served on a control thread (the handshake of
// memif_proto.hpp, the regions mapped or created), and the rings handed to the polling lcores
// through each queue's gate.
#include "ws/drivers/memif/memif_port.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "ws/core/log.hpp"
#include "ws/drivers/memif/memif_rxtx.hpp"
#include "ws/drivers/memif/memif_socket.hpp"
#include "ws/port/intr_fd.hpp"
#include "ws/virtio/vhost_user/mapping_guard.hpp"
#include "ws/virtio/vhost_user/peer_fd.hpp"

namespace ws {

namespace memif_pmd {

bool append_bytes(Mbuf* head, const std::byte* src, std::uint32_t len, PktmbufPool& pool) noexcept {
  Mbuf* tail = head->last_segment();
  while (len > 0) {
    if (tail->tailroom() == 0) {
      Mbuf* m = pool.alloc();
      if (m == nullptr) return false;
      tail->next = m;
      ++head->nb_segs;
      tail = m;
    }
    const std::uint32_t n = std::min<std::uint32_t>(len, tail->tailroom());
    copy_bytes(tail->data() + tail->data_len, src, n);
    tail->data_len = static_cast<std::uint16_t>(tail->data_len + n);
    head->pkt_len += n;
    src += n;
    len -= n;
  }
  return true;
}

}  // namespace memif_pmd

namespace {

using namespace memif_pmd;
using memif::Message;
using memif::MsgType;

constexpr std::array memif_params = {
    ParamSpec{"role", "string", "client",
              "server (listens, maps the client's memory) or client (connects, creates it)"},
    ParamSpec{"id", "uint", "0", "interface id: a server takes the client whose INIT names it"},
    ParamSpec{"socket", "path", "/run/memif.sock", "control socket"},
    ParamSpec{"socket-abstract", "bool", "yes", "yes: the socket is in the abstract namespace (@socket); no: a file"},
    ParamSpec{"rsize", "uint", "10", "log2 of the ring size (1..14): 10 is 1024 slots"},
    ParamSpec{"bsize", "uint", "2048", "bytes per buffer (1..65535); a longer packet spans several"},
    ParamSpec{"secret", "string", "", "a server refuses a client without this secret (23 bytes at most)"},
    ParamSpec{"mac", "mac", "random", "the port's Ethernet address"},
    ParamSpec{"zero-copy", "bool", "no", "no only: packets are copied (see ws/drivers/memif/README.md)"},
};

constexpr int handshake_ms = 2000;  // a peer that has not connected by then is dropped

struct MemifOptions {
  bool server = false;
  std::uint32_t id = 0;
  memif::SocketAddress socket;
  std::uint8_t log2_ring_size = 10;
  std::uint32_t buffer_bytes = 2048;
  std::string secret;
  MacAddress mac{};
};

// A region of the client: created here (client) or mapped from the client's fd (server).
struct MappedRegion {
  std::byte* base = nullptr;
  std::uint64_t size = 0;
  int fd = -1;  // client: the memfd sent in ADD_REGION
  virtio::MappingGuard guard;
};

template <bool Server>
class MemifPort final : public Port {
 public:
  MemifPort(std::string name, MemifOptions o) : Port(std::move(name), "net_memif"), o_(std::move(o)) { mac_ = o_.mac; }
  ~MemifPort() override {
    stop_thread();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (Server && !o_.socket.abstract) ::unlink(o_.socket.path.c_str());
  }

  Result<void> open() {
    if (auto ok = reaper_.start(name()); !ok) return ok;
    auto notifier = virtio::Notifier::create(name(), port_max_queues);
    if (!notifier) return std::unexpected(notifier.error());
    notifier_ = std::move(*notifier);
    if constexpr (Server) {
      auto fd = memif::listen_socket(o_.socket);
      if (!fd) return with_context(fd.error(), fmt::format("device '{}': key 'socket'", name()));
      listen_fd_ = *fd;
    }
    return {};
  }

  PortInfo info() const override {
    PortInfo i{"net_memif", port_max_queues, port_max_queues, 0, 65535};
    i.tx_offload_capa = tx_offload::multi_segs;  // as DPDK's: chains are copied across descriptors
    i.rx_offload_capa = rx_offload::scatter;     // a packet over several buffers arrives chained
    return i;
  }
  Result<void> do_configure(const PortConfig& c) override {
    rxq_.clear();
    txq_.clear();
    for (std::uint16_t q = 0; q < c.rx_queues; ++q) rxq_.push_back(std::make_unique<MemifRx<Server>>());
    for (std::uint16_t q = 0; q < c.tx_queues; ++q) {
      txq_.push_back(std::make_unique<MemifTx<Server>>());
      txq_.back()->notifier = notifier_.get();
      txq_.back()->notify_slot = q;
    }
    while (intr_.size() < c.rx_queues) {
      auto f = std::make_unique<IntrFd>();
      if (auto ok = f->open(fmt::format("device '{}': RX queue {} interrupt", name(), intr_.size())); !ok) return ok;
      intr_.push_back(std::move(f));
    }
    return {};
  }
  Result<void> setup_rx_queue(std::uint16_t q, const RxQueueConfig& c) override {
    if (q >= rxq_.size())
      return fail("device '{}': RX queue {} does not exist ({} configured)", name(), q, rxq_.size());
    if (c.pool == nullptr) return fail("device '{}': RX queue {} needs a mempool", name(), q);
    rxq_[q]->pool = c.pool;
    rxq_[q]->port = id();
    return {};
  }
  Result<void> setup_tx_queue(std::uint16_t q, const TxQueueConfig&) override {
    if (q >= txq_.size())
      return fail("device '{}': TX queue {} does not exist ({} configured)", name(), q, txq_.size());
    return {};
  }
  Result<void> do_start() override {
    for (std::uint16_t q = 0; q < rxq_.size(); ++q) {
      if (rxq_[q]->pool == nullptr) return fail("device '{}': RX queue {} was not set up", name(), q);
      publish_rx(q, rxq_[q].get());
    }
    for (std::uint16_t q = 0; q < txq_.size(); ++q) publish_tx(q, txq_[q].get());
    stop_.store(false, std::memory_order_relaxed);
    failed_connects_.store(0, std::memory_order_relaxed);
    thread_ = std::thread([this] { serve(); });
    if constexpr (!Server) wait_for_server();
    return {};
  }
  void do_stop() override { stop_thread(); }

  // RX interrupts, as DPDK's net_memif: RX queue q's interrupt is its ring's eventfd, which the
  // peer writes after filling slots while the ring's MEMIF_RING_FLAG_MASK_INT is clear. The
  // eventfd is the client's, shared with the peer, and new on each connection: the application
  // gets an IntrFd of ours holding the current one (intr_fd.hpp).
  Result<int> do_rx_intr_fd(std::uint16_t q) override { return intr_[q]->fd(); }
  Result<void> do_rx_intr_enable(std::uint16_t q) override {
    if (rxq_[q]->set_interrupt(true)) intr_[q]->signal();  // filled before the peer saw the flag
    return {};
  }
  Result<void> do_rx_intr_disable(std::uint16_t q) override {
    (void)rxq_[q]->set_interrupt(false);
    intr_[q]->drain();
    return {};
  }
  PortStats read_stats() const override { return sum_queues(rxq_, txq_); }
  std::vector<XStat> xstats() const override;
  LinkStatus link() const override { return {started() && up_.load(std::memory_order_acquire), 100000, true}; }

 private:
  void stop_thread() {
    stop_.store(true, std::memory_order_release);
    if (const int conn = conn_fd_.load(std::memory_order_acquire); conn >= 0) ::shutdown(conn, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
  }
  // A client whose server listens is connected when start() returns (as DPDK's, whose start
  // fails without one), so that what the application sends first is not sent on a link down.
  // Without a server it returns at once and keeps trying on its thread.
  void wait_for_server() {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(handshake_ms + 500);
    while (!up_.load(std::memory_order_acquire) && failed_connects_.load(std::memory_order_acquire) == 0 &&
           std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void serve();
  int next_connection();
  void serve_connection(int conn);
  bool watch(int conn);
  Result<bool> handle(int conn, const memif::Received& r);
  Result<void> take_fd(const Message& m, int fd);
  Result<void> create_region();
  Result<void> attach_rings();
  void attach(MemifRing& ring, std::byte* base, std::uint8_t log2, bool s2c, std::uint16_t index);
  bool teardown();  // whether the link was up
  int ring_fd(bool s2c, std::uint16_t index) const;
  Result<void> attach_interrupts();
  std::string broken_rings() const;

  MemifOptions o_;
  virtio::FdReaper reaper_;  // closes the peer's fds off this thread
  int listen_fd_ = -1;
  std::atomic<int> conn_fd_{-1};
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> up_{false};
  std::atomic<std::uint32_t> failed_connects_{0};  // client: since the last start()
  std::atomic<bool> memory_lost_{false};           // a guarded region shrank (server)
  std::optional<memif::ServerSession> server_;
  std::optional<memif::ClientSession> client_;
  std::vector<MappedRegion> mapped_;
  std::vector<Region> regions_;  // what the server's rings translate descriptors with
  std::vector<int> ring_fds_;    // each ring's eventfd, C2S rings first (server: the client's, as ADD_RING sent them)
  std::unique_ptr<virtio::Notifier> notifier_;  // writes the peer's eventfds of our TX rings (made in open())
  std::vector<std::unique_ptr<IntrFd>> intr_;   // per RX queue, from configure()
  // What a peer can make us log, rate-limited: connections and refusals, and broken rings apart
  // (a flood of the first must not hide the second).
  LogBudget log_{name() + " (connections)"};
  LogBudget ring_log_{name() + " (rings)"};
  Counter connections_, disconnects_, lost_;
  std::vector<std::unique_ptr<MemifRx<Server>>> rxq_;
  std::vector<std::unique_ptr<MemifTx<Server>>> txq_;
};

template <bool Server>
int MemifPort<Server>::next_connection() {
  if constexpr (Server) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) return -1;
    return ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  } else {
    auto fd = memif::connect_socket(o_.socket);
    if (!fd) {
      failed_connects_.fetch_add(1, std::memory_order_release);
      ::usleep(100 * 1000);  // no server yet: try again every 100 ms
      return -1;
    }
    return *fd;
  }
}

template <bool Server>
void MemifPort<Server>::serve() {
  while (!stop_.load(std::memory_order_acquire)) {
    log_.flush();
    const int conn = next_connection();
    if (conn < 0) continue;
    conn_fd_.store(conn, std::memory_order_release);
    if (stop_.load(std::memory_order_acquire)) ::shutdown(conn, SHUT_RDWR);  // stop_thread ran meanwhile
    serve_connection(conn);
    const bool was_up = teardown();
    conn_fd_.store(-1, std::memory_order_release);
    ::close(conn);
    // A client the server refused tries again after a pause, not in a loop (a DPDK server
    // refuses every INIT until its port starts).
    if (!Server && !was_up) ::usleep(100 * 1000);
  }
  log_.flush(true);
  ring_log_.flush(true);
}

// One connection: the handshake, then watching the rings until either side ends it.
template <bool Server>
void MemifPort<Server>::serve_connection(int conn) {
  const auto qc = static_cast<std::uint16_t>(Server ? rxq_.size() : txq_.size());  // C2S rings
  const auto qs = static_cast<std::uint16_t>(Server ? txq_.size() : rxq_.size());  // S2C rings
  if constexpr (Server) {
    server_.emplace(memif::ServerSession::Config{o_.id, o_.secret, qc, qs, name()});
    ring_fds_.assign(2u * port_max_queues, -1);  // ADD_RING fills them in
    if (auto ok = memif::send(conn, server_->hello()); !ok) return;
  } else {
    client_.emplace(memif::ClientSession::Config{o_.id, o_.secret, qc, qs, o_.log2_ring_size, o_.buffer_bytes, name()});
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(handshake_ms);
  while (!stop_.load(std::memory_order_acquire)) {
    pollfd p{conn, POLLIN, 0};
    const int r = ::poll(&p, 1, 100);
    log_.flush();
    ring_log_.flush();
    if (stop_.load(std::memory_order_acquire) || !watch(conn)) return;
    if (!up_.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() > deadline) {
      log_.log(LogLevel::warning, "{}: the peer did not finish connecting in {} ms; closing", name(), handshake_ms);
      (void)memif::send(conn, memif::disconnect_message("connection not finished in time"));
      return;
    }
    if (r <= 0) continue;
    auto got = memif::receive(conn, reaper_);
    if (!got) {
      log_.log(LogLevel::warning, "{}: {}; closing the connection", name(), got.error().message);
      (void)memif::send(conn, memif::disconnect_message(got.error().message));
      return;
    }
    if (!got->has_value()) continue;
    auto handled = handle(conn, **got);
    if (!handled) {
      log_.log(LogLevel::warning, "{}: {}; closing the connection", name(), handled.error().message);
      (void)memif::send(conn, memif::disconnect_message(handled.error().message));
      return;
    }
  }
}

// The connection's health, every poll period: false when it must close.
template <bool Server>
bool MemifPort<Server>::watch(int conn) {
  if (memory_lost_.load(std::memory_order_acquire)) {
    lost_.add(1);
    log_.log(LogLevel::warning, "{}: the client shrank the memory it shared (SIGBUS caught); closing", name());
    (void)memif::send(conn, memif::disconnect_message("shared memory shrank"));
    return false;
  }
  if (!up_.load(std::memory_order_relaxed)) return true;
  const std::string broken = broken_rings();
  if (broken.empty()) return true;
  ring_log_.log(LogLevel::warning, "{}: {}; link down, closing the connection", name(), broken);
  (void)memif::send(conn, memif::disconnect_message("a ring was broken"));
  return false;
}

template <bool Server>
std::string MemifPort<Server>::broken_rings() const {
  std::string out;
  auto check = [&](const MemifRing& r, const char* dir, std::size_t q) {
    if (!r.broken.load(std::memory_order_acquire)) return;
    const auto e = static_cast<RingError>(r.first_error.load(std::memory_order_relaxed));
    out += fmt::format("{}{} queue {} broken by the peer: {} ({})", out.empty() ? "" : "; ", dir, q, ring_error_name(e),
                       r.first_detail.load(std::memory_order_relaxed));
  };
  for (std::size_t q = 0; q < rxq_.size(); ++q) check(rxq_[q]->ring, "RX", q);
  for (std::size_t q = 0; q < txq_.size(); ++q) check(txq_[q]->ring, "TX", q);
  return out;
}

// One message: through the session, then what it asks (fds kept or mapped, the reply sent, the
// rings attached once connected). false: nothing more to do with this message.
template <bool Server>
Result<bool> MemifPort<Server>::handle(int conn, const memif::Received& r) {
  log(LogLevel::debug, "{}: memif {}", name(), memif::msg_type_name(r.message.type));
  Result<memif::Step> step = Server ? server_->on_message(r.message, r.fd >= 0) : client_->on_message(r.message);
  if (!step || (!Server && r.fd >= 0)) {
    reaper_.close(r.fd);
    if (!step) return std::unexpected(step.error());
    return fail("{} came with an fd, expected none", memif::msg_type_name(r.message.type));
  }
  if (auto ok = take_fd(r.message, r.fd); !ok) return std::unexpected(ok.error());
  if (step->reply) {
    int fd = -1;
    if (step->fd == memif::Step::Fd::region) fd = mapped_.at(0).fd;
    if (step->fd == memif::Step::Fd::ring) fd = ring_fds_.at(step->fd_index);
    if (auto ok = memif::send(conn, *step->reply, fd); !ok) return std::unexpected(ok.error());
  }
  if (step->connected) {
    if (auto ok = attach_rings(); !ok) return std::unexpected(ok.error());
    if (auto ok = attach_interrupts(); !ok) return std::unexpected(ok.error());
    connections_.add(1);
    up_.store(true, std::memory_order_release);
    log_.log(LogLevel::notice, "{}: connected to '{}' on {}", name(),
             Server ? server_->peer_name() : client_->peer_name(), o_.socket.describe());
  }
  return true;
}

// Server: maps a region the client added (its fd checked and bounded first) and keeps a ring's
// eventfd (checked: an eventfd) for interrupts. Client: after HELLO, creates the region and the
// rings' eventfds the next messages carry.
template <bool Server>
Result<void> MemifPort<Server>::take_fd(const Message& m, int fd) {
  if constexpr (!Server) {
    return m.type == MsgType::hello ? create_region() : Result<void>{};
  } else {
    if (m.type == MsgType::add_ring) {
      auto ok = virtio::expect_eventfd(fd);
      const bool c2s = (m.add_ring.flags & memif::add_ring_flag_c2s) != 0;
      const std::size_t at = (c2s ? 0u : port_max_queues) + m.add_ring.index;
      if (!ok || m.add_ring.index >= port_max_queues || ring_fds_[at] >= 0) {
        reaper_.close(fd);
        if (!ok) return with_context(ok.error(), fmt::format("ADD_RING {}", +m.add_ring.index));
        return fail("ADD_RING {}: the ring was added before", +m.add_ring.index);
      }
      ring_fds_[at] = fd;
      return {};
    }
    if (m.type != MsgType::add_region) return {};
    const std::uint64_t size = server_->regions().back();
    auto close_fail = [&](const Error& e) -> Result<void> {
      reaper_.close(fd);
      return with_context(e, fmt::format("ADD_REGION {}", +m.add_region.index));
    };
    if (auto ok = virtio::expect_shared_memory(fd); !ok) return close_fail(ok.error());
    struct stat st{};  // a tmpfs file: fstat is answered from memory
    if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < size)
      return close_fail(Error{fmt::format("the file holds {} bytes, fewer than the {} declared", st.st_size, size)});
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    reaper_.close(fd);
    if (p == MAP_FAILED) return fail("ADD_REGION {}: mmap of {} bytes: {}", +m.add_region.index, size, strerror(errno));
    MappedRegion& r = mapped_.emplace_back(MappedRegion{static_cast<std::byte*>(p), size, -1, {}});
    auto guard = virtio::MappingGuard::guard(p, size, &memory_lost_);
    if (!guard) return std::unexpected(guard.error());
    r.guard = std::move(*guard);
    return {};
  }
}

template <bool Server>
Result<void> MemifPort<Server>::create_region() {
  const memif::Layout& l = client_->layout();
  const int fd = ::memfd_create("memif_region_0", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return fail("memfd_create: {}", strerror(errno));
  MappedRegion& r = mapped_.emplace_back(MappedRegion{nullptr, l.region_bytes(), fd, {}});
  // Sealed against shrinking: the server cannot make our own accesses fault.
  if (::ftruncate(fd, static_cast<off_t>(r.size)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return fail("sizing and sealing {} bytes of shared memory: {}", r.size, strerror(errno));
  void* p = ::mmap(nullptr, r.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail("mmap of {} bytes: {}", r.size, strerror(errno));
  r.base = static_cast<std::byte*>(p);
  for (std::uint16_t i = 0; i < l.c2s + l.s2c; ++i) {
    const bool s2c = i >= l.c2s;
    auto* h = reinterpret_cast<RingHeader*>(r.base + l.ring_offset(s2c, s2c ? i - l.c2s : i));
    h->cookie = memif::ring_cookie;
    h->flags = s2c ? memif::ring_flag_mask_int : 0;  // we poll what we receive
    const int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0) return fail("eventfd: {}", strerror(errno));
    ring_fds_.push_back(efd);
  }
  return {};
}

template <bool Server>
void MemifPort<Server>::attach(MemifRing& ring, std::byte* base, std::uint8_t log2, bool s2c, std::uint16_t index) {
  ring.header = reinterpret_cast<RingHeader*>(base);
  ring.desc = reinterpret_cast<Desc*>(base + sizeof(RingHeader));
  ring.mask = static_cast<std::uint16_t>((1u << log2) - 1);
  ring.mine = 0;
  ring.seen = 0;
  ring.broken.store(false, std::memory_order_relaxed);
  if constexpr (Server) {
    ring.regions = regions_.data();
    ring.region_count = static_cast<std::uint16_t>(regions_.size());
    ring.publish_tail(0);
    if (!s2c) std::atomic_ref<std::uint16_t>(ring.header->flags).store(memif::ring_flag_mask_int);
  } else {
    const memif::Layout& l = client_->layout();
    ring.buffer_bytes = l.buffer_bytes;
    ring.buffer_offset = static_cast<std::uint32_t>(l.buffer_offset(s2c, index));
    ring.buffers = mapped_[0].base + ring.buffer_offset;
    if (s2c) {
      // Every buffer to the server at once: what it sends right after CONNECTED has room (the
      // peer of a client that sends first answers before that client's first receive).
      for (std::uint16_t h = 0; h <= ring.mask; ++h) ring.store_desc(h, ring.own_desc(h, ring.buffer_bytes, 0));
      ring.mine = ring.size();
      ring.publish_head(ring.mine);
    }
  }
  ring.gate.open();  // release: everything above before an lcore enters
}

// Ring `s2c` `index`'s eventfd, or -1.
template <bool Server>
int MemifPort<Server>::ring_fd(bool s2c, std::uint16_t index) const {
  std::size_t at = index;
  if constexpr (Server) {
    at += s2c ? port_max_queues : 0u;
  } else {
    const memif::Layout& l = client_->layout();
    if (index >= (s2c ? l.s2c : l.c2s)) return -1;  // the server took fewer rings
    at += s2c ? l.c2s : 0u;
  }
  return at < ring_fds_.size() ? ring_fds_[at] : -1;
}

// After attach_rings: each RX ring's eventfd into its queue's IntrFd, each TX ring's into the
// notifier. An RX queue whose application sleeps gets its ring unmasked and its fd fired, so
// that it polls the new ring once.
template <bool Server>
Result<void> MemifPort<Server>::attach_interrupts() {
  for (std::uint16_t q = 0; q < rxq_.size(); ++q) {
    if (auto ok = intr_[q]->watch(ring_fd(Server == false, q)); !ok) return ok;
    MemifRx<Server>& rx = *rxq_[q];
    if (rx.armed.load(std::memory_order_relaxed) && ring_fd(Server == false, q) >= 0) {
      std::atomic_ref<std::uint16_t>(rx.ring.header->flags).store(0, std::memory_order_relaxed);
      intr_[q]->signal();
    }
  }
  for (std::uint16_t q = 0; q < txq_.size(); ++q)
    if (auto ok = notifier_->set_fd(q, ring_fd(Server == true, q)); !ok) return ok;
  return {};
}

template <bool Server>
Result<void> MemifPort<Server>::attach_rings() {
  for (const MappedRegion& m : mapped_) regions_.push_back({m.base, m.size});
  for (int dir = 0; dir < 2; ++dir) {
    const bool s2c = dir == 1;
    const std::size_t count = (Server == s2c) ? txq_.size() : rxq_.size();
    for (std::uint16_t q = 0; q < count; ++q) {
      MemifRing& ring = (Server == s2c) ? txq_[q]->ring : rxq_[q]->ring;
      std::byte* base;
      std::uint8_t log2;
      if constexpr (Server) {
        const auto& rings = server_->rings(s2c);
        if (q >= rings.size() || !rings[q].present) continue;  // the client has fewer queues
        base = mapped_[rings[q].region].base + rings[q].offset;
        log2 = rings[q].log2_ring_size;
        const std::uint32_t cookie = std::atomic_ref<std::uint32_t>(reinterpret_cast<RingHeader*>(base)->cookie).load();
        if (cookie != memif::ring_cookie)
          return fail("{} ring {} has cookie {:#x}, expected {:#x}", s2c ? "S2C" : "C2S", q, cookie,
                      memif::ring_cookie);
      } else {
        const memif::Layout& l = client_->layout();
        if (q >= (s2c ? l.s2c : l.c2s)) continue;  // the server has fewer queues
        base = mapped_[0].base + l.ring_offset(s2c, q);
        log2 = l.log2_ring_size;
      }
      attach(ring, base, log2, s2c, q);
    }
  }
  return {};
}

// Control thread, connection gone: no lcore is in a ring after its gate closes, so the memory
// can go.
template <bool Server>
bool MemifPort<Server>::teardown() {
  const bool was_up = up_.exchange(false, std::memory_order_acq_rel);
  for (auto& q : rxq_) q->ring.gate.close();
  for (auto& q : txq_) q->ring.gate.close();
  if (was_up) {
    disconnects_.add(1);
    log_.log(LogLevel::notice, "{}: disconnected; link down", name());
  }
  for (MappedRegion& r : mapped_) {
    r.guard.release();
    if (r.base != nullptr) ::munmap(r.base, r.size);
    if (r.fd >= 0) ::close(r.fd);  // client: our own memfd
  }
  for (auto& f : intr_) (void)f->watch(-1);  // before the eventfds close
  for (std::uint32_t q = 0; q < txq_.size(); ++q) (void)notifier_->set_fd(q, -1);
  for (const int fd : ring_fds_) {
    if (fd < 0) continue;
    if constexpr (Server) {
      reaper_.close(fd);  // the client's
    } else {
      ::close(fd);  // our own
    }
  }
  mapped_.clear();
  regions_.clear();
  ring_fds_.clear();
  server_.reset();
  client_.reset();
  memory_lost_.store(false, std::memory_order_relaxed);
  return was_up;
}

template <bool Server>
std::vector<XStat> MemifPort<Server>::xstats() const {
  auto out = Port::xstats();
  auto ring_stats = [&](const MemifRing& r, const char* dir, std::size_t q) {
    const std::string p = fmt::format("{}_q{}_", dir, q);
    out.push_back({p + "broken", r.broken.load(std::memory_order_relaxed) ? 1u : 0u});
    for (int e = 0; e < static_cast<int>(RingError::count); ++e)
      out.push_back({p + ring_error_name(static_cast<RingError>(e)), r.errors[e].read()});
  };
  for (std::size_t q = 0; q < rxq_.size(); ++q) ring_stats(rxq_[q]->ring, "rx", q);
  for (std::size_t q = 0; q < txq_.size(); ++q) ring_stats(txq_[q]->ring, "tx", q);
  out.push_back({"connections", connections_.read()});
  out.push_back({"disconnects", disconnects_.read()});
  out.push_back({"memory_lost", lost_.read()});
  return out;
}

// ---- the driver: DPDK 22.11's keys and defaults ----

Result<MemifOptions> parse_options(const DevArgs& args) {
  MemifOptions o;
  const std::string role = args.get_string("role", "client");
  if (role == "server" || role == "master") {
    o.server = true;
  } else if (role != "client" && role != "slave") {
    return fail("device '{}': key 'role' has value '{}', expected server or client", args.name(), role);
  }
  auto id = args.get_uint("id", 0, 0, UINT32_MAX);
  auto rsize = args.get_uint("rsize", 10, 1, memif::max_log2_ring_size);
  auto bsize = args.get_uint("bsize", 2048, 1, 65535);
  auto abstract = args.get_bool("socket-abstract", true);
  auto zc = args.get_bool("zero-copy", false);
  for (const auto* r : {&id, &rsize, &bsize})
    if (!*r) return std::unexpected(r->error());
  for (const auto* b : {&abstract, &zc})
    if (!*b) return std::unexpected(b->error());
  if (*zc)
    return fail(
        "device '{}': key 'zero-copy' value yes is not supported: packets are copied between our mbufs and "
        "the shared buffers (our mbufs are not in memory a peer can map); expected zero-copy=no",
        args.name());
  o.id = static_cast<std::uint32_t>(*id);
  o.log2_ring_size = static_cast<std::uint8_t>(*rsize);
  o.buffer_bytes = static_cast<std::uint32_t>(*bsize);
  o.socket = {args.get_string("socket", "/run/memif.sock"), *abstract};
  o.secret = args.get_string("secret", "");
  if (o.secret.size() >= memif::secret_bytes)
    return fail("device '{}': key 'secret' is {} bytes long, expected {} at most", args.name(), o.secret.size(),
                memif::secret_bytes - 1);
  return o;
}

Result<MacAddress> parse_mac(const DevArgs& args) {
  if (auto text = args.get("mac")) {
    auto mac = MacAddress::parse(*text);
    if (!mac) return fail("device '{}': key 'mac' has value '{}', expected xx:xx:xx:xx:xx:xx", args.name(), *text);
    return *mac;
  }
  // DPDK's default: a random locally administered unicast address.
  std::random_device rd;
  MacAddress mac{};
  for (auto& b : mac.bytes) b = static_cast<std::uint8_t>(rd());
  mac.bytes[0] = static_cast<std::uint8_t>((mac.bytes[0] & 0xfe) | 0x02);
  return mac;
}

class MemifDriver final : public Driver {
 public:
  std::string_view name() const override { return "net_memif"; }
  std::span<const ParamSpec> params() const override { return memif_params; }
  Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv&) override {
    auto o = parse_options(args);
    if (!o) return std::unexpected(o.error());
    auto mac = parse_mac(args);
    if (!mac) return std::unexpected(mac.error());
    o->mac = *mac;
    if (o->server) return open_port<true>(args.name(), std::move(*o));
    return open_port<false>(args.name(), std::move(*o));
  }

 private:
  template <bool Server>
  static Result<std::unique_ptr<Port>> open_port(const std::string& name, MemifOptions o) {
    auto port = std::make_unique<MemifPort<Server>>(name, std::move(o));
    if (auto ok = port->open(); !ok) return std::unexpected(ok.error());
    return port;
  }
};

}  // namespace

std::unique_ptr<Driver> make_memif_driver() { return std::make_unique<MemifDriver>(); }

}  // namespace ws
