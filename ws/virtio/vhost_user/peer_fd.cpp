// SPDX-License-Identifier: BSD-3-Clause
// A peer's fds: type checks that never call into a file system, and the threads that close them.
#include "ws/virtio/vhost_user/peer_fd.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>

#include "ws/core/log.hpp"

namespace ws::virtio {
namespace {

std::atomic<FdReaper::CloseFn> close_peer_fd{&::close};

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

FdType fd_type(int fd) {
  FdType t;
  // readlink of /proc/self/fd/N builds the text from the open file in the kernel (d_path, or the
  // pseudo file system's own name for eventfds, pipes and sockets) and asks no file system. The
  // pseudo names never begin with '/', and a path always does: a file cannot pose as an eventfd.
  std::array<char, 32> proc{};
  std::snprintf(proc.data(), proc.size(), "/proc/self/fd/%d", fd);
  std::array<char, 512> link{};
  const ssize_t n = ::readlink(proc.data(), link.data(), link.size() - 1);
  if (n < 0) {
    t.link = fmt::format("fd {} ({}: {})", fd, proc.data(), std::strerror(errno));
    return t;  // no /proc, or no such fd: nothing can be told, so nothing is trusted
  }
  t.link.assign(link.data(), static_cast<std::size_t>(n));
  if (t.link == "anon_inode:[eventfd]") {
    t.kind = FdKind::eventfd;
  } else if (starts_with(t.link, "socket:[")) {
    t.kind = FdKind::socket;
  } else if (starts_with(t.link, "pipe:[")) {
    t.kind = FdKind::pipe;
  } else if (::fcntl(fd, F_GET_SEALS) >= 0) {
    // A tmpfs or hugetlbfs file (the seal calls fail on every other file, and on directories
    // only when not on tmpfs): fstat and fstatfs are answered from memory there.
    struct stat st{};
    struct statfs fs{};
    const bool shm = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::fstatfs(fd, &fs) == 0 &&
                     (fs.f_type == TMPFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC);
    if (shm) t.kind = FdKind::shared_memory;
  }
  return t;
}

Result<void> expect_eventfd(int fd) {
  const FdType t = fd_type(fd);
  if (t.kind == FdKind::eventfd) return {};
  return fail("the fd is '{}', expected an eventfd", t.link);
}

Result<void> expect_shared_memory(int fd) {
  const FdType t = fd_type(fd);
  if (t.kind == FdKind::shared_memory) return {};
  return fail("the fd is '{}', expected a regular file on tmpfs or hugetlbfs (a memfd)", t.link);
}

// One thread and its queue. Shared with the thread, which may outlive the reaper (left behind
// inside a close() at shutdown).
struct FdReaper::Lane {
  std::mutex mutex;
  std::condition_variable changed;  // an fd queued, one closed, stop, done
  std::deque<int> fds;
  std::uint64_t pending = 0;  // queued and being closed
  bool stop = false;
  bool done = false;
  std::thread thread;

  static void run(const std::shared_ptr<Lane>& lane) {
    std::unique_lock lock(lane->mutex);
    for (;;) {
      lane->changed.wait(lock, [&] { return lane->stop || !lane->fds.empty(); });
      if (lane->fds.empty()) break;  // stopping, and nothing left
      const int fd = lane->fds.front();
      lane->fds.pop_front();
      lock.unlock();
      // A socket's close() waits up to its linger time for the peer to take unsent data; with
      // SO_LINGER {on, 0} it resets the connection at once. Not a socket: ENOTSOCK, no harm.
      const linger now{1, 0};
      (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
      (void)close_peer_fd.load(std::memory_order_relaxed)(fd);
      lock.lock();
      --lane->pending;
      lane->changed.notify_all();
    }
    lane->done = true;
    lane->changed.notify_all();
  }
};

void FdReaper::set_close_for_testing(CloseFn f) noexcept { close_peer_fd.store(f ? f : &::close); }

Result<void> FdReaper::start(std::string name, int shutdown_deadline_ms) {
  name_ = std::move(name);
  deadline_ms_ = shutdown_deadline_ms;
  // Every signal blocked in the threads: the application's go elsewhere.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  Result<void> result;
  for (auto* lane : {&quick_, &slow_}) {
    auto l = std::make_shared<Lane>();
    try {
      l->thread = std::thread([l] { Lane::run(l); });
    } catch (const std::system_error& e) {
      result = fail("{}: cannot start the thread that closes the frontend's fds: {}", name_, e.what());
      break;
    }
    *lane = std::move(l);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return result;
}

FdReaper::~FdReaper() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms_);
  for (auto* lane : {&quick_, &slow_}) {
    if (*lane == nullptr) continue;
    Lane& l = **lane;
    std::unique_lock lock(l.mutex);
    l.stop = true;
    l.changed.notify_all();
    if (l.changed.wait_until(lock, deadline, [&] { return l.done; })) {
      lock.unlock();
      l.thread.join();
      continue;
    }
    const std::uint64_t left = l.pending;
    lock.unlock();
    l.thread.detach();  // it keeps its Lane alive
    log(LogLevel::warning,
        "{}: closing a frontend's fd has not returned after {} ms ({} fds not closed); leaving that thread "
        "behind. The process cannot finish exiting before that close() does (a FUSE daemon that never "
        "answers, for one)",
        name_, deadline_ms_, left);
  }
}

void FdReaper::close(int fd) noexcept {
  if (fd < 0) return;
  const FdKind kind = fd_type(fd).kind;
  Lane* lane = (kind == FdKind::eventfd || kind == FdKind::shared_memory ? quick_ : slow_).get();
  if (lane == nullptr) {
    (void)close_peer_fd.load(std::memory_order_relaxed)(fd);  // not started: a test or a fuzzer
    return;
  }
  const std::lock_guard lock(lane->mutex);
  lane->fds.push_back(fd);
  ++lane->pending;
  lane->changed.notify_all();
}

void FdReaper::drain() {
  for (auto* lane : {&quick_, &slow_}) {
    if (*lane == nullptr) continue;
    std::unique_lock lock((*lane)->mutex);
    (*lane)->changed.wait(lock, [&] { return (*lane)->pending == 0; });
  }
}

std::uint64_t FdReaper::pending() const noexcept {
  std::uint64_t n = 0;
  for (const auto* lane : {&quick_, &slow_}) {
    if (*lane == nullptr) continue;
    const std::lock_guard lock((*lane)->mutex);
    n += (*lane)->pending;
  }
  return n;
}

}  // namespace ws::virtio
