// SPDX-License-Identifier: BSD-3-Clause
// The vhost-user frontend, beside the backend (backend.hpp): connecting (or listening, in
// server mode), the feature negotiation and the device setup in DPDK 22.11 virtio_user's message
// order (docs/vhost.md), the device stop, and the steps of a reconnection. It knows rings only by
// their areas and the queues' notification fields; virtio_user's port drives it.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ws/core/arena.hpp"
#include "ws/virtio/net/queues.hpp"
#include "ws/virtio/vhost_user/notifier.hpp"
#include "ws/virtio/vhost_user/protocol.hpp"

namespace ws::virtio {

// A vhost-user frontend's hot path: the whole arena is one memory region whose guest address is
// our virtual address (IOVA = VA, whatever the arena's own IOVA mode), and kicks go through a
// Notifier, which writes the backend's eventfds from its thread (a write from the lcore could
// block: the backend shares the open file description).
struct VhostUserHotPath {
  static std::uint64_t buffer_addr(const Mbuf* m) noexcept { return reinterpret_cast<std::uintptr_t>(m->buf_addr); }
  static void notify(QueueCommon& q) noexcept {
    if (q.notify.notifier != nullptr) q.notify.notifier->signal(q.ring);
  }
};

struct FrontendConfig {
  std::string name;     // the device, for messages
  std::string path;     // the unix socket
  bool server = false;  // listen on path and wait for the backend
  std::uint16_t queue_pairs = 1;
  std::uint32_t queue_size = 256;
  std::uint64_t wanted = 0;  // features taken when offered (VERSION_1 is required)
};

class VhostFrontend {
 public:
  explicit VhostFrontend(FrontendConfig c) : c_(std::move(c)) {}
  ~VhostFrontend();
  VhostFrontend(const VhostFrontend&) = delete;
  VhostFrontend& operator=(const VhostFrontend&) = delete;

  // Connects (server: listens and waits 30 s for the backend) and negotiates.
  Result<void> connect();
  // SET_OWNER, features, protocol features. The first time, features() becomes what we want of
  // what is offered; on a reconnection the new backend must offer every running feature.
  Result<void> negotiate(bool reconnecting);
  std::uint64_t features() const { return features_; }
  bool server() const { return listen_fd_ >= 0; }
  // Ring r's call eventfd while the device runs (-1 before setup_device and after stop_device).
  int call_fd(std::uint32_t r) const { return r < call_fds_.size() ? call_fds_[r] : -1; }

  // The device part of a start: status, call fds for every RX ring then every TX ring,
  // features, the arena as the one memory region, each ring's size, base, addresses and kick
  // fd, enable, DRIVER_OK. `queues[r]` gets its notification target (our Notifier) and index.
  // `resume`: the rings are running (a backend came back): same eventfds, and each split ring
  // resumes at its used index; packed rings were reset by the caller and start at 0x8000.
  Result<void> setup_device(const Arena& arena, std::span<QueueCommon* const> queues, std::span<const RingArea> areas,
                            bool resume);
  // DPDK's order: disable every ring, then GET_VRING_BASE for each (it stops the backend's
  // ring), status 0; the eventfds are closed and the notifier forgets them.
  void stop_device(std::uint32_t rings);

  // Server mode, reconnection: whether the backend went away within `timeout_ms`; then a new
  // backend accepted (false when `stop` was set first).
  bool backend_gone(int timeout_ms);
  // Client mode: whether the backend has closed its end (a poll, no wait), as DPDK's
  // virtio_user checks the socket when asked for the link.
  bool backend_closed() const;
  bool accept_backend(const std::atomic<bool>& stop);

 private:
  Result<void> send(vhost_user::Request r, std::uint64_t u64, int fd = -1);
  Result<void> send_state(vhost_user::Request r, std::uint32_t index, std::uint32_t num);
  Result<std::uint64_t> get_u64(vhost_user::Request r);
  Result<void> set_status(std::uint8_t s);
  Result<int> new_eventfd();
  Result<void> choose_features(std::uint64_t offered, bool reconnecting);
  Result<void> context(const Result<void>& r) const;

  FrontendConfig c_;
  int sock_ = -1;
  int listen_fd_ = -1;  // server mode: kept for a backend that reconnects
  std::uint64_t features_ = 0;
  std::uint64_t protocol_ = 0;
  std::uint8_t status_ = 0;
  std::vector<int> call_fds_;
  std::vector<int> kick_fds_;
  std::vector<int> eventfds_;
  std::unique_ptr<Notifier> kicks_;  // writes the kick fds for the lcores (made in negotiate())
};

}  // namespace ws::virtio
