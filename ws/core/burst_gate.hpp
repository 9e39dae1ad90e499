// SPDX-License-Identifier: BSD-3-Clause
// BurstGate: keeps a polling lcore out of a queue while the control path works on it (a ring
// reset, a reconnection), without a locked instruction per burst.
#pragma once
#include <atomic>

#include "ws/core/cpu.hpp"

namespace ws {

// enter()/close() are Dekker's handshake: the lcore stores busy then loads open, close() stores
// open then loads busy; each side needs its store ordered before its load. With `asymmetric`
// (register_heavy_fence() succeeded) the lcore only keeps the compiler from reordering and
// close() pays for both with heavy_fence(), a full barrier on the lcore's CPU: the lcore's cost
// per burst is two plain stores and a load. vhost's RingSlot is one, closed until its ring starts.
class BurstGate {
 public:
  // Asymmetric whenever the kernel has membarrier(2) (registered once per process).
  explicit BurstGate(bool open = true) noexcept : open_(open), asymmetric_(register_heavy_fence()) {}

  // Control path, before any lcore polls the queue: `false` forces the fenced form (tests).
  void set_asymmetric(bool on) noexcept { asymmetric_ = on; }

  // Polling lcore, around each burst: false when the gate is closed (the burst does nothing).
  bool enter() noexcept {
    if (asymmetric_) [[likely]] {
      busy_.store(true, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the CPU side: close()'s heavy_fence()
    } else {
      busy_.store(true, std::memory_order_seq_cst);
    }
    // seq_cst (a plain load on x86); acquire at least: what the control path did before open().
    if (!open_.load(std::memory_order_seq_cst)) [[unlikely]] {
      busy_.store(false, std::memory_order_release);
      return false;
    }
    return true;
  }
  void leave() noexcept { busy_.store(false, std::memory_order_release); }  // pairs with close()'s load

  // Control thread: after close() returns, no lcore is inside and none enters until open().
  void close() noexcept {
    open_.store(false, std::memory_order_seq_cst);
    // Either the lcore's busy store precedes the barrier this runs on its CPU (we see busy and
    // wait), or its open load follows it (it sees false).
    if (asymmetric_) heavy_fence();
    while (busy_.load(std::memory_order_seq_cst)) cpu_pause();
  }
  // release: what the control path wrote while closed, before an lcore that enters reads it.
  void open() noexcept { open_.store(true, std::memory_order_release); }
  bool is_open() const noexcept { return open_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> open_;
  std::atomic<bool> busy_{false};
  bool asymmetric_;
};

}  // namespace ws
