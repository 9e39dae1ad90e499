// SPDX-License-Identifier: BSD-3-Clause
// The vhost-user backend state machine (QEMU's vhost-user protocol, in the order DPDK 22.11's
// virtio_user drives it): features, memory table (mmap of each region's fd), per-ring setup,
// status, REPLY_ACK. Control thread only; the data path learns of rings through RingListener.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "ws/core/result.hpp"
#include "ws/virtio/features.hpp"
#include "ws/virtio/ring/guest_memory.hpp"
#include "ws/virtio/vhost_user/mapping_guard.hpp"
#include "ws/virtio/vhost_user/peer_fd.hpp"
#include "ws/virtio/vhost_user/protocol.hpp"

namespace ws::virtio {

// One ring as the frontend configured it.
struct VringSetup {
  std::uint32_t num = 0;
  vhost_user::VringAddr addr{};
  bool addr_set = false;
  std::uint16_t base = 0;  // SET_VRING_BASE (packed: bit 15 wrap counter)
  int kick_fd = -1;
  int call_fd = -1;
  int err_fd = -1;
  bool kick_set = false;  // SET_VRING_KICK seen (with an fd, or none: polling)
  bool enabled = false;
  bool started = false;  // addresses translated: at SET_VRING_KICK once the ring is set up
  bool fresh = true;     // not started since the device was reset (connection, RESET_OWNER, status 0)
  std::byte* desc = nullptr;
  std::byte* avail = nullptr;  // packed: driver event area
  std::byte* used = nullptr;   // packed: device event area
};

// What the driver does when a ring starts or stops. Control thread; implementations hand the
// ring to (or take it back from) the polling lcore.
class RingListener {
 public:
  virtual ~RingListener() = default;
  // `fresh`: the first start since the device was reset (a new frontend, RESET_OWNER, status 0);
  // otherwise a restart (a new memory table, new features, a kick on a running ring).
  virtual void ring_started(std::uint32_t ring, bool fresh) = 0;
  // Stops the data path on the ring and returns the next avail index (GET_VRING_BASE).
  virtual std::uint16_t ring_stopped(std::uint32_t ring) = 0;
  // SET_VRING_CALL, at any time (QEMU sends it after SET_VRING_KICK, and again whenever the
  // guest masks or unmasks the vector): `fd` (-1: none) is where the ring's interrupts go now.
  // The backend keeps owning `fd`.
  virtual void ring_call_changed(std::uint32_t ring, int fd) = 0;
};

struct BackendOptions {
  std::string name = "vhost";     // device name for messages
  std::uint32_t queue_pairs = 1;  // rings = 2 * queue_pairs
  std::uint64_t features = backend_offered;
  std::uint64_t protocol_features =
      bit(vhost_user::protocol::mq) | bit(vhost_user::protocol::reply_ack) | bit(vhost_user::protocol::status);
  // Most memory a frontend may share with us, all regions together: what it costs us is address
  // space and page tables, and it chooses the sizes.
  std::uint64_t max_mem_bytes = std::uint64_t{64} << 30;
  std::string max_mem_key = "max-mem-mb";  // what an error tells the user to raise
  // Closes the frontend's fds off the control thread (close() of a peer's fd can block); null:
  // closed where they are let go (tests, fuzzers).
  FdReaper* reaper = nullptr;
};

class VhostBackend {
 public:
  explicit VhostBackend(BackendOptions options, RingListener* listener = nullptr);
  ~VhostBackend();
  VhostBackend(const VhostBackend&) = delete;
  VhostBackend& operator=(const VhostBackend&) = delete;

  // Applies one decoded message, taking the fds it needs from `fds`. Returns whether `reply`
  // must be sent (a GET, or REPLY_ACK). An error means the frontend misbehaved: send `reply` if
  // it was requested (failure ack) and close the connection. Every fd is checked first (kick,
  // call, err: eventfds; memory regions: tmpfs or hugetlbfs files), without a call that could
  // block on it; one of another type refuses the message.
  Result<bool> handle(const vhost_user::Message& msg, vhost_user::FdSet& fds, vhost_user::Message& reply);

  // Frontend gone (or RESET_OWNER): stop rings, unmap memory, close fds, forget negotiation.
  void reset();

  std::uint64_t features() const { return features_; }
  std::uint64_t protocol_features() const { return protocol_; }
  std::uint8_t status() const { return status_; }
  std::uint32_t ring_count() const { return static_cast<std::uint32_t>(rings_.size()); }
  const VringSetup& ring(std::uint32_t i) const { return rings_[i]; }
  const GuestMemory& memory() const { return memory_; }
  // The frontend shrank memory it shared (a fault was caught, see MappingGuard): the memory now
  // reads as zeros; the connection must be closed. Any thread.
  bool memory_lost() const { return memory_lost_.load(std::memory_order_acquire); }
  bool packed() const { return has(features_, feature::ring_packed); }
  // DPDK's rule: rings 0 and 1 started and enabled with kick and call, and DRIVER_OK if STATUS.
  bool device_ready() const;

 private:
  Result<void> set_mem_table(const vhost_user::MemTable& t, vhost_user::FdSet& fds);
  Result<void> set_features(std::uint64_t features);
  // Starts ring i if everything it needs has come (kick, size, addresses, memory, features), in
  // whatever order the frontend sent it; a running ring is restarted (translated again).
  Result<void> start_ring_when_ready(std::uint32_t i);
  Result<void> start_ring(std::uint32_t i);
  void reset_device();
  Result<std::uint32_t> ring_index(const vhost_user::Message& msg, std::uint64_t index) const;
  Result<void> check_fds(const vhost_user::Message& msg, const vhost_user::FdSet& fds) const;
  void close_fd(int& fd) noexcept;
  void stop_ring(std::uint32_t i);
  void unmap();
  Result<bool> apply(const vhost_user::Message& msg, vhost_user::FdSet& fds, vhost_user::Message& reply);

  struct Mapping {
    void* base;
    std::size_t len;
    MappingGuard guard;  // released before the unmap
  };
  // The steps of set_mem_table.
  Result<void> check_mem_total(const vhost_user::MemTable& t) const;
  Result<void> map_region(const vhost_user::MemRegionDesc& d, std::uint32_t i, int fd, GuestMemory& next,
                          std::vector<Mapping>& maps);
  static void unmap_all(std::vector<Mapping>& maps) noexcept;
  Result<void> use_memory(const GuestMemory& next, std::vector<Mapping> maps);
  // The requests apply() does not answer in a line.
  Result<void> set_protocol_features(std::uint64_t f);
  void reset_owner();
  Result<void> set_status(std::uint64_t s);
  Result<void> set_vring_num(const vhost_user::Message& msg);
  Result<void> set_vring_addr(const vhost_user::Message& msg);
  Result<void> set_vring_base(const vhost_user::Message& msg);
  Result<bool> get_vring_base(const vhost_user::Message& msg, vhost_user::Message& reply);
  Result<void> set_vring_fd(const vhost_user::Message& msg, vhost_user::FdSet& fds);
  Result<void> set_vring_enable(const vhost_user::Message& msg);
  BackendOptions options_;
  RingListener* listener_;
  std::uint64_t features_ = 0;
  std::uint64_t protocol_ = 0;
  bool features_set_ = false;
  bool owner_ = false;
  std::uint8_t status_ = 0;
  GuestMemory memory_;
  std::vector<Mapping> mappings_;
  std::atomic<bool> memory_lost_{false};
  std::vector<VringSetup> rings_;
};

}  // namespace ws::virtio
