// SPDX-License-Identifier: BSD-3-Clause
// vhost-user: strict decoding (sizes, fd counts, ranges), fd passing over a socketpair, and the
// backend driven in the order DPDK 22.11's virtio_user sends its messages.
#include "ws/virtio/vhost_user/protocol.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ws/virtio/ring/split.hpp"
#include "ws/virtio/vhost_user/backend.hpp"

namespace ws::virtio {
namespace {

using namespace vhost_user;

std::vector<std::byte> bytes_of(std::uint32_t request, std::uint32_t flags, std::uint32_t size, const void* payload,
                                std::size_t payload_bytes) {
  std::vector<std::byte> b(sizeof(Header) + payload_bytes);
  const Header h{request, flags, size};
  std::memcpy(b.data(), &h, sizeof h);
  if (payload_bytes) std::memcpy(b.data() + sizeof h, payload, payload_bytes);
  return b;
}

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(VhostUserDecode, AcceptsWellFormedMessages) {
  FdSet fds;
  const std::uint64_t features = bit(feature::version_1);
  auto m = decode(bytes_of(2, 1, 8, &features, 8), fds);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->request(), Request::set_features);
  EXPECT_EQ(m->payload.u64, features);
  const VringState st{1, 256};
  ASSERT_TRUE(decode(bytes_of(8, 1 | flag_need_reply, 8, &st, 8), fds));
}

TEST(VhostUserDecode, RefusesMalformedMessagesAndClosesTheirFds) {
  struct Case {
    const char* what;
    std::vector<std::byte> bytes;
    int fds;
    const char* expect;
  };
  const std::uint64_t zero = 0, kick_bad_bits = 0x1234;
  const VringState st{0, 1}, enable2{0, 2};
  MemTable t{};
  t.count = 2;
  t.regions[0] = {0x1000, 0x1000, 0x7f0000, 0};
  t.regions[1] = {0x9000, 0x1000, 0x7f9000, ~0ull - 10};
  MemTable nine{};
  nine.count = 9;
  const std::vector<Case> cases = {
      {"truncated header", std::vector<std::byte>(7), 0, "truncated header"},
      {"version 0", bytes_of(1, 0, 0, nullptr, 0), 0, "version 0"},
      {"unknown request", bytes_of(99, 1, 0, nullptr, 0), 0, "not supported"},
      {"logging never offered", bytes_of(7, 1, 0, nullptr, 0), 1, "not supported"},
      {"size too small", bytes_of(2, 1, 4, &zero, 4), 0, "expected 8"},
      {"size beyond bytes", bytes_of(2, 1, 8, &zero, 4), 0, "received"},
      {"GET_FEATURES with payload", bytes_of(1, 1, 8, &zero, 8), 0, "expected 0"},
      {"fd with SET_OWNER", bytes_of(3, 1, 0, nullptr, 0), 1, "1 fds received, expected 0"},
      {"kick without fd", bytes_of(12, 1, 8, &zero, 8), 0, "0 fds received, expected 1"},
      {"kick with two fds", bytes_of(12, 1, 8, &zero, 8), 2, "2 fds received, expected 1"},
      {"kick payload bits", bytes_of(12, 1, 8, &kick_bad_bits, 8), 1, "bits beyond"},
      {"enable 2", bytes_of(18, 1, 8, &enable2, 8), 0, "expected 0 or 1"},
      {"mem table offset overflow", bytes_of(5, 1, 8 + 64, &t, 8 + 64), 2, "overflows"},
      {"mem table nine regions", bytes_of(5, 1, 8 + 32 * 8, &nine, 8 + 32 * 8), 0, "expected 1..8"},
      {"mem table size vs count", bytes_of(5, 1, 8 + 32, &t, 8 + 32), 2, "for 2 regions"},
      {"state truncated", bytes_of(8, 1, 4, &st, 4), 0, "expected 8"},
  };
  for (const Case& c : cases) {
    FdSet fds;
    std::vector<int> opened;
    for (int i = 0; i < c.fds; ++i) {
      opened.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      fds.push(opened.back());
    }
    auto m = decode(c.bytes, fds);
    ASSERT_FALSE(m) << c.what;
    EXPECT_NE(m.error().message.find(c.expect), std::string::npos) << c.what << ": " << m.error().message;
    for (int fd : opened) EXPECT_FALSE(fd_open(fd)) << c.what << ": fd " << fd << " leaked";
  }
}

TEST(VhostUserSocket, PassesFdsAndRefusesTooMany) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Message m;
  m.header = {12, flag_version, 8};
  m.payload.u64 = 1;
  const int efd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int one[] = {efd};
  ASSERT_TRUE(send_message(sv[0], m, one));
  FdSet fds;
  auto got = recv_message(sv[1], fds);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->payload.u64, 1u);
  ASSERT_EQ(fds.size(), 1u);
  const int received = fds.take(0);
  EXPECT_TRUE(fd_open(received));
  ::close(received);
  ::close(efd);

  ::close(sv[0]);
  FdSet none;
  auto closed = recv_message(sv[1], none);
  ASSERT_FALSE(closed);
  EXPECT_NE(closed.error().message.find("closed"), std::string::npos);
  ::close(sv[1]);
}

// A message read as its bytes come: nothing is waited for, a part is kept, and the fds that came
// with the first part stay with the message; the next message's bytes are left on the socket.
TEST(VhostUserSocket, MessageReaderKeepsAPartialMessageAndNeverWaits) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  MessageReader reader;
  auto none = reader.read(sv[1]);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(reader.partial());

  const std::uint64_t ring = 1;
  const auto kick = bytes_of(12, flag_version, 8, &ring, 8);
  const int efd = ::eventfd(0, EFD_CLOEXEC);
  // 5 bytes of the header with the fd, then nothing.
  iovec iov{const_cast<std::byte*>(kick.data()), 5};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control;
  mh.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &efd, sizeof efd);
  ASSERT_EQ(::sendmsg(sv[0], &mh, 0), 5);
  auto part = reader.read(sv[1]);
  ASSERT_TRUE(part) << part.error().message;
  EXPECT_FALSE(part->has_value());
  EXPECT_TRUE(reader.partial());
  EXPECT_EQ(reader.describe_partial(std::chrono::milliseconds(5000)),
            "vhost-user message header: the peer sent 5 of 12 bytes and then nothing for 5000 ms");
  // The header's rest and 3 payload bytes: still partial, now named by its request.
  ASSERT_EQ(::send(sv[0], kick.data() + 5, 10, 0), 10);
  part = reader.read(sv[1]);
  ASSERT_TRUE(part);
  EXPECT_FALSE(part->has_value());
  EXPECT_EQ(reader.describe_partial(std::chrono::milliseconds(1)),
            "vhost-user SET_VRING_KICK: the peer sent 15 of 20 bytes and then nothing for 1 ms");
  // The rest, and a whole GET_FEATURES behind it.
  const auto get = bytes_of(1, flag_version, 0, nullptr, 0);
  std::vector<std::byte> rest(kick.begin() + 15, kick.end());
  rest.insert(rest.end(), get.begin(), get.end());
  ASSERT_EQ(::send(sv[0], rest.data(), rest.size(), 0), static_cast<ssize_t>(rest.size()));
  auto whole = reader.read(sv[1]);
  ASSERT_TRUE(whole) << whole.error().message;
  ASSERT_TRUE(whole->has_value());
  EXPECT_EQ((*whole)->request(), Request::set_vring_kick);
  EXPECT_EQ(reader.fds().size(), 1u);
  EXPECT_FALSE(reader.partial());
  reader.fds().close_all();
  auto next = reader.read(sv[1]);
  ASSERT_TRUE(next);
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ((*next)->request(), Request::get_features);
  EXPECT_EQ(reader.fds().size(), 0u);

  // A payload larger than any request takes is refused at its header.
  const auto huge = bytes_of(5, flag_version, 4096, nullptr, 0);
  ASSERT_EQ(::send(sv[0], huge.data(), huge.size(), 0), 12);
  auto refused = reader.read(sv[1]);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("payload 4096 bytes"), std::string::npos) << refused.error().message;
  ::close(efd);
  ::close(sv[0]);
  ::close(sv[1]);
}

// The server's socket is there only once it listens: a peer that connects as soon as the file
// appears is never refused. A stale socket is replaced; a file that is not a socket is an error.
// The client side (connect_unix) reaches it, and says which path it could not reach.
TEST(VhostUserSocket, ListeningSocketAppearsWhenItAcceptsAndReplacesAStaleOne) {
  char dir[] = "/tmp/ws-listen-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/vhost.sock";
  auto connect_to = [&path] {
    auto fd = connect_unix(path);
    if (fd) ::close(*fd);
    return fd.has_value();
  };
  for (int round = 0; round < 2; ++round) {  // the second finds the first's socket, stale once closed
    auto fd = listen_unix(path);
    ASSERT_TRUE(fd) << fd.error().message;
    EXPECT_TRUE(connect_to());
    ::close(*fd);
    EXPECT_FALSE(connect_to()) << "nobody listens any more";
  }
  auto refused = connect_unix(path);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("cannot connect to '" + path + "'"), std::string::npos)
      << refused.error().message;
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir)) left.push_back(e.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{"vhost.sock"}) << "no temporary name left behind";

  ::unlink(path.c_str());
  ::close(::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  auto not_socket = listen_unix(path);
  ASSERT_FALSE(not_socket);
  EXPECT_NE(not_socket.error().message.find("is not a socket"), std::string::npos) << not_socket.error().message;
  auto too_long = listen_unix(std::string(dir) + "/" + std::string(100, 'x'));
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.error().message.find("too long"), std::string::npos) << too_long.error().message;
  auto too_long_peer = connect_unix(std::string(dir) + "/" + std::string(110, 'x'));
  ASSERT_FALSE(too_long_peer);
  EXPECT_NE(too_long_peer.error().message.find("is longer than"), std::string::npos) << too_long_peer.error().message;
  std::filesystem::remove_all(dir);
}

// A frontend's memory: one memfd, mapped here at `host`; guest address = user address = host.
struct Frontend {
  static constexpr std::size_t bytes = 1 << 20;
  int fd = ::memfd_create("vhost-test", MFD_CLOEXEC);
  std::byte* host = nullptr;
  Frontend() {
    EXPECT_EQ(::ftruncate(fd, bytes), 0);
    host = static_cast<std::byte*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  }
  ~Frontend() {
    ::munmap(host, bytes);
    ::close(fd);
  }
  std::uint64_t addr(std::size_t off) const { return reinterpret_cast<std::uint64_t>(host + off); }
};

struct Listener : RingListener {
  std::vector<std::uint32_t> started, stopped, fresh;
  std::vector<std::pair<std::uint32_t, int>> calls;  // (ring, fd) as SET_VRING_CALL gave them
  void ring_started(std::uint32_t r, bool is_fresh) override {
    started.push_back(r);
    if (is_fresh) fresh.push_back(r);
  }
  std::uint16_t ring_stopped(std::uint32_t r) override {
    stopped.push_back(r);
    return static_cast<std::uint16_t>(40 + r);
  }
  void ring_call_changed(std::uint32_t r, int fd) override { calls.emplace_back(r, fd); }
};

class Backend : public ::testing::Test {
 protected:
  Frontend fe;
  Listener listener;
  VhostBackend be{BackendOptions{.name = "net_vhost0", .queue_pairs = 1}, &listener};
  Message reply;

  Result<bool> send(Request r, std::uint32_t flags = 0, const void* payload = nullptr, std::uint32_t size = 0,
                    std::vector<int> fd_list = {}) {
    FdSet fds;
    for (int f : fd_list) fds.push(f);
    auto m = decode(bytes_of(static_cast<std::uint32_t>(r), flag_version | flags, size, payload, size), fds);
    if (!m) return std::unexpected(m.error());
    return be.handle(*m, fds, reply);
  }
  Result<bool> send_u64(Request r, std::uint64_t v, std::vector<int> fd_list = {}) {
    return send(r, 0, &v, 8, std::move(fd_list));
  }
  Result<bool> send_state(Request r, std::uint32_t index, std::uint32_t num) {
    const VringState st{index, num};
    return send(r, 0, &st, 8);
  }
  int event_fd() { return ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

  // DPDK 22.11 virtio_user's order (docs/vhost.md), split rings of 256 at fixed offsets.
  void negotiate_and_start(std::uint64_t features) {
    ASSERT_TRUE(send(Request::set_owner));
    ASSERT_TRUE(send(Request::get_features));
    EXPECT_EQ(reply.payload.u64, backend_offered);
    ASSERT_TRUE(send(Request::get_protocol_features));
    ASSERT_TRUE(
        send_u64(Request::set_protocol_features, bit(protocol::mq) | bit(protocol::reply_ack) | bit(protocol::status)));
    auto st = send(Request::set_status, flag_need_reply, &features, 0);  // size 0: refused
    EXPECT_FALSE(st);
    const std::uint64_t s = status::acknowledge | status::driver;
    ASSERT_TRUE(send(Request::set_status, flag_need_reply, &s, 8));
    EXPECT_EQ(reply.payload.u64, 0u) << "REPLY_ACK success";
    ASSERT_TRUE(send_u64(Request::set_vring_call, 0, {event_fd()}));
    ASSERT_TRUE(send_u64(Request::set_vring_call, 1, {event_fd()}));
    ASSERT_TRUE(send_u64(Request::set_features, features));
    MemTable t{};
    t.count = 1;
    t.regions[0] = {fe.addr(0), Frontend::bytes, fe.addr(0), 0};
    auto mt = send(Request::set_mem_table, 0, &t, 8 + 32, {::dup(fe.fd)});
    ASSERT_TRUE(mt) << mt.error().message;
    for (std::uint32_t r = 0; r < 2; ++r) {
      ASSERT_TRUE(send_state(Request::set_vring_num, r, 256));
      ASSERT_TRUE(send_state(Request::set_vring_base, r, 0));
      const std::size_t off = 0x10000 * (r + 1);
      const VringAddr a{r, 0, fe.addr(off), fe.addr(off + 0x2000), fe.addr(off + 0x1000), 0};
      ASSERT_TRUE(send(Request::set_vring_addr, 0, &a, sizeof a));
      auto k = send_u64(Request::set_vring_kick, r, {event_fd()});
      ASSERT_TRUE(k) << k.error().message;
    }
    ASSERT_TRUE(send_state(Request::set_vring_enable, 0, 1));
    ASSERT_TRUE(send_state(Request::set_vring_enable, 1, 1));
  }
};

TEST_F(Backend, FollowsDpdkVirtioUserOrderToReady) {
  negotiate_and_start(bit(feature::version_1) | bit(feature::mrg_rxbuf));
  EXPECT_FALSE(be.device_ready()) << "STATUS negotiated: waits for DRIVER_OK";
  const std::uint64_t ok = status::acknowledge | status::driver | status::features_ok | status::driver_ok;
  ASSERT_TRUE(send_u64(Request::set_status, ok));
  EXPECT_TRUE(be.device_ready());
  EXPECT_EQ(listener.started, (std::vector<std::uint32_t>{0, 1}));
  fe.host[0x20000] = std::byte{0x5a};  // the backend sees the frontend's memory through its own mapping
  EXPECT_EQ(be.ring(1).desc[0], std::byte{0x5a});
  EXPECT_NE(be.ring(1).desc, fe.host + 0x20000);
  ASSERT_TRUE(send(Request::get_status));
  EXPECT_EQ(reply.payload.u64, ok);
  ASSERT_TRUE(send(Request::get_queue_num));
  EXPECT_EQ(reply.payload.u64, 1u);
  // Stop: disable, then GET_VRING_BASE per ring returns what the data path reports.
  ASSERT_TRUE(send_state(Request::set_vring_enable, 0, 0));
  ASSERT_TRUE(send_state(Request::get_vring_base, 1, 0));
  EXPECT_EQ(reply.payload.state.index, 1u);
  EXPECT_EQ(reply.payload.state.num, 41u);
  EXPECT_FALSE(be.ring(1).started);
  EXPECT_EQ(listener.stopped, (std::vector<std::uint32_t>{1}));
}

// QEMU's packed ring base: avail index and wrap counter in bits 0-15, used index and wrap
// counter in bits 16-31 (a fresh ring: 0x80008000). We used to refuse anything beyond 16 bits,
// so QEMU with packed=on fell back to its own virtio emulation and the guest got nothing.
TEST_F(Backend, PackedRingBaseInQemusFormat) {
  ASSERT_TRUE(send_u64(Request::set_features, bit(feature::version_1) | bit(feature::ring_packed)));
  ASSERT_TRUE(send_state(Request::set_vring_num, 0, 256));
  auto r = send_state(Request::set_vring_base, 0, 0x80008000u);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(be.ring(0).base, 0x8000u);
  ASSERT_TRUE(send_state(Request::set_vring_base, 0, 0x00050005u));
  EXPECT_EQ(be.ring(0).base, 5u);
  auto beyond = send_state(Request::set_vring_base, 0, 0x01000005u);
  ASSERT_FALSE(beyond) << "used index 256 on a ring of 256";
  EXPECT_NE(beyond.error().message.find("index 256 beyond ring size 256"), std::string::npos) << beyond.error().message;
  ASSERT_TRUE(send_state(Request::get_vring_base, 0, 0));
  EXPECT_EQ(reply.payload.state.num, 0x00050005u) << "used = avail, in QEMU's format";
  ASSERT_TRUE(send_u64(Request::set_features, bit(feature::version_1)));
  EXPECT_FALSE(send_state(Request::set_vring_base, 0, 0x10000u)) << "split: 16 bits";
}

TEST_F(Backend, RefusesWhatWasNeverOfferedOrOutOfRange) {
  auto r = send_u64(Request::set_features, bit(feature::version_1) | bit(40));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("never offered"), std::string::npos) << r.error().message;
  EXPECT_FALSE(send_u64(Request::set_features, bit(feature::mrg_rxbuf))) << "no VERSION_1";
  EXPECT_FALSE(send_u64(Request::set_protocol_features, bit(protocol::backend_req)));
  ASSERT_TRUE(send_u64(Request::set_features, bit(feature::version_1)));
  auto idx = send_state(Request::set_vring_num, 2, 256);
  ASSERT_FALSE(idx);
  EXPECT_NE(idx.error().message.find("ring 2, expected a ring below 2"), std::string::npos) << idx.error().message;
  EXPECT_FALSE(send_state(Request::set_vring_num, 0, 0));
  EXPECT_FALSE(send_state(Request::set_vring_num, 0, 100)) << "split: power of two";
  EXPECT_FALSE(send_state(Request::set_vring_num, 0, 65536));
  EXPECT_FALSE(send_u64(Request::set_vring_call, 5, {event_fd()}));
  ASSERT_TRUE(send_u64(Request::set_features, bit(feature::version_1) | bit(feature::ring_packed)));
  EXPECT_TRUE(send_state(Request::set_vring_num, 0, 100)) << "packed: any size";
}

TEST_F(Backend, RefusesBadMemoryTablesAndRingsOutsideThem) {
  MemTable t{};
  t.count = 2;
  t.regions[0] = {0x1000, 0x10000, fe.addr(0), 0};
  t.regions[1] = {0x8000, 0x10000, fe.addr(0x80000), 0x80000};  // overlaps region 0 (guest)
  auto r = send(Request::set_mem_table, 0, &t, 8 + 64, {::dup(fe.fd), ::dup(fe.fd)});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("overlaps"), std::string::npos) << r.error().message;
  EXPECT_EQ(be.memory().size(), 0u);
  t.count = 1;
  t.regions[0] = {0x1000, 0x10000, fe.addr(0), 0};
  const int bad_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  EXPECT_FALSE(send(Request::set_mem_table, 0, &t, 8 + 32, {bad_fd})) << "fd that cannot be mapped";
  ASSERT_TRUE(send(Request::set_mem_table, 0, &t, 8 + 32, {::dup(fe.fd)}));
  ASSERT_TRUE(send(Request::set_mem_table, 0, &t, 8 + 32, {::dup(fe.fd)})) << "replacing: the old one is unmapped";
  ASSERT_TRUE(send_u64(Request::set_features, bit(feature::version_1)));
  ASSERT_TRUE(send_state(Request::set_vring_num, 0, 256));
  const VringAddr a{0, 0, fe.addr(0xf800), fe.addr(0x2000), fe.addr(0x1000), 0};  // desc crosses the end
  ASSERT_TRUE(send(Request::set_vring_addr, 0, &a, sizeof a));
  auto k = send_u64(Request::set_vring_kick, 0, {event_fd()});
  ASSERT_FALSE(k);
  EXPECT_NE(k.error().message.find("not inside one mapped region"), std::string::npos) << k.error().message;
}

// Kick, call and err fds must be eventfds, region fds tmpfs or hugetlbfs files: anything else is
// refused, naming the device, the message and what was expected, and closed.
TEST_F(Backend, RefusesFdsOfTheWrongTypeNamingTheMessage) {
  int p[2], sv[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ::close(p[0]);
  ::close(sv[1]);
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const int dir = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct Case {
    Request request;
    int fd;
    const char* what;
  };
  for (const Case& c : {Case{Request::set_vring_kick, p[1], "SET_VRING_KICK ring 1: the fd is 'pipe:["},
                        Case{Request::set_vring_call, sv[0], "SET_VRING_CALL ring 1: the fd is 'socket:["},
                        Case{Request::set_vring_err, null, "SET_VRING_ERR ring 1: the fd is '/dev/null'"},
                        Case{Request::set_vring_kick, ::dup(fe.fd), "SET_VRING_KICK ring 1: the fd is '/memfd:"}}) {
    auto r = send_u64(c.request, 1, {c.fd});
    ASSERT_FALSE(r) << c.what;
    EXPECT_EQ(r.error().message.rfind(std::string("net_vhost0: ") + c.what, 0), 0u) << r.error().message;
    EXPECT_NE(r.error().message.find("expected an eventfd"), std::string::npos) << r.error().message;
    EXPECT_FALSE(fd_open(c.fd)) << c.what;
  }
  MemTable t{};
  t.count = 1;
  t.regions[0] = {0x1000, 0x10000, fe.addr(0), 0};
  for (const int fd : {dir, ::eventfd(0, EFD_CLOEXEC)}) {
    auto r = send(Request::set_mem_table, 0, &t, 8 + 32, {fd});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message.rfind("net_vhost0: SET_MEM_TABLE region 0: the fd is '", 0), 0u) << r.error().message;
    EXPECT_NE(r.error().message.find("expected a regular file on tmpfs or hugetlbfs"), std::string::npos);
    EXPECT_FALSE(fd_open(fd));
  }
  EXPECT_EQ(be.memory().size(), 0u);
  EXPECT_TRUE(listener.calls.empty()) << "a refused call fd never reached the notifier";
}

TEST_F(Backend, ReplyAckReportsFailureAndResetForgetsEverything) {
  ASSERT_TRUE(send_u64(Request::set_protocol_features, bit(protocol::reply_ack)));
  const VringState st{9, 256};
  EXPECT_FALSE(send(Request::set_vring_num, flag_need_reply, &st, 8));
  EXPECT_EQ(reply.header.size, 8u);
  EXPECT_EQ(reply.payload.u64, 1u) << "failure ack";
  negotiate_and_start(bit(feature::version_1));
  ASSERT_TRUE(send(Request::reset_owner));
  EXPECT_EQ(be.memory().size(), 0u);
  EXPECT_EQ(be.features(), 0u);
  EXPECT_FALSE(be.ring(0).started);
  EXPECT_EQ(be.ring(0).kick_fd, -1);
}

}  // namespace
// QEMU sends SET_VRING_KICK before SET_VRING_CALL, and a frontend may kick a ring before its
// addresses or the memory table arrive: the ring then starts once the last piece comes, and never
// before SET_FEATURES; nothing is refused.
TEST_F(Backend, RingStartsWhenItsLastPieceArrivesInAnyOrder) {
  ASSERT_TRUE(send(Request::set_owner));
  auto k = send_u64(Request::set_vring_kick, 0, {event_fd()});
  ASSERT_TRUE(k) << k.error().message;
  ASSERT_TRUE(send_state(Request::set_vring_num, 0, 256));
  const VringAddr a{0, 0, fe.addr(0x10000), fe.addr(0x12000), fe.addr(0x11000), 0};
  ASSERT_TRUE(send(Request::set_vring_addr, 0, &a, sizeof a));
  MemTable t{};
  t.count = 1;
  t.regions[0] = {fe.addr(0), Frontend::bytes, fe.addr(0), 0};
  ASSERT_TRUE(send(Request::set_mem_table, 0, &t, 8 + 32, {::dup(fe.fd)}));
  EXPECT_TRUE(listener.started.empty()) << "no SET_FEATURES yet: the variants are not known";
  EXPECT_FALSE(be.ring(0).started);
  ASSERT_TRUE(send_u64(Request::set_features, bit(feature::version_1)));
  EXPECT_EQ(listener.started, (std::vector<std::uint32_t>{0}));
  EXPECT_EQ(listener.fresh, (std::vector<std::uint32_t>{0}));
  EXPECT_TRUE(be.ring(0).started);
  // The call fd comes after the kick (QEMU's order) and may change while the ring runs.
  const int call = event_fd();
  ASSERT_TRUE(send_u64(Request::set_vring_call, 0, {call}));
  ASSERT_EQ(listener.calls.size(), 1u);
  EXPECT_EQ(listener.calls[0].first, 0u);
  EXPECT_EQ(listener.calls[0].second, be.ring(0).call_fd);
  EXPECT_GE(be.ring(0).call_fd, 0);
  ASSERT_TRUE(send_u64(Request::set_vring_call, 0 | vring_nofd));
  ASSERT_EQ(listener.calls.size(), 2u);
  EXPECT_EQ(listener.calls[1].second, -1);
}

// SET_FEATURES while rings run takes effect: they restart (picking the new variants), unless the
// layout changes, which is refused. A restart is not fresh; a reset (status 0) makes the next one so.
TEST_F(Backend, NewFeaturesRestartRunningRingsAndStatusZeroMakesTheNextStartFresh) {
  negotiate_and_start(bit(feature::version_1));
  EXPECT_EQ(listener.started, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(listener.fresh, (std::vector<std::uint32_t>{0, 1}));
  ASSERT_TRUE(send_u64(Request::set_features, bit(feature::version_1)));
  EXPECT_EQ(listener.started.size(), 2u) << "the same features: nothing to do";
  ASSERT_TRUE(send_u64(Request::set_features, bit(feature::version_1) | bit(feature::mrg_rxbuf)));
  EXPECT_EQ(listener.started, (std::vector<std::uint32_t>{0, 1, 0, 1}));
  EXPECT_EQ(listener.stopped, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(be.features(), bit(feature::version_1) | bit(feature::mrg_rxbuf));
  auto layout = send_u64(Request::set_features, bit(feature::version_1) | bit(feature::ring_packed));
  ASSERT_FALSE(layout);
  EXPECT_NE(layout.error().message.find("layout"), std::string::npos) << layout.error().message;
  EXPECT_EQ(listener.fresh.size(), 2u) << "restarts are not fresh";
  ASSERT_TRUE(send_u64(Request::set_status, 0));
  auto k = send_u64(Request::set_vring_kick, 1, {event_fd()});
  ASSERT_TRUE(k) << k.error().message;
  EXPECT_EQ(listener.fresh, (std::vector<std::uint32_t>{0, 1, 1})) << "status 0 reset the device";
}

// Our address space in bytes (the first field of /proc/self/statm, in pages).
std::uint64_t address_space_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return std::uint64_t{pages} * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

// The frontend chooses offsets and sizes: a tiny region at the end of a sparse 64 GiB file must
// cost us a tiny mapping, not 64 GiB mapped and populated.
TEST_F(Backend, MapsOnlyThePagesARegionCoversAndPopulatesNothing) {
  const int sparse = ::memfd_create("sparse", MFD_CLOEXEC);
  const std::uint64_t file = std::uint64_t{64} << 30;
  ASSERT_EQ(::ftruncate(sparse, static_cast<off_t>(file)), 0);
  MemTable t{};
  t.count = 1;
  t.regions[0] = {0x100000, 0x1000, 0x7f0000000000, file - 0x1000 + 0x10};  // 4 KiB, 16 B past a page start
  t.regions[0].mmap_offset = file - 0x2000 + 0x10;
  const std::uint64_t before = address_space_bytes();
  auto r = send(Request::set_mem_table, 0, &t, 8 + 32, {::dup(sparse)});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LT(address_space_bytes() - before, std::uint64_t{1} << 20) << "mapped far more than the region";
  std::byte* host = be.memory().translate(0x100000, 0x1000);
  ASSERT_NE(host, nullptr);
  host[0] = std::byte{5};  // the region's first byte is at its offset in the file
  std::byte check{};
  ASSERT_EQ(::pread(sparse, &check, 1, static_cast<off_t>(t.regions[0].mmap_offset)), 1);
  EXPECT_EQ(check, std::byte{5});
  ::close(sparse);
}

TEST(BackendLimits, MoreMemoryThanTheDeviceAllowsIsRefusedNamingTheKey) {
  Listener listener;
  VhostBackend be(BackendOptions{.name = "net_vhost0", .queue_pairs = 1, .max_mem_bytes = 1 << 20}, &listener);
  Frontend fe;
  MemTable t{};
  t.count = 2;
  t.regions[0] = {0x0, Frontend::bytes / 2, fe.addr(0), 0};
  t.regions[1] = {Frontend::bytes, Frontend::bytes / 2 + 4096, fe.addr(Frontend::bytes / 2), Frontend::bytes / 2};
  FdSet fds;
  fds.push(::dup(fe.fd));
  fds.push(::dup(fe.fd));
  auto m = decode(bytes_of(static_cast<std::uint32_t>(Request::set_mem_table), flag_version, 8 + 64, &t, 8 + 64), fds);
  ASSERT_TRUE(m);
  Message reply;
  auto r = be.handle(*m, fds, reply);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("max-mem-mb"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("1 MiB allowed"), std::string::npos) << r.error().message;
  EXPECT_EQ(be.memory().size(), 0u);
}

// Region sizes are 64-bit each and may sum past 2^64: 2^63, 2^63 - 4 KiB and 8 KiB summed to
// 4 KiB, which passed a 1 MiB limit.
TEST(BackendLimits, RegionSizesThatSumPast2To64AreRefusedNotWrapped) {
  Listener listener;
  VhostBackend be(BackendOptions{.name = "net_vhost0", .queue_pairs = 1, .max_mem_bytes = 1 << 20}, &listener);
  Frontend fe;
  constexpr std::uint64_t half = std::uint64_t{1} << 63;
  MemTable t{};
  t.count = 3;
  t.regions[0] = {0x0, half, 0x0, 0};
  t.regions[1] = {half, half - 0x1000, half, 0};
  t.regions[2] = {0x1000, 0x2000, fe.addr(0), 0};
  FdSet fds;
  for (int i = 0; i < 3; ++i) fds.push(::dup(fe.fd));
  auto m = decode(bytes_of(static_cast<std::uint32_t>(Request::set_mem_table), flag_version, 8 + 96, &t, 8 + 96), fds);
  ASSERT_TRUE(m) << m.error().message;
  Message reply;
  auto r = be.handle(*m, fds, reply);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("more than the 1 MiB allowed (key 'max-mem-mb')"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("region 0 of 3"), std::string::npos) << r.error().message;
  EXPECT_EQ(be.memory().size(), 0u);
}

}  // namespace ws::virtio
