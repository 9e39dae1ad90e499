// SPDX-License-Identifier: BSD-3-Clause
// Notifier: signals reach the fd set last, and no peer fd (full, blocking, a pipe nobody reads,
// a peer racing us) can make signal() block, kill the process or hang the destructor.
#include "ws/virtio/vhost_user/notifier.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <thread>

namespace ws::virtio {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::unique_ptr<Notifier> make(std::uint32_t slots) {
  auto n = Notifier::create("test", slots);
  EXPECT_TRUE(n.has_value()) << n.error().message;
  return n ? std::move(*n) : nullptr;
}

// What an eventfd holds, waiting up to `wait` for it to become non-zero (0 if it stays so).
std::uint64_t read_count(int efd, std::chrono::milliseconds wait) {
  pollfd p{efd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) != 1) return 0;
  std::uint64_t v = 0;
  if (::read(efd, &v, sizeof v) != sizeof v) return 0;
  return v;
}

template <class F>
bool eventually(F&& done, std::chrono::milliseconds limit = 2000ms) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return done();
}

TEST(Notifier, SignalsReachTheFdSetLastEvenWhenItChangesWhileRunning) {
  auto n = make(2);
  const int a = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), b = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  n->signal(0);  // no fd yet: nothing to write, nothing counted as dropped
  ASSERT_TRUE(n->set_fd(0, a));
  n->signal(0);
  EXPECT_GE(read_count(a, 2000ms), 1u);
  // A new call fd (QEMU sends SET_VRING_CALL after the kick, and on every (un)mask).
  ASSERT_TRUE(n->set_fd(0, b));
  ::close(b);  // the notifier keeps its own duplicate
  n->signal(0);
  EXPECT_TRUE(eventually([&] { return n->written(0) == 2; }));
  EXPECT_EQ(read_count(a, 100ms), 0u) << "the old fd gets nothing more";
  EXPECT_EQ(n->dropped(0), 0u);
  EXPECT_EQ(n->written(1), 0u);
  ::close(a);
}

TEST(Notifier, ManySignalsBeforeTheThreadRunsMakeAtLeastOneAndNeverBlock) {
  auto n = make(1);
  const int a = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_TRUE(n->set_fd(0, a));
  for (int i = 0; i < 100000; ++i) n->signal(0);
  EXPECT_TRUE(eventually([&] { return n->written(0) >= 1; }));
  std::uint64_t total = 0;
  while (const auto v = read_count(a, 200ms)) total += v;
  EXPECT_GE(total, 1u);
  EXPECT_LE(total, 100000u);
  EXPECT_EQ(total, n->written(0));
  ::close(a);
}

// The peer's eventfd at its maximum, made blocking by the peer (it shares the file description):
// a write would block forever. The signal is dropped and counted; nobody blocks.
TEST(Notifier, AFullBlockingEventfdDropsTheSignal) {
  auto n = make(2);
  const int full = ::eventfd(0, EFD_CLOEXEC);  // blocking
  const std::uint64_t almost = 0xfffffffffffffffeULL;
  ASSERT_EQ(::write(full, &almost, sizeof almost), 8);
  const int good = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_TRUE(n->set_fd(0, full));
  ASSERT_TRUE(n->set_fd(1, good));
  const auto t0 = Clock::now();
  for (int i = 0; i < 1000; ++i) n->signal(0);
  EXPECT_LT(Clock::now() - t0, 500ms) << "signal() waited";
  n->signal(1);
  EXPECT_GE(read_count(good, 2000ms), 1u) << "the other slot still gets its signals";
  EXPECT_TRUE(eventually([&] { return n->dropped(0) >= 1; }));
  EXPECT_EQ(n->written(0), 0u);
  const auto t1 = Clock::now();
  n.reset();
  EXPECT_LT(Clock::now() - t1, 2s) << "the destructor waited on the peer";
  ::close(full);
  ::close(good);
}

// A pipe nobody drains (full, blocking) and a pipe whose reader is gone (a write raises SIGPIPE
// unless blocked): dropped and counted, the process alive.
TEST(Notifier, PipesThatAreFullOrHaveNoReaderDropTheSignal) {
  auto n = make(2);
  int full[2], orphan[2];
  ASSERT_EQ(::pipe(full), 0);
  ASSERT_EQ(::pipe(orphan), 0);
  ::fcntl(full[1], F_SETFL, O_NONBLOCK);
  char junk[4096] = {};
  while (::write(full[1], junk, sizeof junk) > 0) {
  }
  ::fcntl(full[1], F_SETFL, 0);  // blocking again, as a peer may leave it
  ::close(orphan[0]);
  ASSERT_TRUE(n->set_fd(0, full[1]));
  ASSERT_TRUE(n->set_fd(1, orphan[1]));
  n->signal(0);
  n->signal(1);
  EXPECT_TRUE(eventually([&] { return n->dropped(0) >= 1 && n->dropped(1) >= 1; }));
  n.reset();
  for (int fd : {full[0], full[1], orphan[1]}) ::close(fd);
}

// A peer racing poll() and the write: it keeps its blocking eventfd flipping between empty and
// full, then leaves it full. Signals meanwhile never block the signalling thread, and the
// destructor returns even if the notifier thread was caught in the write (it is interrupted).
TEST(Notifier, APeerRacingTheWriteCannotHangTheSignallerOrTheDestructor) {
  auto n = make(1);
  const int efd = ::eventfd(0, EFD_CLOEXEC);  // blocking
  ASSERT_TRUE(n->set_fd(0, efd));
  std::atomic<bool> stop{false};
  std::thread peer([&] {
    // The peer's own reads and writes must not block it: it makes the shared description
    // non-blocking around them, and blocking again in between (so ours would block).
    const std::uint64_t almost = 0xfffffffffffffffeULL;
    auto flip = [&] {
      ::fcntl(efd, F_SETFL, O_NONBLOCK);
      std::uint64_t v;
      [[maybe_unused]] auto r = ::read(efd, &v, sizeof v);                      // to 0
      const bool full = ::write(efd, &almost, sizeof almost) == sizeof almost;  // to full
      ::fcntl(efd, F_SETFL, 0);
      return full;
    };
    while (!stop.load()) flip();
    while (!flip()) {
    }
  });
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < 300ms) n->signal(0);
  stop = true;
  peer.join();  // leaves the eventfd full and blocking
  const auto t1 = Clock::now();
  n.reset();
  EXPECT_LT(Clock::now() - t1, 3s);
  ::close(efd);
}

// The case the race above can only sometimes produce: the notifier thread blocked inside the
// write. The destructor interrupts it with a signal instead of waiting forever.
TEST(Notifier, TheDestructorInterruptsAThreadStuckInAPeersWrite) {
  static std::atomic<bool> entered{false};
  Notifier::set_write_for_testing([](int, const void*, unsigned long) -> long {
    entered = true;
    ::pause();  // returns, as a blocked write does, only when a signal's handler has run
    errno = EINTR;
    return -1;
  });
  auto n = make(1);
  const int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_TRUE(n->set_fd(0, efd));
  n->signal(0);
  EXPECT_TRUE(eventually([] { return entered.load(); }));
  const auto t0 = Clock::now();
  n.reset();
  EXPECT_LT(Clock::now() - t0, 3s);
  Notifier::set_write_for_testing(nullptr);
  ::close(efd);
}

TEST(Notifier, RestartForgetsFdsAndPendingSignalsAndKeepsCounting) {
  auto n = make(1);
  const int a = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_TRUE(n->set_fd(0, a));
  n->signal(0);
  EXPECT_TRUE(eventually([&] { return n->written(0) == 1; }));
  ASSERT_TRUE(n->restart());
  n->signal(0);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(n->written(0), 1u) << "the fd was forgotten";
  EXPECT_EQ(read_count(a, 0ms), 1u);
  ::close(a);
  EXPECT_FALSE(Notifier::create("bad", 0));
  EXPECT_FALSE(n->set_fd(1, -1)) << "no slot 1";
}

}  // namespace
}  // namespace ws::virtio
