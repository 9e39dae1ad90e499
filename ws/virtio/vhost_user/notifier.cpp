// SPDX-License-Identifier: BSD-3-Clause
// Notifier: the thread that writes peers' eventfds for the polling lcores (notifier.hpp says why).
#include "ws/virtio/vhost_user/notifier.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "ws/core/log.hpp"

namespace ws::virtio {
namespace {
long write_peer_fd(int fd, const void* buf, unsigned long len) { return ::write(fd, buf, len); }
std::atomic<Notifier::WriteFn> peer_write{&write_peer_fd};

void interrupted(int) {}

// A handler that does nothing and has no SA_RESTART: the signal makes a blocked write return
// EINTR. An application that installed its own handler for this signal keeps it.
void install_interrupt_handler(const std::string& name) {
  static std::once_flag once;
  std::call_once(once, [&] {
    const int sig = Notifier::interrupt_signal();
    struct sigaction old{};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
      log(LogLevel::warning, "{}: signal {} has a handler already; a write stuck on a peer's fd may not be interrupted",
          name, sig);
      return;
    }
    struct sigaction sa{};
    sa.sa_handler = &interrupted;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  });
}

timespec realtime_in(long ms) {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += ms / 1000;
  t.tv_nsec += (ms % 1000) * 1'000'000;
  if (t.tv_nsec >= 1'000'000'000) {
    t.tv_nsec -= 1'000'000'000;
    ++t.tv_sec;
  }
  return t;
}
}  // namespace

int Notifier::interrupt_signal() noexcept { return SIGRTMAX - 3; }

void Notifier::set_write_for_testing(WriteFn f) noexcept { peer_write.store(f ? f : &write_peer_fd); }

Result<std::unique_ptr<Notifier>> Notifier::create(std::string name, std::uint32_t slots) {
  if (slots == 0 || slots > max_slots) return fail("{}: {} notification slots, expected 1..{}", name, slots, max_slots);
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) return fail("{}: eventfd for the notifier: {}", name, std::strerror(errno));
  std::unique_ptr<Notifier> n(new Notifier(std::move(name), slots, wake));
  if (auto ok = n->start_thread(); !ok) return std::unexpected(ok.error());
  return n;
}

Notifier::Notifier(std::string name, std::uint32_t slots, int wake_fd)
    : name_(std::move(name)), count_(slots), wake_fd_(wake_fd), slots_(std::make_unique<Slot[]>(slots)) {}

Notifier::~Notifier() {
  stop_thread();
  close_fds();
  ::close(wake_fd_);
}

Result<void> Notifier::restart() {
  stop_thread();
  close_fds();
  for (std::uint32_t i = 0; i < count_; ++i) slots_[i].pending.store(false, std::memory_order_relaxed);
  return start_thread();
}

Result<void> Notifier::start_thread() {
  stop_.store(false, std::memory_order_relaxed);
  install_interrupt_handler(name_);
  // The thread runs with every signal blocked but the one that interrupts it: SIGPIPE from a
  // write to a pipe nobody reads stays pending on it (the write fails with EPIPE), and the
  // application's signals go elsewhere.
  sigset_t all, old;
  sigfillset(&all);
  sigdelset(&all, interrupt_signal());
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int rc = pthread_create(&thread_, nullptr, &Notifier::run, this);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) return fail("{}: cannot start the notifier thread: {}", name_, std::strerror(rc));
  started_ = true;
  return {};
}

void Notifier::stop_thread() {
  if (!started_) return;
  started_ = false;
  stop_.store(true, std::memory_order_release);
  wake();
  timespec deadline = realtime_in(500);
  if (pthread_timedjoin_np(thread_, nullptr, &deadline) == 0) return;
  // Only a write to a peer's fd can hold it this long (see the class comment). The signal makes
  // that write fail with EINTR; one sent just before the thread enters a write is lost, so it is
  // sent again until the thread has seen stop_ and returned.
  log(LogLevel::warning, "{}: a peer's fd blocked the notifier thread; interrupting it", name_);
  do {
    pthread_kill(thread_, interrupt_signal());
    deadline = realtime_in(20);
  } while (pthread_timedjoin_np(thread_, nullptr, &deadline) != 0);
}

void Notifier::close_fds() {
  for (std::uint32_t i = 0; i < count_; ++i) {
    Slot& s = slots_[i];
    if (s.fd >= 0) ::close(s.fd);
    s.fd = -1;
    if (const int in = s.incoming.exchange(no_change); in >= 0) ::close(in);
  }
}

Result<void> Notifier::set_fd(std::uint32_t i, int fd) {
  if (i >= count_) return fail("{}: notification slot {} beyond {}", name_, i, count_);
  int mine = -1;
  if (fd >= 0) {
    mine = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (mine < 0) return fail("{}: dup of fd {} for slot {}: {}", name_, fd, i, std::strerror(errno));
  }
  // release: the fd before the thread takes it (its exchange in serve()).
  if (const int old = slots_[i].incoming.exchange(mine, std::memory_order_acq_rel); old >= 0) ::close(old);
  wake();
  return {};
}

void Notifier::wake() noexcept {
  const std::uint64_t one = 1;
  // Our own non-blocking eventfd, drained by the thread: this never blocks, and a full counter
  // (which would take 2^64 wakes without a drain) only means the thread is awake already.
  [[maybe_unused]] const auto r = ::write(wake_fd_, &one, sizeof one);
}

void* Notifier::run(void* self) {
  static_cast<Notifier*>(self)->serve();
  return nullptr;
}

void Notifier::serve() {
  while (!stop_.load(std::memory_order_acquire)) {
    pollfd p{wake_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      std::uint64_t v;
      [[maybe_unused]] const auto r = ::read(wake_fd_, &v, sizeof v);
    }
    for (std::uint32_t i = 0; i < count_; ++i) {
      Slot& s = slots_[i];
      // acquire: pairs with set_fd()'s exchange.
      if (const int in = s.incoming.exchange(no_change, std::memory_order_acq_rel); in != no_change) {
        if (s.fd >= 0) ::close(s.fd);
        s.fd = in;
      }
      // acquire: pairs with signal()'s exchange; what the lcore published is visible to the peer
      // before our write.
      if (s.pending.exchange(false, std::memory_order_acq_rel)) write_peer(s);
    }
  }
}

void Notifier::write_peer(Slot& s) {
  if (s.fd < 0) return;  // the peer gave no fd: it does not want signals
  pollfd p{s.fd, POLLOUT, 0};
  if (::poll(&p, 1, 0) != 1 || (p.revents & POLLOUT) == 0) {
    s.dropped.fetch_add(1, std::memory_order_relaxed);  // full, or nobody reads it: the peer's choice
    return;
  }
  const std::uint64_t one = 1;
  const long n = peer_write.load(std::memory_order_relaxed)(s.fd, &one, sizeof one);  // EINTR: stopping
  (n == sizeof one ? s.written : s.dropped).fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ws::virtio
