// SPDX-License-Identifier: BSD-3-Clause
// A peer's fds: each type told apart without a call that could block, and FdReaper closing them
// off the caller's thread (sockets reset, not lingering; a close() that blocks left behind).
#include "ws/virtio/vhost_user/peer_fd.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace ws::virtio {
namespace {

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

TEST(PeerFd, EachTypeIsToldApart) {
  Fd efd(::eventfd(0, EFD_CLOEXEC));
  Fd mfd(::memfd_create("peer_fd_test", MFD_CLOEXEC));
  int p[2], sv[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Fd pr(p[0]), pw(p[1]), s0(sv[0]), s1(sv[1]);
  Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  Fd dir(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  Fd procfile(::open("/proc/self/status", O_RDONLY | O_CLOEXEC));      // a regular file, not tmpfs
  Fd shm_dir(::open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC));  // on tmpfs, not a file

  EXPECT_EQ(fd_type(efd.fd).kind, FdKind::eventfd);
  EXPECT_EQ(fd_type(mfd.fd).kind, FdKind::shared_memory);
  EXPECT_EQ(fd_type(pw.fd).kind, FdKind::pipe);
  EXPECT_EQ(fd_type(s0.fd).kind, FdKind::socket);
  EXPECT_EQ(fd_type(null.fd).kind, FdKind::other);
  EXPECT_EQ(fd_type(dir.fd).kind, FdKind::other);
  EXPECT_EQ(fd_type(procfile.fd).kind, FdKind::other);
  if (shm_dir.fd >= 0) {
    EXPECT_EQ(fd_type(shm_dir.fd).kind, FdKind::other);
  }
  EXPECT_EQ(fd_type(12345).kind, FdKind::other);  // not open

  EXPECT_TRUE(expect_eventfd(efd.fd));
  EXPECT_TRUE(expect_shared_memory(mfd.fd));
  auto pipe_kick = expect_eventfd(pw.fd);
  ASSERT_FALSE(pipe_kick);
  EXPECT_NE(pipe_kick.error().message.find("the fd is 'pipe:["), std::string::npos) << pipe_kick.error().message;
  EXPECT_NE(pipe_kick.error().message.find("expected an eventfd"), std::string::npos);
  auto null_region = expect_shared_memory(null.fd);
  ASSERT_FALSE(null_region);
  EXPECT_NE(null_region.error().message.find("'/dev/null'"), std::string::npos) << null_region.error().message;
  EXPECT_NE(null_region.error().message.find("tmpfs or hugetlbfs"), std::string::npos);
  EXPECT_FALSE(expect_shared_memory(efd.fd));
  EXPECT_FALSE(expect_eventfd(mfd.fd));
}

TEST(FdReaper, ClosesOnItsOwnThreads) {
  FdReaper reaper;
  ASSERT_TRUE(reaper.start("net_vhost0"));
  const int efd = ::eventfd(0, EFD_CLOEXEC);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  reaper.close(efd);
  reaper.close(null);
  reaper.drain();
  EXPECT_EQ(reaper.pending(), 0u);
  EXPECT_FALSE(fd_open(efd));
  EXPECT_FALSE(fd_open(null));
}

// A TCP connection whose peer never reads, our send buffer full, SO_LINGER one hour: a plain
// close() of the last reference would wait for the peer for an hour. The reaper resets it.
TEST(FdReaper, ResetsALingeringSocketInsteadOfWaiting) {
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener.fd, 1), 0);
  ASSERT_EQ(::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int sock = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  Fd deaf(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));  // never reads
  const int small = 4096;
  ::setsockopt(deaf.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  const linger hour{1, 3600};
  ASSERT_EQ(::setsockopt(sock, SOL_SOCKET, SO_LINGER, &hour, sizeof hour), 0);
  ::fcntl(sock, F_SETFL, O_NONBLOCK);
  char buf[4096] = {};
  while (::send(sock, buf, sizeof buf, MSG_NOSIGNAL) > 0) {
  }
  FdReaper reaper;
  ASSERT_TRUE(reaper.start("net_vhost0"));
  const auto t0 = std::chrono::steady_clock::now();
  reaper.close(sock);
  reaper.drain();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_FALSE(fd_open(sock));
  // Reset, not closed in order: the peer reads an error, not the end of the stream.
  ::fcntl(deaf.fd, F_SETFL, O_NONBLOCK);
  ssize_t n;
  while ((n = ::recv(deaf.fd, buf, sizeof buf, 0)) > 0) {
  }
  EXPECT_EQ(n, -1);
  EXPECT_EQ(errno, ECONNRESET);
}

// Stands in for a close() that blocks (a FUSE daemon that never answers FLUSH) on one fd.
std::atomic<int> stuck_fd{-1};
std::atomic<bool> release_close{false};
int close_that_blocks(int fd) {
  while (fd == stuck_fd.load() && !release_close.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return ::close(fd);
}

TEST(FdReaper, AStuckCloseDelaysNeitherTheCallerNorEventfdsAndShutdownLeavesItBehind) {
  FdReaper::set_close_for_testing(&close_that_blocks);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int efd = ::eventfd(0, EFD_CLOEXEC);
  stuck_fd.store(null);
  const auto t0 = std::chrono::steady_clock::now();
  {
    FdReaper reaper;
    ASSERT_TRUE(reaper.start("net_vhost0", 200));
    reaper.close(null);  // stuck in close()
    reaper.close(efd);   // the other thread closes it all the same
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
    for (int i = 0; i < 200 && fd_open(efd); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(fd_open(efd));
    EXPECT_EQ(reaper.pending(), 1u);
    EXPECT_TRUE(fd_open(null));
  }  // the destructor returns by its deadline, its stuck thread left behind
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::milliseconds(1500));
  EXPECT_TRUE(fd_open(null));
  release_close.store(true);  // the thread left behind closes it and ends
  for (int i = 0; i < 200 && fd_open(null); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(fd_open(null));
  FdReaper::set_close_for_testing(nullptr);
}

}  // namespace
}  // namespace ws::virtio
