// SPDX-License-Identifier: BSD-3-Clause
// net_vhost as QEMU drives it: a frontend written here speaks vhost-user to a real port over its
// socket, in QEMU's message order, and checks where our interrupts go.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ws/testing/port_fixture.hpp"
#include "ws/virtio/features.hpp"
#include "ws/virtio/net/net_hdr.hpp"
#include "ws/virtio/ring/split_driver.hpp"
#include "ws/virtio/vhost_user/protocol.hpp"

namespace ws {
namespace {

namespace vu = virtio::vhost_user;

// The frontend's memory: one memfd, rings of 256 at fixed offsets, packet buffers above them.
struct FrontendMemory {
  static constexpr std::size_t bytes = 1u << 20;
  static constexpr std::uint32_t ring_size = 256;
  int fd = ::memfd_create("vhost_port_test", MFD_CLOEXEC);
  std::byte* host = nullptr;
  FrontendMemory() {
    EXPECT_EQ(::ftruncate(fd, bytes), 0);
    host = static_cast<std::byte*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    EXPECT_NE(host, MAP_FAILED);
  }
  ~FrontendMemory() {
    ::munmap(host, bytes);
    ::close(fd);
  }
  static constexpr std::uint64_t guest_base = 0x100000000ull;
  // Ring addresses are the frontend's own virtual addresses (as QEMU's), descriptors hold
  // guest addresses.
  std::uint64_t addr(std::size_t off) const { return reinterpret_cast<std::uint64_t>(host + off); }
  std::uint64_t guest(std::size_t off) const { return guest_base + off; }
  std::size_t ring_offset(std::uint32_t r) const { return 0x10000 * (r + 1); }
  virtio::SplitRing ring(std::uint32_t r) const {
    std::byte* base = host + ring_offset(r);
    return {ring_size, reinterpret_cast<virtio::SplitDesc*>(base), reinterpret_cast<std::uint16_t*>(base + 0x1000),
            reinterpret_cast<std::uint16_t*>(base + 0x2000)};
  }
};

int new_eventfd() { return ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

// The count an eventfd holds (0 when nothing was written since the last read).
std::uint64_t drain(int efd) {
  std::uint64_t n = 0;
  if (::read(efd, &n, sizeof n) != sizeof n) return 0;
  return n;
}

// Our interrupts are written by the port's notifier thread: waits (up to 5 s) until `efd` was
// written, then drains it. 0: never written.
std::uint64_t wait_signal(int efd) {
  pollfd p{efd, POLLIN, 0};
  if (::poll(&p, 1, 5000) != 1) return 0;
  return drain(efd);
}

class VhostPortQemu : public testing::PortFixture {
 protected:
  void SetUp() override {
    PktmbufPool::Options o;
    o.count = 64;
    o.cache_size = 0;
    ASSERT_NO_FATAL_FAILURE(open_arena_and_pool("vhost_port_test", 4u << 20, o));
    path_ = (std::filesystem::temp_directory_path() / ("ws-vhost-port-test-" + std::to_string(::getpid()))).string();
    port_ = create("net_vhost0,iface=" + path_);
    ASSERT_NE(port_, nullptr);
    ASSERT_TRUE(port_->configure({1, 1}));
    ASSERT_TRUE(port_->setup_rx_queue(0, {0, pool_.get()}));
    ASSERT_TRUE(port_->setup_tx_queue(0, {}));
    ASSERT_TRUE(port_->start());
    auto s = vu::connect_unix(path_);
    ASSERT_TRUE(s) << s.error().message;
    sock_ = *s;
  }
  void TearDown() override {
    if (sock_ >= 0) ::close(sock_);
    if (port_) port_->stop();
    port_.reset();
    for (int fd : fds_) ::close(fd);
  }

  void send(vu::Request r, const void* payload, std::uint32_t size, std::vector<int> fds = {}) {
    vu::Message m;
    m.header = {static_cast<std::uint32_t>(r), vu::flag_version, size};
    if (size) std::memcpy(&m.payload, payload, size);
    auto ok = vu::send_message(sock_, m, fds);
    ASSERT_TRUE(ok) << ok.error().message;
  }
  void send_u64(vu::Request r, std::uint64_t v, std::vector<int> fds = {}) { send(r, &v, 8, std::move(fds)); }
  void send_state(vu::Request r, std::uint32_t index, std::uint32_t num) {
    const vu::VringState st{index, num};
    send(r, &st, 8);
  }
  // Our messages are handled in order: once GET_FEATURES is answered, all before it were applied.
  void barrier() {
    send(vu::Request::get_features, nullptr, 0);
    auto reply = vu::recv_reply(sock_, vu::Request::get_features, 8);
    ASSERT_TRUE(reply) << reply.error().message;
  }
  int eventfd_kept() {
    const int fd = new_eventfd();
    fds_.push_back(fd);
    return fd;
  }

  // QEMU 7.2's order when the guest starts the device: a call fd for each ring (QEMU's masked
  // notifier) and SET_VRING_ENABLE from vhost_dev_init, then the features and memory table.
  void set_up_like_qemu(const int (&masked)[2]) {
    send(vu::Request::set_owner, nullptr, 0);
    for (std::uint32_t r = 0; r < 2; ++r) send_u64(vu::Request::set_vring_call, r, {masked[r]});
    send_state(vu::Request::set_vring_enable, 0, 1);
    send_state(vu::Request::set_vring_enable, 1, 1);
    send_u64(vu::Request::set_features, virtio::bit(virtio::feature::version_1));
    vu::MemTable t{};
    t.count = 1;
    t.regions[0] = {FrontendMemory::guest_base, FrontendMemory::bytes, mem_.addr(0), 0};
    send(vu::Request::set_mem_table, &t, 8 + 32, {mem_.fd});
  }
  // Then per ring (vhost_virtqueue_start): NUM, BASE, ADDR, KICK, and only then SET_VRING_CALL
  // with the guest's notifier (`call`, -1: not yet).
  void start_ring_like_qemu(std::uint32_t r, int call) {
    send_state(vu::Request::set_vring_num, r, FrontendMemory::ring_size);
    send_state(vu::Request::set_vring_base, r, 0);
    const std::size_t off = mem_.ring_offset(r);
    const vu::VringAddr a{r, 0, mem_.addr(off), mem_.addr(off + 0x2000), mem_.addr(off + 0x1000), 0};
    send(vu::Request::set_vring_addr, &a, sizeof a);
    send_u64(vu::Request::set_vring_kick, r, {eventfd_kept()});
    if (call >= 0) send_u64(vu::Request::set_vring_call, r, {call});
  }

  // One packet from our port into the frontend's RX ring (ring 0), which `driver` offered a
  // buffer on; true when it was taken and the used index moved.
  bool send_one_packet(virtio::SplitDriver<std::uint32_t>& driver, std::uint32_t cookie) {
    const virtio::Buffer b{mem_.guest(0x80000 + 0x1000 * cookie), 2048, true};
    if (!driver.post(&b, 1, cookie)) return false;
    driver.publish();
    Mbuf* m = pool_->alloc();
    if (m == nullptr) return false;
    std::memset(m->append(60), 0xab, 60);
    if (port_->tx_burst(0, &m, 1) != 1) {
      mbuf_free(m);
      return false;
    }
    std::uint32_t got_cookie = 0, len = 0;
    return driver.reclaim(&got_cookie, &len, 1) == 1 && got_cookie == cookie && len == 60 + virtio::net_hdr_bytes;
  }

  FrontendMemory mem_;
  std::string path_;
  std::unique_ptr<Port> port_;
  int sock_ = -1;
  std::vector<int> fds_;
};

// QEMU sends SET_VRING_CALL with the guest's notifier after SET_VRING_KICK has started the ring,
// and again whenever it masks or unmasks the interrupt. We used to keep the call fd the ring
// started with (QEMU's masked notifier, which it never reads), so a Linux guest got no
// interrupt and never saw a packet. Our notifications must reach the newest call fd, and none
// the fds it replaced.
TEST_F(VhostPortQemu, CallFdReplacedWhileTheRingRunsGetsTheNotifications) {
  const int masked[2] = {eventfd_kept(), eventfd_kept()};
  const int call[2] = {eventfd_kept(), eventfd_kept()};
  set_up_like_qemu(masked);
  for (std::uint32_t r = 0; r < 2; ++r) start_ring_like_qemu(r, call[r]);
  ASSERT_NO_FATAL_FAILURE(barrier());
  virtio::QueueHealth health;
  virtio::SplitDriver<std::uint32_t> driver;
  driver.init(mem_.ring(0), &health, false);
  EXPECT_GE(wait_signal(call[0]), 1u) << "a call fd given to a running ring is told once";

  ASSERT_TRUE(send_one_packet(driver, 1));
  EXPECT_GE(wait_signal(call[0]), 1u) << "the packet's interrupt goes to the call fd sent after the kick";
  EXPECT_EQ(drain(masked[0]), 0u) << "nothing goes to the call fd the ring started with";

  // QEMU masking and unmasking the queue's interrupt: a third call fd while the ring runs.
  const int unmasked = eventfd_kept();
  send_u64(vu::Request::set_vring_call, 0, {unmasked});
  ASSERT_NO_FATAL_FAILURE(barrier());
  EXPECT_GE(wait_signal(unmasked), 1u);
  ASSERT_TRUE(send_one_packet(driver, 2));
  EXPECT_GE(wait_signal(unmasked), 1u);
  EXPECT_EQ(drain(call[0]), 0u);
  EXPECT_EQ(drain(masked[0]), 0u);

  // No call fd at all (VHOST_USER_VRING_NOFD_MASK): the ring keeps running.
  send_u64(vu::Request::set_vring_call, 0 | vu::vring_nofd);
  ASSERT_NO_FATAL_FAILURE(barrier());
  ASSERT_TRUE(send_one_packet(driver, 3));
  EXPECT_FALSE(health.broken());
}

// Between SET_VRING_KICK and QEMU's SET_VRING_CALL the ring runs and its interrupts go to the
// masked notifier, which QEMU clears and drops when it switches to the guest's. A packet sent to
// the guest in that window must not leave it without an interrupt: with EVENT_IDX the used index
// has then passed the driver's used_event and no later packet would interrupt it either. The
// new call fd gets one notification when it arrives.
TEST_F(VhostPortQemu, InterruptSentBeforeTheCallFdArrivesIsRepeatedOnIt) {
  const int masked[2] = {eventfd_kept(), eventfd_kept()};
  set_up_like_qemu(masked);
  for (std::uint32_t r = 0; r < 2; ++r) start_ring_like_qemu(r, -1);
  ASSERT_NO_FATAL_FAILURE(barrier());
  virtio::QueueHealth health;
  virtio::SplitDriver<std::uint32_t> driver;
  driver.init(mem_.ring(0), &health, false);
  ASSERT_TRUE(send_one_packet(driver, 1));
  EXPECT_GE(wait_signal(masked[0]), 1u) << "before SET_VRING_CALL: the masked notifier";

  const int call = eventfd_kept();
  send_u64(vu::Request::set_vring_call, 0, {call});
  ASSERT_NO_FATAL_FAILURE(barrier());
  EXPECT_GE(wait_signal(call), 1u) << "the guest's notifier is told, with no new packet";
  EXPECT_EQ(drain(masked[0]), 0u);
  EXPECT_FALSE(health.broken());
}

}  // namespace
}  // namespace ws
