// SPDX-License-Identifier: BSD-3-Clause
// virtio_user port: vhost-user negotiation (as DPDK 22.11's virtio_user sends it), ring memory in
// the Arena, queue variants picked from the negotiated features.
#include "ws/drivers/virtio_user/virtio_user_port.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/ranges.h>

#include "ws/core/log.hpp"
#include "ws/drivers/virtio_user/virtio_user_rxtx.hpp"
#include "ws/virtio/features.hpp"
#include "ws/virtio/vhost_user.hpp"

namespace ws {
namespace {

using namespace virtio_user_pmd;
namespace vu = virtio::vhost_user;
using virtio::bit;
using virtio::has;
namespace feature = virtio::feature;

constexpr std::array virtio_user_params = {
    ParamSpec{"path", "path", "", "vhost-user socket path (required)"},
    ParamSpec{"queues", "uint", "1", "queue pairs, 1..8"},
    ParamSpec{"queue_size", "uint", "256", "descriptors per ring (split: a power of two), 32..4096"},
    ParamSpec{"packed_vq", "bool", "0", "use packed rings (virtio 1.2 §2.8) if the backend offers them"},
    ParamSpec{"in_order", "bool", "1", "negotiate IN_ORDER if the backend offers it"},
    ParamSpec{"mrg_rxbuf", "bool", "1", "negotiate MRG_RXBUF if the backend offers it"},
    ParamSpec{"server", "bool", "0", "listen on path and wait (30 s) for the backend to connect"},
    ParamSpec{"event_idx", "bool", "1", "negotiate EVENT_IDX if the backend offers it (notifications by index)"},
    ParamSpec{"csum", "bool", "0", "negotiate CSUM/GUEST_CSUM: TX checksum requests and RX checksum state in the header"},
    ParamSpec{"tso", "bool", "0", "negotiate HOST_TSO4/6 and GUEST_TSO4/6 (with csum=1): TCP segmentation in the header"},
    // DPDK 22.11 net_virtio_user keys, so its device strings carry over unchanged.
    ParamSpec{"mac", "mac", "02:56:49:52:54:00", "the port's MAC address, xx:xx:xx:xx:xx:xx"},
    ParamSpec{"cq", "bool", "0",
              "accepted for DPDK compatibility: DPDK emulates a control queue in the frontend only to enable queue "
              "pairs; we enable every pair directly (SET_VRING_ENABLE), so queues>1 works with cq=0 too"},
    ParamSpec{"speed", "uint", "10000",
              "link speed in Mbps reported by link status (DPDK's values: 10000 20000 25000 40000 50000 56000 "
              "100000 200000)"},
    ParamSpec{"vectorized", "bool", "0",
              "accepted for DPDK compatibility: there is no separate vector path here; every ring variant is the "
              "one batched path"},
    ParamSpec{"iface", "string", "",
              "refused: DPDK's vhost-kernel tap name; this driver speaks vhost-user only (path= a unix socket)"},
};

// DPDK's accepted link speeds for speed= (virtio_dev_speed_capa_get), in Mbps.
constexpr std::array<std::uint32_t, 8> dpdk_link_speeds = {10000, 20000, 25000, 40000, 50000, 56000, 100000, 200000};

constexpr std::array<std::string_view, 1> virtio_user_aliases = {"virtio_user"};  // DPDK's RTE_PMD_REGISTER_ALIAS

struct Options {
  std::string path;
  std::uint16_t queues = 1;
  std::uint32_t queue_size = 256;
  bool packed = false, in_order = true, mrg = true, server = false, csum = false, tso = false, event_idx = true;
  MacAddress mac{{0x02, 0x56, 0x49, 0x52, 0x54, 0x00}};
  std::uint32_t speed_mbps = 10000;
};

// Calls f.template operator()<B...>() with each combination of N bools until one returns true;
// whether one did. Walks the queue variants (one instance per feature combination).
template <std::size_t N, bool... Bs, class F>
bool any_variant(F& f) {
  if constexpr (sizeof...(Bs) == N) {
    return f.template operator()<Bs...>();
  } else {
    return any_variant<N, Bs..., false>(f) || any_variant<N, Bs..., true>(f);
  }
}

// Queue variants, picked once from the negotiated features: a burst never tests a feature.
std::unique_ptr<RxCommon> make_rx(bool packed, bool in_order, bool mergeable, bool offload) {
  std::unique_ptr<RxCommon> q;
  auto pick = [&]<bool P, bool I, bool M, bool O>() {
    if (P == packed && I == in_order && M == mergeable && O == offload) q = std::make_unique<VirtioRx<P, I, M, O>>();
    return q != nullptr;
  };
  any_variant<4>(pick);
  return q;
}
std::unique_ptr<TxCommon> make_tx(bool packed, bool in_order, bool offload) {
  std::unique_ptr<TxCommon> q;
  auto pick = [&]<bool P, bool I, bool O>() {
    if (P == packed && I == in_order && O == offload) q = std::make_unique<VirtioTx<P, I, O>>();
    return q != nullptr;
  };
  any_variant<3>(pick);
  return q;
}

struct RingMem {
  virtio::SplitRing split;
  virtio::PackedRing packed;
  std::byte* base = nullptr;
  std::size_t bytes = 0;
};

class VirtioUserPort final : public Port {
 public:
  VirtioUserPort(std::string name, Options o, Arena& arena)
      : Port(std::move(name), "net_virtio_user"), o_(std::move(o)), arena_(arena) {
    mac_ = o_.mac;
  }
  ~VirtioUserPort() override {
    stop_monitor();
    for (int fd : eventfds_) ::close(fd);
    if (sock_ >= 0) ::close(sock_);
    if (listen_fd_ >= 0) {
      ::close(listen_fd_);
      ::unlink(o_.path.c_str());
    }
  }

  Result<void> connect_and_negotiate();
  Result<void> negotiate();
  Result<void> choose_features(std::uint64_t offered);

  // Checksum requests are always honoured (in the header when the device took CSUM, else in
  // software); TSO only when the device took HOST_TSO4/6 (negotiated when the port is created).
  PortInfo info() const override {
    PortInfo i{"net_virtio_user", o_.queues, o_.queues, 0, 65535};
    i.tx_offload_capa = tx_offload::checksums;
    if (virtio::HdrOffloads::driver_tx(features_).tso4 || virtio::HdrOffloads::driver_tx(features_).tso6)
      i.tx_offload_capa |= tx_offload::tcp_tso;
    return i;
  }
  Result<void> do_configure(const PortConfig& c) override {
    if (c.rx_queues != c.tx_queues || c.rx_queues > o_.queues)
      return fail("device '{}': {} RX and {} TX queues requested, expected equal counts up to queues={}", name(),
                  c.rx_queues, c.tx_queues, o_.queues);
    rxq_.clear();
    txq_.clear();
    const bool p = packed(), io = has(features_, feature::in_order), m = has(features_, feature::mrg_rxbuf);
    // Offload variants only where there is something to map: the device's headers may carry
    // state (GUEST_CSUM), ours may carry requests (CSUM), or the application will ask for TX
    // offloads that must then be done in software.
    const virtio::HdrOffloads tx_ol = virtio::HdrOffloads::driver_tx(features_);
    const bool ol_in = has(features_, feature::guest_csum);
    const bool ol_out = tx_ol.any() || c.tx_offloads != 0;
    for (std::uint16_t q = 0; q < c.rx_queues; ++q) {
      // Variants picked once from the negotiated features, never per packet.
      rxq_.push_back(make_rx(p, io, m, ol_in));
      txq_.push_back(make_tx(p, io, ol_out));
      txq_.back()->offload = tx_ol;
    }
    return {};
  }
  Result<void> setup_rx_queue(std::uint16_t q, const RxQueueConfig& c) override {
    if (q >= rxq_.size()) return fail("RX queue {} does not exist ({} configured)", q, rxq_.size());
    if (c.pool == nullptr) return fail("device '{}': RX queue {} needs a mempool", name(), q);
    if (!arena_.contains(c.pool->mempool().object(0), 1))
      return fail("device '{}': RX queue {} pool '{}' is not in the shared arena", name(), q, c.pool->mempool().name());
    rxq_[q]->pool = c.pool;
    rxq_[q]->port_id = id();
    if (auto m = ring_memory(2u * q); !m) return std::unexpected(m.error());
    return {};
  }
  Result<void> setup_tx_queue(std::uint16_t q, const TxQueueConfig&) override {
    if (q >= txq_.size()) return fail("TX queue {} does not exist ({} configured)", q, txq_.size());
    if (auto m = ring_memory(2u * q + 1); !m) return std::unexpected(m.error());
    return {};
  }
  Result<void> do_start() override;
  void do_stop() override;
  LinkStatus link() const override { return {started(), o_.speed_mbps, true}; }
  void release_mbufs() override {
    for (auto& q : rxq_) q->release_mbufs();
    for (auto& q : txq_) q->release_mbufs();
  }
  // Packets a ring reset dropped are errors: TX ones were counted sent when the ring took them.
  PortStats read_stats() const override {
    PortStats s = sum_queues(rxq_, txq_);
    for (const auto& q : rxq_) s.ierrors += q->reset_dropped.read();
    for (const auto& q : txq_) s.oerrors += q->reset_dropped.read();
    return s;
  }
  std::vector<XStat> xstats() const override {
    auto out = Port::xstats();
    for (std::size_t q = 0; q < rxq_.size(); ++q) {
      out.push_back({fmt::format("rx_q{}_broken", q), rxq_[q]->health.broken() ? 1u : 0u});
      out.push_back({fmt::format("tx_q{}_broken", q), txq_[q]->health.broken() ? 1u : 0u});
      out.push_back({fmt::format("rx_q{}_reset_dropped", q), rxq_[q]->reset_dropped.read()});
      out.push_back({fmt::format("tx_q{}_reset_dropped", q), txq_[q]->reset_dropped.read()});
    }
    out.push_back({"features", features_});
    return out;
  }

 private:
  bool packed() const { return has(features_, feature::ring_packed); }
  // Publishes queue q if it is a Q (control path, once per start).
  template <class Q, class Base>
  bool publish_if(std::uint16_t q, Base* base) {
    auto* v = dynamic_cast<Q*>(base);
    if (v == nullptr) return false;
    if constexpr (std::is_base_of_v<RxCommon, Q>) publish_rx(q, v); else publish_tx(q, v);
    return true;
  }
  Result<RingMem*> ring_memory(std::uint32_t r);
  std::vector<QueueCommon*> ring_queues() const;
  Result<void> setup_device(bool resume);
  void reset_rings();
  void monitor();
  void stop_monitor();
  Result<void> send(vu::Request r, std::uint64_t u64, int fd = -1);
  Result<void> send_state(vu::Request r, std::uint32_t index, std::uint32_t num);
  Result<std::uint64_t> get_u64(vu::Request r);
  Result<void> set_status(std::uint8_t s) {
    if (!has(protocol_, vu::protocol::status)) return {};
    status_ = s;
    return send(vu::Request::set_status, s);
  }
  Result<int> new_eventfd() {
    const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) return fail("device '{}': eventfd: {}", name(), std::strerror(errno));
    eventfds_.push_back(fd);
    return fd;
  }

  Options o_;
  Arena& arena_;
  int sock_ = -1;
  int listen_fd_ = -1;  // server=1: kept for a backend that reconnects
  // server=1: reconnects a backend while started; between do_start and do_stop it alone uses sock_.
  std::thread monitor_;
  std::atomic<bool> monitor_stop_{false};
  bool reconnecting_ = false;  // negotiate() checks features_ instead of choosing them
  std::vector<int> call_fds_;
  std::uint64_t features_ = 0;
  std::uint64_t protocol_ = 0;
  std::uint8_t status_ = 0;
  std::vector<std::unique_ptr<RingMem>> rings_;
  std::byte* zero_hdr_ = nullptr;
  std::vector<int> eventfds_;
  std::unique_ptr<virtio::Notifier> kicks_;  // writes the kick fds for the lcores (set in negotiate())
  std::vector<std::unique_ptr<RxCommon>> rxq_;
  std::vector<std::unique_ptr<TxCommon>> txq_;
};

Result<void> VirtioUserPort::send(vu::Request r, std::uint64_t u64, int fd) {
  vu::Message m;
  m.header = {static_cast<std::uint32_t>(r), vu::flag_version, 8};
  m.payload.u64 = u64;
  const int fds[] = {fd};
  auto ok = vu::send_message(sock_, m, fd >= 0 ? std::span<const int>(fds) : std::span<const int>());
  if (!ok) return with_context(ok.error(), fmt::format("device '{}'", name()));
  return {};
}

Result<void> VirtioUserPort::send_state(vu::Request r, std::uint32_t index, std::uint32_t num) {
  vu::Message m;
  m.header = {static_cast<std::uint32_t>(r), vu::flag_version, sizeof(vu::VringState)};
  m.payload.state = {index, num};
  auto ok = vu::send_message(sock_, m);
  if (!ok) return with_context(ok.error(), fmt::format("device '{}'", name()));
  return {};
}

Result<std::uint64_t> VirtioUserPort::get_u64(vu::Request r) {
  vu::Message m;
  m.header = {static_cast<std::uint32_t>(r), vu::flag_version, 0};
  if (auto ok = vu::send_message(sock_, m); !ok) return with_context(ok.error(), fmt::format("device '{}'", name()));
  auto reply = vu::recv_reply(sock_, r, 8);
  if (!reply) return with_context(reply.error(), fmt::format("device '{}'", name()));
  return reply->payload.u64;
}

Result<void> VirtioUserPort::connect_and_negotiate() {
  if (o_.server) {
    auto listening = vu::listen_unix(o_.path);
    if (!listening) return with_context(listening.error(), fmt::format("device '{}': key 'path'", name()));
    listen_fd_ = *listening;  // kept: a backend that goes away may come back (monitor())
    pollfd p{listen_fd_, POLLIN, 0};
    std::printf("virtio_user %s: waiting for the vhost backend to connect to %s\n", name().c_str(), o_.path.c_str());
    std::fflush(stdout);
    sock_ = ::poll(&p, 1, 30000) == 1 ? ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC) : -1;
    if (sock_ < 0) return fail("device '{}': key 'server'=1: no backend connected to '{}' within 30 s", name(), o_.path);
    return negotiate();
  }
  auto fd = vu::connect_unix(o_.path);
  if (!fd) return fail("device '{}': key 'path': {} (is the vhost backend running?)", name(), fd.error().message);
  sock_ = *fd;
  return negotiate();
}

Result<void> VirtioUserPort::negotiate() {
  if (kicks_ == nullptr) {
    auto kicks = virtio::Notifier::create(name(), 2u * o_.queues);
    if (!kicks) return std::unexpected(kicks.error());
    kicks_ = std::move(*kicks);
  }
  // DPDK 22.11 virtio_user's order (docs/vhost.md, the message flow).
  vu::Message owner;
  owner.header = {static_cast<std::uint32_t>(vu::Request::set_owner), vu::flag_version, 0};
  if (auto ok = vu::send_message(sock_, owner); !ok) return with_context(ok.error(), name());
  auto offered = get_u64(vu::Request::get_features);
  if (!offered) return std::unexpected(offered.error());
  if (!has(*offered, feature::version_1))
    return fail("device '{}': the backend offers features {:#x} without VERSION_1 (bit 32)", name(), *offered);
  if (has(*offered, feature::protocol_features)) {
    auto proto = get_u64(vu::Request::get_protocol_features);
    if (!proto) return std::unexpected(proto.error());
    protocol_ = *proto & (bit(vu::protocol::mq) | bit(vu::protocol::status));
    if (auto ok = send(vu::Request::set_protocol_features, protocol_); !ok) return ok;
  }
  return choose_features(*offered);
}

// First connection: take what we want of what is offered. Reconnection: the rings already run
// with features_, so the new backend must offer all of them.
Result<void> VirtioUserPort::choose_features(std::uint64_t offered) {
  if (reconnecting_) {
    if ((features_ & ~offered) != 0)
      return fail("device '{}': the reconnected backend offers {:#x}, without {:#x} that the rings run with", name(),
                  offered, features_ & ~offered);
    return {};
  }
  std::uint64_t want = bit(feature::version_1);
  if (o_.packed) want |= bit(feature::ring_packed);
  if (o_.in_order) want |= bit(feature::in_order);
  if (o_.mrg) want |= bit(feature::mrg_rxbuf);
  if (o_.event_idx) want |= bit(feature::event_idx);
  if (o_.queues > 1) want |= bit(feature::mq);
  if (o_.csum) want |= bit(feature::csum) | bit(feature::guest_csum);
  if (o_.csum && o_.tso)
    want |= bit(feature::host_tso4) | bit(feature::host_tso6) | bit(feature::guest_tso4) | bit(feature::guest_tso6);
  features_ = want & offered;
  if (o_.queues > 1 && !has(features_, feature::mq))
    return fail("device '{}': key 'queues' value {}: the backend does not offer MQ", name(), o_.queues);
  if (o_.queues > 1 && has(protocol_, vu::protocol::mq)) {
    auto qn = get_u64(vu::Request::get_queue_num);
    if (!qn) return std::unexpected(qn.error());
    if (*qn < o_.queues)
      return fail("device '{}': key 'queues' value {}: the backend serves {} queue pairs", name(), o_.queues, *qn);
  }
  if (o_.packed && !packed())
    log(LogLevel::warning, "{}: the backend does not offer packed rings; using split rings", name());
  log(LogLevel::info, "{}: backend offers features {:#x}, negotiated {:#x}", name(), offered, features_);
  return {};
}

Result<RingMem*> VirtioUserPort::ring_memory(std::uint32_t r) {
  if (rings_.size() <= r) rings_.resize(r + 1);
  if (rings_[r]) return rings_[r].get();
  const std::uint32_t n = o_.queue_size;
  auto mem = std::make_unique<RingMem>();
  // One block per ring: desc | avail (driver event) | used (device event), each 64-byte aligned.
  const std::size_t desc = (virtio::split_desc_bytes(n) + 63) & ~std::size_t{63};
  const std::size_t avail = (virtio::split_avail_bytes(n) + 63) & ~std::size_t{63};
  mem->bytes = desc + avail + virtio::split_used_bytes(n);
  auto block = arena_.allocate(mem->bytes, 4096, fmt::format("{} ring {}", name(), r));
  if (!block) return with_context(block.error(), fmt::format("device '{}'", name()));
  mem->base = static_cast<std::byte*>(*block);
  mem->split = {n, reinterpret_cast<virtio::SplitDesc*>(mem->base), reinterpret_cast<std::uint16_t*>(mem->base + desc),
                reinterpret_cast<std::uint16_t*>(mem->base + desc + avail)};
  mem->packed = {n, reinterpret_cast<virtio::PackedDesc*>(mem->base), reinterpret_cast<virtio::EventSuppress*>(mem->base + desc),
                 reinterpret_cast<virtio::EventSuppress*>(mem->base + desc + avail)};
  if (!zero_hdr_) {
    auto z = arena_.allocate(64, 64, "virtio-net zero header");
    if (!z) return with_context(z.error(), fmt::format("device '{}'", name()));
    zero_hdr_ = static_cast<std::byte*>(*z);
  }
  rings_[r] = std::move(mem);
  return rings_[r].get();
}

Result<void> VirtioUserPort::do_start() {
  for (std::size_t q = 0; q < rxq_.size(); ++q) {
    if (rxq_[q]->pool == nullptr) return fail("RX queue {} was not set up", q);
    txq_[q]->zero_hdr = iova(zero_hdr_);
  }
  const std::vector<QueueCommon*> queues = ring_queues();
  for (std::uint32_t r = 0; r < queues.size(); ++r) {
    RingMem& m = *rings_[r];
    std::memset(m.base, 0, m.bytes);  // a restart begins from index 0
    queues[r]->health.reset();
    queues[r]->init(m.split, m.packed, has(features_, feature::event_idx));
  }
  for (auto& q : rxq_) q->fill();
  call_fds_.assign(queues.size(), -1);
  if (auto ok = setup_device(false); !ok) return ok;
  for (std::uint16_t q = 0; q < rxq_.size(); ++q) {
    rxq_[q]->port_id = id();
    // Publish the exact instance type so the trampoline calls the template's burst directly.
    auto rx = [&]<bool P, bool I, bool M, bool O>() { return publish_if<VirtioRx<P, I, M, O>>(q, rxq_[q].get()); };
    auto tx = [&]<bool P, bool I, bool O>() { return publish_if<VirtioTx<P, I, O>>(q, txq_[q].get()); };
    if (!any_variant<4>(rx) || !any_variant<3>(tx)) std::abort();  // make_rx/make_tx built something else
  }
  if (listen_fd_ >= 0) {  // server=1: serve a backend that goes away and comes back
    monitor_stop_.store(false, std::memory_order_relaxed);
    monitor_ = std::thread([this] { monitor(); });
  }
  return {};
}

std::vector<QueueCommon*> VirtioUserPort::ring_queues() const {
  std::vector<QueueCommon*> queues;  // ring order: RX 0, TX 0, RX 1, TX 1 ...
  for (std::size_t q = 0; q < rxq_.size(); ++q) {
    queues.push_back(rxq_[q].get());
    queues.push_back(txq_[q].get());
  }
  return queues;
}

// The device part of a start, on the current connection. `resume`: the rings are running (a
// backend came back): same eventfds, and each split ring resumes at its used index -- what the
// old backend completed; chains it had taken without completing are offered again (a TX packet
// may go out twice, an RX buffer is refilled), none is lost. Packed rings were reset
// (reset_rings()) and start again from index 0, wrap counter 1.
Result<void> VirtioUserPort::setup_device(bool resume) {
  const std::vector<QueueCommon*> queues = ring_queues();
  // Status, then call fds for every RX ring then every TX ring, then features, as DPDK's
  // virtio_user (docs/vhost.md).
  if (auto ok = set_status(virtio::status::acknowledge | virtio::status::driver); !ok) return ok;
  for (std::uint32_t parity : {0u, 1u})
    for (std::uint32_t r = parity; r < queues.size(); r += 2) {
      if (!resume) {
        auto call = new_eventfd();
        if (!call) return std::unexpected(call.error());
        call_fds_[r] = *call;
      }
      if (auto ok = send(vu::Request::set_vring_call, r, call_fds_[r]); !ok) return ok;
    }
  if (auto ok = send(vu::Request::set_features, features_); !ok) return ok;
  if (auto ok = set_status(status_ | virtio::status::features_ok); !ok) return ok;
  // The whole arena is one region: guest address = our virtual address (IOVA = VA).
  vu::Message mt;
  mt.header = {static_cast<std::uint32_t>(vu::Request::set_mem_table), vu::flag_version, 8 + 32};
  mt.payload.mem.count = 1;
  mt.payload.mem.regions[0] = {iova(arena_.base()), arena_.size_bytes(), iova(arena_.base()), 0};
  const int arena_fd[] = {arena_.fd()};
  if (auto ok = vu::send_message(sock_, mt, arena_fd); !ok) return with_context(ok.error(), name());
  for (std::uint32_t r = 0; r < queues.size(); ++r) {
    const RingMem& m = *rings_[r];
    // acquire: pairs with the old backend's release store of used->idx.
    const std::uint16_t base = packed() ? 0x8000 : resume ? __atomic_load_n(&m.split.used[1], __ATOMIC_ACQUIRE) : 0;
    if (auto ok = send_state(vu::Request::set_vring_num, r, o_.queue_size); !ok) return ok;
    if (auto ok = send_state(vu::Request::set_vring_base, r, base); !ok) return ok;
    vu::Message a;
    a.header = {static_cast<std::uint32_t>(vu::Request::set_vring_addr), vu::flag_version, sizeof(vu::VringAddr)};
    a.payload.addr = {r, 0, iova(m.split.desc), iova(m.split.used), iova(m.split.avail), 0};
    if (auto ok = vu::send_message(sock_, a); !ok) return with_context(ok.error(), name());
    if (!resume) {
      auto kick = new_eventfd();
      if (!kick) return std::unexpected(kick.error());
      queues[r]->kick_fd = *kick;
      if (auto ok = kicks_->set_fd(r, *kick); !ok) return ok;
      queues[r]->notifier = kicks_.get();
      queues[r]->ring = r;
    }
    if (auto ok = send(vu::Request::set_vring_kick, r, queues[r]->kick_fd); !ok) return ok;
  }
  for (std::uint32_t r = 0; r < queues.size(); ++r)
    if (auto ok = send_state(vu::Request::set_vring_enable, r, 1); !ok) return ok;
  return set_status(status_ | virtio::status::driver_ok);
}

// A packed ring cannot resume where the old backend left it: once we reclaimed its used
// descriptors, the ring no longer shows how far the device got. So, as DPDK's virtio_user on a
// server-mode reconnection (virtqueue_rxvq/txvq_reset_packed), every ring starts over, with the
// lcores kept out by each queue's gate: what the old backend completed is reclaimed, the chains
// it still held are freed (TX packets it never completed count as dropped: reset_dropped,
// oerrors; filled RX buffers no burst took, and a mergeable packet cut short, in ierrors; empty
// RX buffers go back to the pool), the ring memory is zeroed, the driver engine is back at
// index 0 with both wrap counters 1, and RX is refilled.
void VirtioUserPort::reset_rings() {
  const std::vector<QueueCommon*> queues = ring_queues();
  for (QueueCommon* q : queues) q->gate.close();
  std::uint64_t tx_dropped = 0;
  for (std::uint32_t r = 0; r < queues.size(); ++r) {
    QueueCommon& q = *queues[r];
    const std::uint32_t dropped = q.release_mbufs();
    q.reset_dropped.add(dropped);
    if (r % 2 == 1) tx_dropped += dropped;
    RingMem& m = *rings_[r];
    std::memset(m.base, 0, m.bytes);
    q.health.reset();  // a ring the old backend broke works again with the new one
    q.init(m.split, m.packed, has(features_, feature::event_idx));
  }
  for (auto& q : rxq_) q->fill();
  for (QueueCommon* q : queues) q->gate.open();
  log(LogLevel::info, "{}: packed rings reset for the new backend; {} TX packets the old one did not complete dropped",
      name(), tx_dropped);
}

// server=1, control thread: notices the backend going away and serves the next one that
// connects. The lcores keep polling the rings meanwhile (they are in our memory); nothing moves
// until a backend is back. Packed rings are reset once a new backend has connected.
void VirtioUserPort::monitor() {
  while (!monitor_stop_.load(std::memory_order_relaxed)) {
    pollfd p{sock_, POLLRDHUP, 0};
    if (::poll(&p, 1, 100) != 1 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0) continue;
    log(LogLevel::warning, "{}: the vhost backend went away; waiting for it on '{}'", name(), o_.path);
    bool rings_ready = !packed();  // split rings resume at their used index
    for (;;) {
      ::close(sock_);
      sock_ = -1;
      pollfd l{listen_fd_, POLLIN, 0};
      while (sock_ < 0 && !monitor_stop_.load(std::memory_order_relaxed))
        if (::poll(&l, 1, 100) == 1) sock_ = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (sock_ < 0) return;  // stopping
      if (!rings_ready) {
        reset_rings();
        rings_ready = true;
      }
      reconnecting_ = true;
      auto ok = negotiate();
      if (ok) ok = setup_device(true);
      reconnecting_ = false;
      if (ok) break;
      log(LogLevel::warning, "{}: the reconnected backend: {}", name(), ok.error().message);
    }
    log(LogLevel::info, "{}: the vhost backend is back", name());
  }
}

void VirtioUserPort::stop_monitor() {
  monitor_stop_.store(true, std::memory_order_relaxed);
  if (monitor_.joinable()) monitor_.join();
}

void VirtioUserPort::do_stop() {
  stop_monitor();  // the socket is ours alone from here
  // DPDK's order: disable every ring, then GET_VRING_BASE for each (it stops the backend's ring).
  const auto rings = static_cast<std::uint32_t>(2 * rxq_.size());
  for (std::uint32_t r = 0; r < rings; ++r) (void)send_state(vu::Request::set_vring_enable, r, 0);
  for (std::uint32_t r = 0; r < rings; ++r) {
    vu::Message m;
    m.header = {static_cast<std::uint32_t>(vu::Request::get_vring_base), vu::flag_version, sizeof(vu::VringState)};
    m.payload.state = {r, 0};
    if (!vu::send_message(sock_, m) || !vu::recv_reply(sock_, vu::Request::get_vring_base, sizeof(vu::VringState))) {
      log(LogLevel::warning, "{}: the backend did not answer GET_VRING_BASE for ring {}", name(), r);
      break;
    }
  }
  (void)set_status(0);
  if (kicks_ != nullptr) (void)kicks_->restart();  // drops its copies of the kick fds
  for (int fd : eventfds_) ::close(fd);
  eventfds_.clear();
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
      return fail("device '{}': key 'path' is required (the vhost-user socket, e.g. path=/tmp/vhost0)", args.name());
    auto queues = args.get_uint("queues", 1, 1, 8);
    if (!queues) return std::unexpected(queues.error());
    auto size = args.get_uint("queue_size", 256, 32, 4096);
    if (!size) return std::unexpected(size.error());
    auto packed = args.get_bool("packed_vq", false);
    auto in_order = args.get_bool("in_order", true);
    auto mrg = args.get_bool("mrg_rxbuf", true);
    auto server = args.get_bool("server", false);
    auto csum = args.get_bool("csum", false);
    auto tso = args.get_bool("tso", false);
    auto event_idx = args.get_bool("event_idx", true);
    auto cq = args.get_bool("cq", false);                  // see the param help: nothing to do
    auto vectorized = args.get_bool("vectorized", false);  // likewise
    for (const auto* b : {&packed, &in_order, &mrg, &server, &csum, &tso, &event_idx, &cq, &vectorized})
      if (!*b) return std::unexpected(b->error());
    if (auto iface = args.get("iface"))
      return fail("device '{}': key 'iface' value '{}': a vhost-kernel tap name, and this driver speaks vhost-user "
                  "only; give path=<vhost-user unix socket> without iface",
                  args.name(), *iface);
    if (struct stat st {}; ::stat(o.path.c_str(), &st) == 0 && S_ISCHR(st.st_mode))
      return fail("device '{}': key 'path' value '{}' is a character device (vhost-kernel or vhost-vdpa), and this "
                  "driver speaks vhost-user only; expected a unix socket",
                  args.name(), o.path);
    if (auto text = args.get("mac")) {
      auto mac = MacAddress::parse(*text);
      if (!mac)
        return fail("device '{}': key 'mac' value '{}': expected six hex bytes xx:xx:xx:xx:xx:xx ({})", args.name(),
                    *text, mac.error().message);
      o.mac = *mac;
    }
    auto speed = args.get_uint("speed", 10000, 0, UINT32_MAX);
    if (!speed) return std::unexpected(speed.error());
    if (std::find(dpdk_link_speeds.begin(), dpdk_link_speeds.end(), *speed) == dpdk_link_speeds.end())
      return fail("device '{}': key 'speed' value {}: expected a link speed in Mbps that DPDK accepts: {}", args.name(),
                  *speed, fmt::join(dpdk_link_speeds, ", "));
    o.speed_mbps = static_cast<std::uint32_t>(*speed);
    if (!*packed && !std::has_single_bit(*size))
      return fail("device '{}': key 'queue_size' value {}: split rings need a power of two", args.name(), *size);
    if (env.arena == nullptr) return fail("device '{}': needs the application's shared arena", args.name());
    o.queues = static_cast<std::uint16_t>(*queues);
    o.queue_size = static_cast<std::uint32_t>(*size);
    o.packed = *packed;
    o.in_order = *in_order;
    o.mrg = *mrg;
    o.server = *server;
    o.csum = *csum;
    o.tso = *tso;
    o.event_idx = *event_idx;
    if (o.tso && !o.csum) return fail("device '{}': key 'tso' needs csum=1 (virtio 1.2 §5.1.3.1)", args.name());
    auto port = std::make_unique<VirtioUserPort>(args.name(), std::move(o), *env.arena);
    if (auto ok = port->connect_and_negotiate(); !ok) return std::unexpected(ok.error());
    return port;
  }
};

}  // namespace

std::unique_ptr<Driver> make_virtio_user_driver() { return std::make_unique<VirtioUserDriver>(); }

}  // namespace ws
