// SPDX-License-Identifier: BSD-3-Clause
// Ring: a bounded lock-free FIFO of trivially copyable elements (usually pointers), single or
// multi producer and consumer, chosen at creation. Burst calls move as many elements as fit
// (all-or-part); bulk calls move all or none. Both return the count moved.
//
// Indices run freely over 32 bits and are masked on use, so the ring holds exactly `size`
// elements. Each side (producer, consumer) has a head, reserved by that side, and a tail,
// published to the other side; they sit on separate cache lines.
#pragma once
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>

#include "ws/core/copy.hpp"
#include "ws/core/cpu.hpp"
#include "ws/core/result.hpp"

namespace ws {

/// How many threads may use one side of a ring at once.
enum class Sync : std::uint8_t {
  single,  ///< One thread at a time (cheaper).
  multi,   ///< Any number of threads.
};

/// What Ring::create makes.
struct RingOptions {
  std::uint32_t size = 1024;    ///< power of two, >= 2
  Sync producer = Sync::multi;  ///< Who enqueues.
  Sync consumer = Sync::multi;  ///< Who dequeues.
};

/// The largest ring size.
inline constexpr std::uint32_t ring_size_max = 1u << 28;

/// A bounded lock-free FIFO of trivially copyable elements (as rte_ring).
template <class T>
  requires std::is_trivially_copyable_v<T>
class Ring {
 public:
  /// A ring holding exactly options.size elements; an error names a bad size.
  static Result<std::unique_ptr<Ring>> create(std::string_view name, const RingOptions& options) {
    if (options.size < 2 || options.size > ring_size_max || !std::has_single_bit(options.size))
      return fail("ring '{}': size {} must be a power of two between 2 and {}", name, options.size, ring_size_max);
    return std::unique_ptr<Ring>(new Ring(options));
  }

  /// Enqueue up to objs.size() elements; returns how many. Thread-safe per the producer Sync.
  std::uint32_t enqueue_burst(std::span<const T> objs) noexcept { return enqueue(objs, false); }
  /// Enqueue all of objs or nothing; returns objs.size() or 0.
  std::uint32_t enqueue_bulk(std::span<const T> objs) noexcept { return enqueue(objs, true); }
  /// Enqueue one element; false when full.
  bool enqueue(const T& obj) noexcept { return enqueue(std::span<const T>(&obj, 1), true) == 1; }

  /// Dequeue up to out.size() elements; returns how many. Thread-safe per the consumer Sync.
  std::uint32_t dequeue_burst(std::span<T> out) noexcept { return dequeue(out, false); }
  /// Dequeue exactly out.size() elements or nothing.
  std::uint32_t dequeue_bulk(std::span<T> out) noexcept { return dequeue(out, true); }
  /// Dequeue one element; false when empty.
  bool dequeue(T& obj) noexcept { return dequeue(std::span<T>(&obj, 1), true) == 1; }

  /// Elements in the ring at some instant; exact only when no side is moving.
  std::uint32_t count() const noexcept {
    // acquire: pairs with the release stores of the tails, as the sides themselves do. The
    // consumer tail is read first: the producer tail read after it is at least as far, so the
    // difference cannot wrap; producers may move on in between, hence the clamp.
    const std::uint32_t cons_tail = cons_.tail.load(std::memory_order_acquire);
    const std::uint32_t prod_tail = prod_.tail.load(std::memory_order_acquire);
    return std::min(prod_tail - cons_tail, capacity_);
  }
  std::uint32_t free_count() const noexcept { return capacity_ - count(); }  ///< Free slots (same caveat).
  std::uint32_t capacity() const noexcept { return capacity_; }              ///< Elements it holds when full.
  bool empty() const noexcept { return count() == 0; }                       ///< count() == 0.

 private:
  struct alignas(cache_line_bytes) HeadTail {
    std::atomic<std::uint32_t> head{0};  // reserved by this side
    std::atomic<std::uint32_t> tail{0};  // published to the other side
  };

  explicit Ring(const RingOptions& o)
      : mask_(o.size - 1),
        capacity_(o.size),
        single_producer_(o.producer == Sync::single),
        single_consumer_(o.consumer == Sync::single),
        slots_(new T[o.size]) {}

  // Reserve `n` (or fewer, for bursts) slots on side `own`, bounded by `avail(other_tail, head)`.
  // Returns the old head through `old_head` and the count reserved.
  template <class Avail>
  static std::uint32_t reserve(HeadTail& own, const HeadTail& other, bool single, std::uint32_t n, bool exact,
                               Avail avail, std::uint32_t& old_head) noexcept {
    // acquire: pairs with the release of another reserver's CAS (multi), so the other tail we
    // read next is at least the one that reserver saw; a staler one could make `avail` wrap.
    old_head = own.head.load(std::memory_order_acquire);
    for (;;) {
      // acquire: pairs with the other side's release store of its tail, so its accesses to the
      // slots we are about to reuse or read happen before ours.
      const std::uint32_t other_tail = other.tail.load(std::memory_order_acquire);
      const std::uint32_t can = avail(other_tail, old_head);
      if (can < n) {
        if (exact || can == 0) return 0;
        n = can;
      }
      if (single) {
        own.head.store(old_head + n, std::memory_order_relaxed);
        return n;
      }
      // The CAS only reserves indices (publication happens through the tail), but the next
      // reserver must see an other-side tail no older than ours: release on success pairs with
      // its acquire of the head, acquire on failure is that acquire for us.
      if (own.head.compare_exchange_weak(old_head, old_head + n, std::memory_order_acq_rel, std::memory_order_acquire))
        return n;
    }
  }

  // Publish [old_head, old_head + n) on side `own` once earlier reservations are published.
  static void publish(HeadTail& own, bool single, std::uint32_t old_head, std::uint32_t n) noexcept {
    if (!single) {
      // Multi: earlier reservers publish first, in order. acquire: pairs with the previous
      // reserver's release of the tail, so its slot accesses are ordered before our release and
      // the other side, acquiring our tail, sees theirs too (a relaxed wait breaks that chain).
      while (own.tail.load(std::memory_order_acquire) != old_head) cpu_pause();
    }
    // release: pairs with the other side's acquire load of this tail in reserve().
    own.tail.store(old_head + n, std::memory_order_release);
  }

  std::uint32_t enqueue(std::span<const T> objs, bool exact) noexcept {
    std::uint32_t head = 0;
    const auto n = reserve(
        prod_, cons_, single_producer_, static_cast<std::uint32_t>(objs.size()), exact,
        [this](std::uint32_t cons_tail, std::uint32_t h) { return capacity_ + cons_tail - h; }, head);
    if (n == 0) return 0;
    copy_in(head, objs.data(), n);
    publish(prod_, single_producer_, head, n);
    return n;
  }

  std::uint32_t dequeue(std::span<T> out, bool exact) noexcept {
    std::uint32_t head = 0;
    const auto n = reserve(
        cons_, prod_, single_consumer_, static_cast<std::uint32_t>(out.size()), exact,
        [](std::uint32_t prod_tail, std::uint32_t h) { return prod_tail - h; }, head);
    if (n == 0) return 0;
    copy_out(head, out.data(), n);
    publish(cons_, single_consumer_, head, n);
    return n;
  }

  void copy_in(std::uint32_t head, const T* src, std::uint32_t n) noexcept {
    const std::uint32_t idx = head & mask_;
    const std::uint32_t first = std::min(n, capacity_ - idx);
    copy_burst(slots_.get() + idx, src, first);
    if (first < n) [[unlikely]]
      copy_burst(slots_.get(), src + first, n - first);
  }

  void copy_out(std::uint32_t head, T* dst, std::uint32_t n) const noexcept {
    const std::uint32_t idx = head & mask_;
    const std::uint32_t first = std::min(n, capacity_ - idx);
    copy_burst(dst, slots_.get() + idx, first);
    if (first < n) [[unlikely]]
      copy_burst(dst + first, slots_.get(), n - first);
  }

  // Read-only after creation.
  alignas(cache_line_bytes) const std::uint32_t mask_;
  const std::uint32_t capacity_;
  const bool single_producer_;
  const bool single_consumer_;
  const std::unique_ptr<T[]> slots_;
  HeadTail prod_;  // written by producers
  HeadTail cons_;  // written by consumers
};

static_assert(sizeof(std::atomic<std::uint32_t>) == 4);

}  // namespace ws
