// SPDX-License-Identifier: BSD-3-Clause
// The kernel's vhost-net as a virtio-net device (DPDK's virtio_user "exception path"): one
// /dev/vhost-net fd per queue pair, whose kernel thread moves packets between our rings and a tap
// interface. The rings and buffers are in our arena, given to the kernel as one memory region by
// virtual address (IOVA = VA, as with vhost-user), and kicks are eventfds (VhostNetHotPath). The
// header offloads are the tap's
// (TUNSETOFFLOAD), not vhost-net's: it moves the 12-byte header between the ring and the tap as
// it is.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ws/core/arena.hpp"
#include "ws/core/result.hpp"
#include "ws/virtio/net/queues.hpp"

namespace ws::virtio {

// vhost-net's hot path: buffers by virtual address, as vhost-user's, and a kick is an eventfd
// write by the lcore itself, as DPDK's vhost-kernel backend does. Unlike a vhost-user backend's,
// the eventfd is ours alone: the kernel only waits on it and never reads it, changes its flags or
// fills it, so a non-blocking write cannot block or fail (the counter would need 2^64 kicks).
// A Notifier thread, needed against a vhost-user peer, would add a thread wake-up to each kick
// (bench/README.md, "virtio_user over vhost-net").
struct VhostNetHotPath {
  static std::uint64_t buffer_addr(const Mbuf* m) noexcept { return reinterpret_cast<std::uintptr_t>(m->buf_addr); }
  static void notify(QueueCommon& q) noexcept {
    if (q.notify.kick_fd < 0) return;
    const std::uint64_t one = 1;
    (void)!::write(q.notify.kick_fd, &one, sizeof one);
  }
};

// vhost-net's misc device (include/linux/miscdevice.h: VHOST_NET_MINOR).
inline constexpr unsigned misc_major = 10, vhost_net_minor = 238;
// The header a tap carries with VERSION_1 or MRG_RXBUF (virtio 1.2 §5.1.6: with num_buffers).
inline constexpr int vhost_net_hdr_bytes = 12;

// How a virtio_user `path` names the kernel's vhost-net: a character device 10:238 (whatever
// its name), or the conventional /dev/vhost-net even when it is missing (the module not loaded:
// the open then says so). `other_chr`: a character device that is not vhost-net (vhost-vdpa).
struct VhostPathKind {
  bool vhost_net = false;
  bool other_chr = false;
  bool exists = false;
};
VhostPathKind classify_vhost_path(const std::string& path);

// The memory regions vhost-net takes (the vhost module's max_mem_regions, 64 by default), read
// from `param` (a sysfs file); an error names `device`, `path` and the file.
Result<unsigned> vhost_max_mem_regions(std::string_view device, const std::string& path,
                                       const std::string& param = "/sys/module/vhost/parameters/max_mem_regions");

// The TUN_F_* offload flags a tap gets for `features` (what we accept from it: GUEST_CSUM,
// GUEST_TSO4/6), as DPDK's vhost-kernel backend sets them.
unsigned tap_offload_flags(std::uint64_t features);

// The tap's queues, one fd per queue pair: IFF_TAP|IFF_NO_PI|IFF_VNET_HDR (and IFF_MULTI_QUEUE
// for more than one), the header size (TUNSETVNETHDRSZ, 12) and the largest send buffer. The
// tap lives while they are open. Errors name `device`, the key and `path`; EBUSY says the tap
// is taken.
struct TapQueues {
  std::vector<int> fds;  // the caller closes them
  std::string name;      // %d filled in
};
Result<TapQueues> open_tap_queues(std::string_view device, const std::string& path, const std::string& iface,
                                  std::uint16_t pairs, const std::string& tun_path = "/dev/net/tun");

struct VhostNetConfig {
  std::string name;             // the device, for messages
  std::string path;             // the vhost-net character device
  std::string iface = "tap%d";  // the tap's name (a %d is filled in by the kernel)
  std::uint16_t queue_pairs = 1;
  std::uint32_t queue_size = 256;
  std::uint64_t wanted = 0;  // features taken when offered (VERSION_1 is required)
  std::string tun_path = "/dev/net/tun";
  std::string mem_regions_param = "/sys/module/vhost/parameters/max_mem_regions";
};

class VhostNetTransport {
 public:
  // Opens one vhost-net fd per queue pair (SET_OWNER on each) and the tap (one fd per pair,
  // IFF_MULTI_QUEUE with more than one), and negotiates: vhost-net's features, plus the tap's
  // header offloads and MQ, which vhost-net passes through without knowing them.
  static Result<std::unique_ptr<VhostNetTransport>> open(VhostNetConfig c);
  ~VhostNetTransport();
  VhostNetTransport(const VhostNetTransport&) = delete;
  VhostNetTransport& operator=(const VhostNetTransport&) = delete;

  std::uint64_t features() const { return features_; }
  const std::string& iface() const { return iface_; }  // the tap's name, %d filled in

  // Per queue pair: SET_FEATURES, SET_MEM_TABLE (the arena), per ring CALL, NUM, BASE, ADDR,
  // KICK, then the tap as both rings' backend. The tap gets its header size and offloads.
  Result<void> setup_device(const Arena& arena, std::span<QueueCommon* const> queues, std::span<const RingArea> areas);
  // Detaches the tap from every ring (the kernel thread stops using our memory), reads each
  // ring's base back, and closes the eventfds.
  void stop_device();

 private:
  explicit VhostNetTransport(VhostNetConfig c) : c_(std::move(c)) {}
  Result<void> open_fds();
  Result<void> negotiate();
  Result<void> setup_pair(std::uint32_t q, const Arena& arena, std::span<QueueCommon* const> queues,
                          std::span<const RingArea> areas);
  Result<void> setup_ring(std::uint32_t q, std::uint32_t index, QueueCommon& queue, const RingArea& area);
  Result<void> ioctl_checked(int fd, unsigned long request, void* arg, const char* what) const;
  Result<int> new_eventfd();

  VhostNetConfig c_;
  std::string iface_;
  std::vector<int> vhost_fds_;  // one per queue pair
  std::vector<int> tap_fds_;    // one per queue pair
  std::vector<int> eventfds_;
  std::uint64_t offered_ = 0;  // vhost-net's own features (SET_FEATURES takes only these)
  std::uint64_t features_ = 0;
  bool running_ = false;
  std::vector<QueueCommon*> kicked_;  // the queues given a kick fd, forgotten at stop
};

}  // namespace ws::virtio
