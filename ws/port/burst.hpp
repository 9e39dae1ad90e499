// SPDX-License-Identifier: BSD-3-Clause
// The data path's unit: a queue and the function that moves a burst through it. A port's burst
// table holds one entry per queue, filled when the port starts.
#pragma once
#include <atomic>
#include <cstdint>

#include "ws/core/mbuf.hpp"

namespace ws {

/// Base of every driver queue; the burst table holds pointers to it.
struct QueueBase {};

/// Moves up to n packets through queue q (RX: into pkts; TX: from pkts); returns how many.
using BurstFn = std::uint16_t (*)(QueueBase*, Mbuf**, std::uint16_t) noexcept;

/// One queue's entry in a port's burst table.
struct BurstEntry {
  BurstFn fn = nullptr;        ///< The driver's burst function for this queue.
  QueueBase* queue = nullptr;  ///< The queue it is called with.

  /// Calls fn with the queue. fn is loaded atomically (a plain load on x86): a driver whose
  /// variant changes while the port runs replaces it under the lcores (Port::republish_rx).
  std::uint16_t operator()(Mbuf** pkts, std::uint16_t n) const noexcept {
    const BurstFn f = std::atomic_ref<BurstFn>(const_cast<BurstFn&>(fn)).load(std::memory_order_relaxed);
    return f(queue, pkts, n);
  }
};

}  // namespace ws
