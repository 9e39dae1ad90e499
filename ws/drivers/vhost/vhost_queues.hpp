// SPDX-License-Identifier: BSD-3-Clause
// net_vhost's queues as the burst table sees them: the port's RX queue q polls the frontend's TX
// ring (2q+1), its TX queue q fills the frontend's RX ring (2q). Each ring variant has its own
// burst function, published in the port's table when the ring starts (vhost_ring.hpp,
// VhostPort::ring_started), so that a burst is one indirect call, from the table into the
// variant's code; while the ring is stopped the table holds rx_stopped/tx_stopped.
#pragma once
#include <cstdint>
#include <memory>

#include "ws/drivers/vhost/vhost_rxtx.hpp"
#include "ws/port/burst.hpp"

namespace ws::vhost_pmd {

struct alignas(cache_line_bytes) RxQ : QueueBase {
  RingSlot* slot = nullptr;          // the frontend's TX ring 2q+1
  std::unique_ptr<MbufStash> stash;  // set up with the queue's pool
  RxQueueCounters counters;
};
static_assert(alignof(RxQ) == cache_line_bytes && sizeof(RxQ) % cache_line_bytes == 0);

struct alignas(cache_line_bytes) TxQ : QueueBase {
  RingSlot* slot = nullptr;  // the frontend's RX ring 2q
  TxQueueCounters counters;
};
static_assert(alignof(TxQ) == cache_line_bytes && sizeof(TxQ) % cache_line_bytes == 0);

// Each variant's number in RingSlot::variant (0: none); RX and TX numbers apart.
template <bool Packed, bool InOrder, HdrIn In, bool Linear>
inline constexpr std::uint8_t rx_variant =
    static_cast<std::uint8_t>(1 + ((Packed * 2 + InOrder) * 3 + static_cast<int>(In)) * 2 + Linear);
template <bool Packed, bool Mergeable, bool Offload>
inline constexpr std::uint8_t tx_variant = static_cast<std::uint8_t>(32 + Packed * 4 + Mergeable * 2 + Offload);
static_assert(rx_variant<true, true, HdrIn::legacy, true> < tx_variant<false, false, false>);

// A ring that is not running, or no longer runs this variant, takes nothing: RX gives 0 packets,
// TX takes none and counts them in `full` (what the caller keeps, as a full ring).
inline std::uint16_t rx_stopped(QueueBase*, Mbuf**, std::uint16_t) noexcept { return 0; }
inline std::uint16_t tx_stopped(QueueBase* q, Mbuf**, std::uint16_t n) noexcept {
  static_cast<TxQ*>(q)->counters.full.add(n);
  return 0;
}

// The port's rx_burst on a ring started as this variant: dequeue() under the ring's gate.
template <bool Packed, bool InOrder, HdrIn In, bool Linear>
[[gnu::hot]] std::uint16_t rx_burst(QueueBase* q, Mbuf** pkts, std::uint16_t n) noexcept {
  RxQ& rxq = *static_cast<RxQ*>(q);
  RingSlot& s = *rxq.slot;
  if (!s.enter(rx_variant<Packed, InOrder, In, Linear>)) [[unlikely]]
    return 0;
  const std::uint16_t got = dequeue<Packed, InOrder, In, Linear>(s, *rxq.stash, rxq.counters, pkts, n);
  s.leave();
  return got;
}

// The port's tx_burst on a ring started as this variant: enqueue() under the ring's gate.
template <bool Packed, bool Mergeable, bool Offload>
[[gnu::hot]] std::uint16_t tx_burst(QueueBase* q, Mbuf** pkts, std::uint16_t n) noexcept {
  TxQ& txq = *static_cast<TxQ*>(q);
  RingSlot& s = *txq.slot;
  if (!s.enter(tx_variant<Packed, Mergeable, Offload>)) [[unlikely]]
    return tx_stopped(q, pkts, n);
  const std::uint16_t sent = enqueue<Packed, Mergeable, Offload>(s, txq.counters, pkts, n);
  s.leave();
  return sent;
}

// What the table holds for the queue on ring `s`: the variant it runs, or the stopped function.
inline BurstFn published_rx(const RingSlot& s) noexcept {
  const BurstFn f = s.burst.load(std::memory_order_acquire);
  return f != nullptr ? f : &rx_stopped;
}
inline BurstFn published_tx(const RingSlot& s) noexcept {
  const BurstFn f = s.burst.load(std::memory_order_acquire);
  return f != nullptr ? f : &tx_stopped;
}

}  // namespace ws::vhost_pmd
