// SPDX-License-Identifier: BSD-3-Clause
// The vhost-net transport: the vhost ioctls in DPDK 22.11 vhost-kernel's order, and the tap.
#include "ws/virtio/transport/vhost_net.hpp"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
// The legacy vring helpers in linux/virtio_ring.h are C only (void* assignments).
#define VIRTIO_RING_NO_LEGACY 1
#include <linux/vhost.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>

#include "ws/core/log.hpp"
#include "ws/virtio/features.hpp"

namespace ws::virtio {
namespace {

// What the tap gives beside vhost-net's own features, as DPDK's vhost-kernel backend adds them:
// the header offloads (the tap, not vhost-net, reads and writes the header) and MQ (one
// vhost-net fd and one tap queue per pair).
constexpr std::uint64_t tap_header_offloads = bit(feature::csum) | bit(feature::guest_csum) | bit(feature::host_tso4) |
                                              bit(feature::host_tso6) | bit(feature::guest_tso4) |
                                              bit(feature::guest_tso6);

// The header is the ring's and the tap's to agree on; vhost-net's own bit 27 (VHOST_NET_F_VIRTIO_NET_HDR,
// "vhost-net adds the header") is never asked for, nor ACCESS_PLATFORM (no IOTLB here).
constexpr std::uint64_t never_asked = bit(feature::any_layout) | bit(feature::access_platform);

Result<void> setup_tap(std::string_view device, const std::string& iface, int fd);

}  // namespace

VhostPathKind classify_vhost_path(const std::string& path) {
  VhostPathKind k;
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    k.vhost_net = path == "/dev/vhost-net";
    return k;
  }
  k.exists = true;
  if (!S_ISCHR(st.st_mode)) return k;
  k.vhost_net = major(st.st_rdev) == misc_major && minor(st.st_rdev) == vhost_net_minor;
  k.other_chr = !k.vhost_net;
  return k;
}

Result<unsigned> vhost_max_mem_regions(std::string_view device, const std::string& path, const std::string& param) {
  std::ifstream in(param);
  unsigned n = 0;
  if (!(in >> n))
    return fail("device '{}': key 'path' value '{}': cannot read vhost-net's memory region limit from {}", device, path,
                param);
  return n;
}

unsigned tap_offload_flags(std::uint64_t f) {
  if (!has(f, feature::guest_csum)) return 0;
  unsigned o = TUN_F_CSUM;
  if (has(f, feature::guest_tso4)) o |= TUN_F_TSO4;
  if (has(f, feature::guest_tso6)) o |= TUN_F_TSO6;
  return o;
}

VhostNetTransport::~VhostNetTransport() {
  if (running_) stop_device();
  for (int fd : eventfds_) ::close(fd);
  for (int fd : vhost_fds_) ::close(fd);
  for (int fd : tap_fds_) ::close(fd);
}

Result<void> VhostNetTransport::ioctl_checked(int fd, unsigned long request, void* arg, const char* what) const {
  if (::ioctl(fd, request, arg) == 0) return {};
  return fail("device '{}': key 'path' value '{}': {}: {}", c_.name, c_.path, what, std::strerror(errno));
}

Result<int> VhostNetTransport::new_eventfd() {
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return fail("device '{}': eventfd: {}", c_.name, std::strerror(errno));
  eventfds_.push_back(fd);
  return fd;
}

Result<std::unique_ptr<VhostNetTransport>> VhostNetTransport::open(VhostNetConfig c) {
  std::unique_ptr<VhostNetTransport> t(new VhostNetTransport(std::move(c)));
  if (auto ok = t->open_fds(); !ok) return std::unexpected(ok.error());
  if (auto ok = t->negotiate(); !ok) return std::unexpected(ok.error());
  return t;
}

// One vhost-net fd per pair (each its own kernel thread), each owned by this process; then the
// tap queues, the first naming the interface (tap%d filled in by the kernel), the others joining it.
Result<void> VhostNetTransport::open_fds() {
  for (std::uint16_t q = 0; q < c_.queue_pairs; ++q) {
    const int fd = ::open(c_.path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      if (e == ENOENT || e == ENODEV || e == ENXIO)
        return fail(
            "device '{}': key 'path' value '{}': {}: the kernel's vhost-net is not there (load vhost_net: "
            "modprobe vhost_net)",
            c_.name, c_.path, std::strerror(e));
      if (e == EACCES || e == EPERM)
        return fail(
            "device '{}': key 'path' value '{}': {}: needs read and write access to it (root, or a group "
            "that may open it)",
            c_.name, c_.path, std::strerror(e));
      return fail("device '{}': key 'path' value '{}': open: {}", c_.name, c_.path, std::strerror(e));
    }
    vhost_fds_.push_back(fd);
    if (auto ok = ioctl_checked(fd, VHOST_SET_OWNER, nullptr, "VHOST_SET_OWNER"); !ok) return ok;
  }
  auto taps = open_tap_queues(c_.name, c_.path, c_.iface, c_.queue_pairs, c_.tun_path);
  if (!taps) return std::unexpected(taps.error());
  tap_fds_ = std::move(taps->fds);
  iface_ = taps->name;
  return {};
}

Result<TapQueues> open_tap_queues(std::string_view device, const std::string& path, const std::string& iface,
                                  std::uint16_t pairs, const std::string& tun_path) {
  TapQueues t;
  t.name = iface;
  struct Closer {  // what was opened goes on an error
    TapQueues& t;
    bool armed = true;
    ~Closer() {
      if (armed)
        for (int fd : t.fds) ::close(fd);
    }
  } closer{t};
  for (std::uint16_t q = 0; q < pairs; ++q) {
    const int fd = ::open(tun_path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
      return fail("device '{}': key 'iface': cannot open {} for the tap: {}", device, tun_path, std::strerror(errno));
    t.fds.push_back(fd);
    ifreq ifr{};
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | (pairs > 1 ? IFF_MULTI_QUEUE : 0);
    std::strncpy(ifr.ifr_name, t.name.c_str(), IFNAMSIZ - 1);
    if (::ioctl(fd, TUNSETIFF, &ifr) != 0) {
      const int e = errno;
      return fail("device '{}': key 'iface' value '{}' (path '{}'): TUNSETIFF: {}{}", device, t.name, path,
                  std::strerror(e),
                  e == EBUSY ? ": the tap is busy (another process has it, or it exists with other flags: "
                               "IFF_VNET_HDR, and IFF_MULTI_QUEUE for queues>1)"
                             : "");
    }
    t.name = ifr.ifr_name;  // the first queue's %d filled in; the others join that tap
    if (auto ok = setup_tap(device, t.name, fd); !ok) return std::unexpected(ok.error());
  }
  closer.armed = false;
  return t;
}

namespace {
// The header size both ways (TUNSETVNETHDRSZ), and the largest send buffer, as DPDK sets it: a
// small one makes the tap refuse what vhost-net hands it when the receiving side is slow.
Result<void> setup_tap(std::string_view device, const std::string& iface, int fd) {
  int hdr = vhost_net_hdr_bytes;
  if (::ioctl(fd, TUNSETVNETHDRSZ, &hdr) != 0)
    return fail("device '{}': key 'iface' value '{}': TUNSETVNETHDRSZ {}: {}", device, iface, hdr,
                std::strerror(errno));
  int sndbuf = INT_MAX;
  if (::ioctl(fd, TUNSETSNDBUF, &sndbuf) != 0)
    return fail("device '{}': key 'iface' value '{}': TUNSETSNDBUF: {}", device, iface, std::strerror(errno));
  return {};
}
}  // namespace

Result<void> VhostNetTransport::negotiate() {
  std::uint64_t offered = 0;
  if (auto ok = ioctl_checked(vhost_fds_[0], VHOST_GET_FEATURES, &offered, "VHOST_GET_FEATURES"); !ok) return ok;
  if (!has(offered, feature::version_1))
    return fail("device '{}': key 'path' value '{}': vhost-net offers features {:#x} without VERSION_1 (bit 32)",
                c_.name, c_.path, offered);
  offered_ = offered;
  // Every tap here was opened with IFF_VNET_HDR (and IFF_MULTI_QUEUE for pairs > 1), so its
  // offloads and queues are there.
  const std::uint64_t available = (offered & ~never_asked) | tap_header_offloads | bit(feature::mq);
  features_ = (c_.wanted | bit(feature::version_1)) & available;
  if (c_.queue_pairs == 1) features_ &= ~bit(feature::mq);
  if (has(c_.wanted, feature::ring_packed) && !has(features_, feature::ring_packed))
    log(LogLevel::warning, "{}: vhost-net does not offer packed rings; using split rings", c_.name);
  log(LogLevel::info, "{}: vhost-net offers features {:#x}, negotiated {:#x} (tap {})", c_.name, offered, features_,
      iface_);
  return {};
}

Result<void> VhostNetTransport::setup_device(const Arena& arena, std::span<QueueCommon* const> queues,
                                             std::span<const RingArea> areas) {
  auto regions = vhost_max_mem_regions(c_.name, c_.path, c_.mem_regions_param);
  if (!regions) return std::unexpected(regions.error());
  if (*regions < 1)  // the arena is one region
    return fail("device '{}': key 'path' value '{}': vhost-net takes {} memory regions ({}), the arena needs 1",
                c_.name, c_.path, *regions, c_.mem_regions_param);
  const unsigned offload = tap_offload_flags(features_);
  for (int fd : tap_fds_)
    if (::ioctl(fd, TUNSETOFFLOAD, offload) != 0)
      return fail("device '{}': key 'iface' value '{}': TUNSETOFFLOAD {:#x}: {}", c_.name, iface_, offload,
                  std::strerror(errno));
  running_ = true;  // from here a failure detaches what was attached (stop_device())
  for (std::uint32_t q = 0; q < c_.queue_pairs && 2 * q + 1 < queues.size(); ++q)
    if (auto ok = setup_pair(q, arena, queues, areas); !ok) {
      stop_device();
      return ok;
    }
  return {};
}

// One pair's vhost-net fd: what it negotiates (vhost-net's own bits only: the header offloads
// and MQ are the tap's), the arena as its one memory region, RX as its ring 0 and TX as ring 1,
// then the tap as the backend of both.
Result<void> VhostNetTransport::setup_pair(std::uint32_t q, const Arena& arena, std::span<QueueCommon* const> queues,
                                           std::span<const RingArea> areas) {
  const int fd = vhost_fds_[q];
  std::uint64_t f = features_ & offered_;
  if (auto ok = ioctl_checked(fd, VHOST_SET_FEATURES, &f, "VHOST_SET_FEATURES"); !ok) return ok;
  // IOVA = VA: the guest address of our memory is its virtual address.
  const auto va = reinterpret_cast<std::uint64_t>(arena.base());
  alignas(vhost_memory) std::byte buf[sizeof(vhost_memory) + sizeof(vhost_memory_region)]{};
  auto* mem = reinterpret_cast<vhost_memory*>(buf);
  mem->nregions = 1;
  mem->regions[0] = {va, arena.size_bytes(), va, 0};
  if (::ioctl(fd, VHOST_SET_MEM_TABLE, mem) != 0) {
    const int e = errno;
    return fail("device '{}': key 'path' value '{}': VHOST_SET_MEM_TABLE (1 region, {} bytes): {}{}", c_.name, c_.path,
                arena.size_bytes(), std::strerror(e),
                e == E2BIG ? " (more regions than vhost-net takes: /sys/module/vhost/parameters/max_mem_regions)" : "");
  }
  for (std::uint32_t i = 0; i < 2; ++i)
    if (auto ok = setup_ring(q, i, *queues[2 * q + i], areas[2 * q + i]); !ok) return ok;
  for (std::uint32_t i = 0; i < 2; ++i) {
    vhost_vring_file backend{i, tap_fds_[q]};
    if (auto ok = ioctl_checked(fd, VHOST_NET_SET_BACKEND, &backend, "VHOST_NET_SET_BACKEND"); !ok) return ok;
  }
  return {};
}

Result<void> VhostNetTransport::setup_ring(std::uint32_t q, std::uint32_t index, QueueCommon& queue,
                                           const RingArea& area) {
  const int fd = vhost_fds_[q];
  const std::uint32_t r = 2 * q + index;
  auto call = new_eventfd();
  if (!call) return std::unexpected(call.error());
  vhost_vring_file call_file{index, *call};
  if (auto ok = ioctl_checked(fd, VHOST_SET_VRING_CALL, &call_file, "VHOST_SET_VRING_CALL"); !ok) return ok;
  vhost_vring_state num{index, c_.queue_size};
  if (auto ok = ioctl_checked(fd, VHOST_SET_VRING_NUM, &num, "VHOST_SET_VRING_NUM"); !ok) return ok;
  vhost_vring_state base{index, 0};  // a start begins at index 0 (the rings were zeroed)
  if (auto ok = ioctl_checked(fd, VHOST_SET_VRING_BASE, &base, "VHOST_SET_VRING_BASE"); !ok) return ok;
  const auto va = [](const void* p) { return reinterpret_cast<std::uint64_t>(p); };
  vhost_vring_addr addr{index, 0, va(area.desc), va(area.device), va(area.driver), 0};
  if (auto ok = ioctl_checked(fd, VHOST_SET_VRING_ADDR, &addr, "VHOST_SET_VRING_ADDR"); !ok) return ok;
  auto kick = new_eventfd();
  if (!kick) return std::unexpected(kick.error());
  vhost_vring_file kick_file{index, *kick};
  if (auto ok = ioctl_checked(fd, VHOST_SET_VRING_KICK, &kick_file, "VHOST_SET_VRING_KICK"); !ok) return ok;
  queue.notify.kick_fd = *kick;  // the port publishes the queue to its lcore after this
  queue.ring = r;
  kicked_.push_back(&queue);
  return {};
}

void VhostNetTransport::stop_device() {
  for (int fd : vhost_fds_)
    for (unsigned i = 0; i < 2; ++i) {
      vhost_vring_file backend{i, -1};
      if (::ioctl(fd, VHOST_NET_SET_BACKEND, &backend) != 0)
        log(LogLevel::warning, "{}: VHOST_NET_SET_BACKEND -1 on ring {}: {}", c_.name, i, std::strerror(errno));
      vhost_vring_state base{i, 0};
      (void)::ioctl(fd, VHOST_GET_VRING_BASE, &base);
    }
  running_ = false;
  for (QueueCommon* q : kicked_) q->notify.kick_fd = -1;  // no lcore polls the queues now
  kicked_.clear();
  for (int fd : eventfds_) ::close(fd);
  eventfds_.clear();
}

}  // namespace ws::virtio
