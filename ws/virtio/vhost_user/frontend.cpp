// SPDX-License-Identifier: BSD-3-Clause
// vhost-user frontend: messages in DPDK 22.11 virtio_user's order, negotiation, device setup.
#include "ws/virtio/vhost_user/frontend.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ws/core/log.hpp"
#include "ws/virtio/features.hpp"
#include "ws/virtio/vhost_user/protocol.hpp"

namespace ws::virtio {
namespace {
namespace vu = vhost_user;
}  // namespace

VhostFrontend::~VhostFrontend() {
  kicks_.reset();  // stops the notifier thread before the fds it holds copies of go
  for (int fd : eventfds_) ::close(fd);
  if (sock_ >= 0) ::close(sock_);
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(c_.path.c_str());
  }
}

Result<void> VhostFrontend::context(const Result<void>& r) const {
  if (r) return {};
  return with_context(r.error(), fmt::format("device '{}'", c_.name));
}

Result<void> VhostFrontend::send(vu::Request r, std::uint64_t u64, int fd) {
  vu::Message m;
  m.header = {static_cast<std::uint32_t>(r), vu::flag_version, 8};
  m.payload.u64 = u64;
  const int fds[] = {fd};
  return context(vu::send_message(sock_, m, fd >= 0 ? std::span<const int>(fds) : std::span<const int>()));
}

Result<void> VhostFrontend::send_state(vu::Request r, std::uint32_t index, std::uint32_t num) {
  vu::Message m;
  m.header = {static_cast<std::uint32_t>(r), vu::flag_version, sizeof(vu::VringState)};
  m.payload.state = {index, num};
  return context(vu::send_message(sock_, m));
}

Result<std::uint64_t> VhostFrontend::get_u64(vu::Request r) {
  vu::Message m;
  m.header = {static_cast<std::uint32_t>(r), vu::flag_version, 0};
  if (auto ok = vu::send_message(sock_, m); !ok) return with_context(ok.error(), fmt::format("device '{}'", c_.name));
  auto reply = vu::recv_reply(sock_, r, 8);
  if (!reply) return with_context(reply.error(), fmt::format("device '{}'", c_.name));
  return reply->payload.u64;
}

Result<void> VhostFrontend::set_status(std::uint8_t s) {
  if (!has(protocol_, vu::protocol::status)) return {};
  status_ = s;
  return send(vu::Request::set_status, s);
}

Result<int> VhostFrontend::new_eventfd() {
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return fail("device '{}': eventfd: {}", c_.name, std::strerror(errno));
  eventfds_.push_back(fd);
  return fd;
}

Result<void> VhostFrontend::connect() {
  if (c_.server) {
    auto listening = vu::listen_unix(c_.path);
    if (!listening) return with_context(listening.error(), fmt::format("device '{}': key 'path'", c_.name));
    listen_fd_ = *listening;  // kept: a backend that goes away may come back
    pollfd p{listen_fd_, POLLIN, 0};
    std::printf("virtio_user %s: waiting for the vhost backend to connect to %s\n", c_.name.c_str(), c_.path.c_str());
    std::fflush(stdout);
    sock_ = ::poll(&p, 1, 30000) == 1 ? ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC) : -1;
    if (sock_ < 0)
      return fail("device '{}': key 'server'=1: no backend connected to '{}' within 30 s", c_.name, c_.path);
    return negotiate(false);
  }
  auto fd = vu::connect_unix(c_.path);
  if (!fd) return fail("device '{}': key 'path': {} (is the vhost backend running?)", c_.name, fd.error().message);
  sock_ = *fd;
  return negotiate(false);
}

Result<void> VhostFrontend::negotiate(bool reconnecting) {
  if (kicks_ == nullptr) {
    auto kicks = Notifier::create(c_.name, 2u * c_.queue_pairs);
    if (!kicks) return std::unexpected(kicks.error());
    kicks_ = std::move(*kicks);
  }
  // DPDK 22.11 virtio_user's order (docs/vhost.md, the message flow).
  vu::Message owner;
  owner.header = {static_cast<std::uint32_t>(vu::Request::set_owner), vu::flag_version, 0};
  if (auto ok = context(vu::send_message(sock_, owner)); !ok) return ok;
  auto offered = get_u64(vu::Request::get_features);
  if (!offered) return std::unexpected(offered.error());
  if (!has(*offered, feature::version_1))
    return fail("device '{}': the backend offers features {:#x} without VERSION_1 (bit 32)", c_.name, *offered);
  if (has(*offered, feature::protocol_features)) {
    auto proto = get_u64(vu::Request::get_protocol_features);
    if (!proto) return std::unexpected(proto.error());
    protocol_ = *proto & (bit(vu::protocol::mq) | bit(vu::protocol::status));
    if (auto ok = send(vu::Request::set_protocol_features, protocol_); !ok) return ok;
  }
  return choose_features(*offered, reconnecting);
}

// First connection: take what we want of what is offered. Reconnection: the rings already run
// with features_, so the new backend must offer all of them.
Result<void> VhostFrontend::choose_features(std::uint64_t offered, bool reconnecting) {
  if (reconnecting) {
    if ((features_ & ~offered) != 0)
      return fail("device '{}': the reconnected backend offers {:#x}, without {:#x} that the rings run with", c_.name,
                  offered, features_ & ~offered);
    return {};
  }
  features_ = (c_.wanted | bit(feature::version_1)) & offered;
  if (c_.queue_pairs > 1 && !has(features_, feature::mq))
    return fail("device '{}': key 'queues' value {}: the backend does not offer MQ", c_.name, c_.queue_pairs);
  if (c_.queue_pairs > 1 && has(protocol_, vu::protocol::mq)) {
    auto qn = get_u64(vu::Request::get_queue_num);
    if (!qn) return std::unexpected(qn.error());
    if (*qn < c_.queue_pairs)
      return fail("device '{}': key 'queues' value {}: the backend serves {} queue pairs", c_.name, c_.queue_pairs,
                  *qn);
  }
  if (has(c_.wanted, feature::ring_packed) && !has(features_, feature::ring_packed))
    log(LogLevel::warning, "{}: the backend does not offer packed rings; using split rings", c_.name);
  log(LogLevel::info, "{}: backend offers features {:#x}, negotiated {:#x}", c_.name, offered, features_);
  return {};
}

Result<void> VhostFrontend::setup_device(const Arena& arena, std::span<QueueCommon* const> queues,
                                         std::span<const RingArea> areas, bool resume) {
  const auto rings = static_cast<std::uint32_t>(queues.size());
  if (!resume) {
    call_fds_.assign(rings, -1);
    kick_fds_.assign(rings, -1);
  }
  // Status, then call fds for every RX ring then every TX ring, then features, as DPDK's
  // virtio_user (docs/vhost.md).
  if (auto ok = set_status(status::acknowledge | status::driver); !ok) return ok;
  for (std::uint32_t parity : {0u, 1u})
    for (std::uint32_t r = parity; r < rings; r += 2) {
      if (!resume) {
        auto call = new_eventfd();
        if (!call) return std::unexpected(call.error());
        call_fds_[r] = *call;
      }
      if (auto ok = send(vu::Request::set_vring_call, r, call_fds_[r]); !ok) return ok;
    }
  if (auto ok = send(vu::Request::set_features, features_); !ok) return ok;
  if (auto ok = set_status(status_ | status::features_ok); !ok) return ok;
  // The whole arena is one region: guest address = our virtual address (IOVA = VA).
  const auto va = [](const void* p) { return reinterpret_cast<std::uint64_t>(p); };
  vu::Message mt;
  mt.header = {static_cast<std::uint32_t>(vu::Request::set_mem_table), vu::flag_version, 8 + 32};
  mt.payload.mem.count = 1;
  mt.payload.mem.regions[0] = {va(arena.base()), arena.size_bytes(), va(arena.base()), 0};
  const int arena_fd[] = {arena.fd()};
  if (auto ok = context(vu::send_message(sock_, mt, arena_fd)); !ok) return ok;
  const bool packed = has(features_, feature::ring_packed);
  for (std::uint32_t r = 0; r < rings; ++r) {
    const RingArea& a = areas[r];
    // acquire: pairs with the old backend's release store of used->idx.
    const std::uint16_t base = packed ? 0x8000
                               : resume
                                   ? __atomic_load_n(reinterpret_cast<std::uint16_t*>(a.device) + 1, __ATOMIC_ACQUIRE)
                                   : 0;
    if (auto ok = send_state(vu::Request::set_vring_num, r, c_.queue_size); !ok) return ok;
    if (auto ok = send_state(vu::Request::set_vring_base, r, base); !ok) return ok;
    vu::Message addr;
    addr.header = {static_cast<std::uint32_t>(vu::Request::set_vring_addr), vu::flag_version, sizeof(vu::VringAddr)};
    addr.payload.addr = {r, 0, va(a.desc), va(a.device), va(a.driver), 0};
    if (auto ok = context(vu::send_message(sock_, addr)); !ok) return ok;
    if (!resume) {
      auto kick = new_eventfd();
      if (!kick) return std::unexpected(kick.error());
      kick_fds_[r] = *kick;
      if (auto ok = kicks_->set_fd(r, *kick); !ok) return ok;
      queues[r]->notify.notifier = kicks_.get();
      queues[r]->ring = r;
    }
    if (auto ok = send(vu::Request::set_vring_kick, r, kick_fds_[r]); !ok) return ok;
  }
  for (std::uint32_t r = 0; r < rings; ++r)
    if (auto ok = send_state(vu::Request::set_vring_enable, r, 1); !ok) return ok;
  return set_status(status_ | status::driver_ok);
}

void VhostFrontend::stop_device(std::uint32_t rings) {
  for (std::uint32_t r = 0; r < rings; ++r) (void)send_state(vu::Request::set_vring_enable, r, 0);
  for (std::uint32_t r = 0; r < rings; ++r) {
    vu::Message m;
    m.header = {static_cast<std::uint32_t>(vu::Request::get_vring_base), vu::flag_version, sizeof(vu::VringState)};
    m.payload.state = {r, 0};
    if (!vu::send_message(sock_, m) || !vu::recv_reply(sock_, vu::Request::get_vring_base, sizeof(vu::VringState))) {
      log(LogLevel::warning, "{}: the backend did not answer GET_VRING_BASE for ring {}", c_.name, r);
      break;
    }
  }
  (void)set_status(0);
  if (kicks_ != nullptr) (void)kicks_->restart();  // drops its copies of the kick fds
  for (int fd : eventfds_) ::close(fd);
  eventfds_.clear();
  call_fds_.clear();  // call_fd() answers -1 until the next start
}

bool VhostFrontend::backend_gone(int timeout_ms) {
  pollfd p{sock_, POLLRDHUP, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

bool VhostFrontend::backend_closed() const {
  if (sock_ < 0) return true;
  pollfd p{sock_, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

bool VhostFrontend::accept_backend(const std::atomic<bool>& stop) {
  ::close(sock_);
  sock_ = -1;
  pollfd l{listen_fd_, POLLIN, 0};
  while (sock_ < 0 && !stop.load(std::memory_order_relaxed))
    if (::poll(&l, 1, 100) == 1) sock_ = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  return sock_ >= 0;
}

}  // namespace ws::virtio
