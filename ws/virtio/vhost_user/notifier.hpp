// SPDX-License-Identifier: BSD-3-Clause
// Notifier: writes a peer's eventfds (vhost-user call fds, virtio_user kick fds) on behalf of the
// polling lcores, from a thread of its own, so that no data-path thread ever waits on a peer.
#pragma once
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ws/core/result.hpp"

namespace ws::virtio {

// The peer shares the open file description of every fd it gives us: it can clear O_NONBLOCK,
// fill its eventfd to 0xfffffffffffffffe or hand us a pipe nobody reads, and a blocking write
// would then stop whoever writes. So lcores never write a peer's fd: signal() sets a flag and
// wakes this thread through an eventfd of our own (never shared, never full: we drain it), and
// the thread writes the peer's fd when poll() says it can take the write (else the signal is
// dropped and counted). SIGPIPE is blocked in the thread (a pipe with no reader gives EPIPE). A
// peer that races poll() and the write can stall this thread, and with it only the signals of
// the connection it belongs to; the destructor then interrupts the write with a signal
// (interrupt_signal(), whose handler does nothing) and the thread returns.
class Notifier {
 public:
  static constexpr std::uint32_t max_slots = 64;

  // `name` for messages; `slots` fds (a vhost-user device's rings), each none until set_fd().
  static Result<std::unique_ptr<Notifier>> create(std::string name, std::uint32_t slots);
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Control thread: slot `i` signals (a dup of) `fd` from now on; -1 for none. The old fd is
  // closed by the notifier thread once it no longer writes it.
  Result<void> set_fd(std::uint32_t i, int fd);

  // Control thread, no lcore signalling (the peer is gone): forgets every fd and pending signal
  // and starts a fresh thread (a stuck one is interrupted, as in the destructor). Counters stay.
  Result<void> restart();

  // Polling lcore: one signal on slot `i` (several before the thread runs make one). Never
  // blocks, never fails, no allocation: an atomic exchange and, the first time, an eventfd write.
  void signal(std::uint32_t i) noexcept {
    // acq_rel: what the lcore published (a used index) before the peer's signal. Pairs with the
    // exchange in run().
    if (!slots_[i].pending.exchange(true, std::memory_order_acq_rel)) wake();
  }

  // Tests only: what writes a peer's fd (::write by default), to stand in for a peer whose fd
  // blocks after poll() said it would not. Set before create().
  using WriteFn = long (*)(int fd, const void* buf, unsigned long len);
  static void set_write_for_testing(WriteFn f) noexcept;

  // The signal that interrupts the thread's write (a real-time one, SIGRTMAX - 3). The first
  // create() installs a handler that does nothing, unless the application has one for it.
  static int interrupt_signal() noexcept;

  // Signals written to the peer, and dropped because its fd could not take one. Any thread.
  std::uint64_t written(std::uint32_t i) const noexcept { return slots_[i].written.load(std::memory_order_relaxed); }
  std::uint64_t dropped(std::uint32_t i) const noexcept { return slots_[i].dropped.load(std::memory_order_relaxed); }

 private:
  struct alignas(64) Slot {
    std::atomic<bool> pending{false};
    std::atomic<int> incoming{no_change};  // an fd handed over by set_fd(), not yet taken
    int fd = -1;                           // the notifier thread's own
    std::atomic<std::uint64_t> written{0};
    std::atomic<std::uint64_t> dropped{0};
  };
  static constexpr int no_change = -2;

  Notifier(std::string name, std::uint32_t slots, int wake_fd);
  Result<void> start_thread();
  void stop_thread();
  void close_fds();
  void wake() noexcept;
  static void* run(void* self);
  void serve();
  void write_peer(Slot& s);

  std::string name_;
  std::uint32_t count_;
  int wake_fd_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<bool> stop_{false};
  pthread_t thread_{};
  bool started_ = false;
};

}  // namespace ws::virtio
