// SPDX-License-Identifier: BSD-3-Clause
// Packed virtqueue, driver side (virtio_user, net_virtio): post buffers, reclaim used ones.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ws/virtio/ring/packed.hpp"
#include "ws/virtio/ring/virtqueue.hpp"

namespace ws::virtio {

// Driver side of one packed ring. InOrder (VIRTIO_F_IN_ORDER negotiated; a type, picked once):
// the device may return one used descriptor for a batch (§2.8.20), the chains up to and
// including the returned id all done.
template <class Cookie, bool InOrder = false>
class PackedDriver {
 public:
  // Control path. Also resets a running ring to its first state (index 0, wrap counters 1, every
  // id free) once drain() has taken the outstanding chains and the ring memory is zeroed: what a
  // new device is then given with SET_VRING_BASE 0x8000.
  void init(const RingArea& a, QueueHealth* health, bool event_idx) {
    init(PackedRing{a.size, reinterpret_cast<PackedDesc*>(a.desc), reinterpret_cast<EventSuppress*>(a.driver),
                    reinterpret_cast<EventSuppress*>(a.device)},
         health, event_idx);
  }
  void init(const PackedRing& ring, QueueHealth* health, bool event_idx) {
    ring_ = ring;
    health_ = health;
    event_idx_ = event_idx;
    ids_.assign(ring.size, IdSlot{});
    if constexpr (!InOrder) {
      free_ids_.assign(std::bit_ceil(ring.size), 0);
      free_mask_ = static_cast<std::uint32_t>(free_ids_.size() - 1);
      for (std::uint32_t i = 0; i < ring.size; ++i) free_ids_[i] = static_cast<std::uint16_t>(i);
    }
    free_take_ = 0;
    free_give_ = ring.size;  // past the ids just written: the FIFO holds them all
    free_ = ring.size;
    outstanding_ = 0;
    avail_ = used_ = kicked_ = 0;
    avail_wrap_ = used_wrap_ = true;
    batch_id_ = -1;
  }

  std::uint32_t free_descs() const noexcept { return free_; }

  // Writes a chain of n buffers; the first descriptor's flags are stored last (release), so the
  // device sees the chain whole (§2.8.6). False when fewer than n descriptors are free.
  bool post(const Buffer* bufs, std::uint16_t n, Cookie cookie) noexcept {
    Posts p = begin_posts();
    const bool ok = p.add(bufs, n, cookie);
    end_posts(p);
    return ok;
  }

 private:
  // What the driver keeps per buffer id, together: a completion touches one line, not three.
  struct IdSlot {
    Cookie cookie{};
    std::uint16_t chain_len = 0;  // 0 = not outstanding
  };

 public:
  // A burst's posts, on a copy of the ring state that end_posts() writes back: on the members,
  // each descriptor's 16-bit id and flags stores could alias them, and the compiler reloaded the
  // state after every one. Between begin_posts() and end_posts() nothing else may use the
  // driver. Posts and reclaim's walk are forced inline: out of line, their state lives in
  // memory again (bench/README.md has the instruction counts).
  class Posts {
   public:
    // As post(). With n a constant 1 (a packet in one buffer) the chain loop drops out.
    [[gnu::always_inline]] bool add(const Buffer* bufs, std::uint16_t n, Cookie cookie) noexcept {
      if (n == 0 || n > free_) return false;
      // In order: the id is the head's position, so the device's batch answers map to positions.
      std::uint32_t id = avail_;
      if constexpr (!InOrder) {
        id = free_ids_[free_take_++ & free_mask_];
      }
      PackedDesc* head = &desc_[avail_];
      const std::uint16_t head_flags = put(bufs[0], id, n > 1);
      for (std::uint16_t k = 1; k < n; ++k) {
        PackedDesc* d = &desc_[avail_];
        d->flags = put(bufs[k], id, k + 1 < n);
      }
      // release: the chain's other descriptors before the head's flags. Pairs with the device's acquire.
      __atomic_store_n(&head->flags, head_flags, __ATOMIC_RELEASE);
      free_ -= n;
      ids_[id].chain_len = n;
      ids_[id].cookie = cookie;
      if constexpr (InOrder) ++added_;  // out of order, the free ids taken count the chains
      return true;
    }

   private:
    friend class PackedDriver;
    explicit Posts(PackedDriver& d) noexcept
        : desc_(d.ring_.desc),
          ids_(d.ids_.data()),
          free_ids_(d.free_ids_.data()),
          size_(d.ring_.size),
          free_(d.free_),
          avail_(d.avail_),
          free_take_(d.free_take_),
          free_mask_(d.free_mask_),
          avail_bits_(packed_avail_bits(d.avail_wrap_)) {}
    // Writes b at the next position and moves past it; returns the flags that make it available.
    [[gnu::always_inline]] std::uint16_t put(const Buffer& b, std::uint32_t id, bool next) noexcept {
      PackedDesc& d = desc_[avail_];
      const auto flags = static_cast<std::uint16_t>((b.device_writes ? desc_flag::write : 0) |
                                                    (next ? desc_flag::next : 0) | avail_bits_);
      d.addr = b.addr;
      d.len = b.len;
      d.id = static_cast<std::uint16_t>(id);
      if (++avail_ == size_) {
        avail_ = 0;
        avail_bits_ ^= desc_flag::avail | desc_flag::used;  // the wrap counter flips
      }
      return flags;
    }
    PackedDesc* desc_;
    IdSlot* ids_;
    std::uint16_t* free_ids_;
    std::uint32_t size_;
    std::uint32_t free_;
    std::uint32_t avail_;      // 32-bit copies: no 16-bit arithmetic in the loop
    std::uint32_t free_take_;  // free-running; & free_mask_ indexes free_ids_
    std::uint32_t free_mask_;
    std::uint16_t avail_bits_;  // AVAIL and USED as the current wrap counter makes them available
    std::uint32_t added_ = 0;
  };
  Posts begin_posts() noexcept { return Posts(*this); }
  void end_posts(const Posts& p) noexcept {
    outstanding_ += InOrder ? p.added_ : p.free_take_ - free_take_;  // before free_take_ moves
    avail_ = static_cast<std::uint16_t>(p.avail_);
    avail_wrap_ = p.avail_bits_ == packed_avail_bits(true);
    free_take_ = p.free_take_;
    free_ = p.free_;
  }

  // Asks for the descriptor lines the next n posts write, all at once and for writing. The
  // device read them last, so each store would otherwise wait for its line in turn, as many at
  // a time as the store buffer holds.
  void prefetch_post(std::uint32_t n) const noexcept {
    constexpr std::uint32_t per_line = 64 / sizeof(PackedDesc);
    if (n > free_) n = free_;
    if (n == 0) return;
    std::uint32_t line = avail_ - avail_ % per_line;
    const std::uint32_t end = avail_ + n;  // may pass the ring's end: wrap below
    for (std::uint32_t at = line; at < end; at += per_line)
      __builtin_prefetch(&ring_.desc[at < ring_.size ? at : at - ring_.size], 1);
  }

  // Nothing to publish in a packed ring; returns whether the device wants a kick (§2.8.10).
  bool publish() noexcept {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    const std::uint16_t old = kicked_;
    kicked_ = avail_;
    const std::uint16_t flags = detail::load_once(&ring_.device_event->flags);
    if (flags != EventSuppress::desc || !event_idx_) return flags != EventSuppress::disable;
    const std::uint16_t off_wrap = detail::load_once(&ring_.device_event->off_wrap);
    auto event = static_cast<std::uint16_t>(off_wrap & 0x7fff);
    if (((off_wrap >> 15) != 0) != avail_wrap_) event = static_cast<std::uint16_t>(event - ring_.size);
    return need_event(event, avail_, old);
  }
  void suppress_interrupts(bool on) noexcept {
    __atomic_store_n(&ring_.driver_event->flags, on ? EventSuppress::disable : EventSuppress::enable, __ATOMIC_RELAXED);
  }
  // Asks for an interrupt at the next used chain (§2.8.10: flags enable, whatever EVENT_IDX) and
  // returns whether one came before the request was visible: the caller must then not wait.
  bool arm_interrupt() noexcept {
    suppress_interrupts(false);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);  // the request before reading the descriptor's flags
    return used_pending();
  }
  // Back to polling.
  void disarm_interrupt() noexcept { suppress_interrupts(true); }
  // Whether the device returned a chain no reclaim took yet.
  bool used_pending() const noexcept {
    const std::uint16_t flags = __atomic_load_n(&ring_.desc[used_].flags, __ATOMIC_ACQUIRE);
    return outstanding_ != 0 && packed_wrap_flags(flags) == packed_used_bits(used_wrap_);
  }

  // Takes up to `max` completed chains. Ids we did not post break the queue.
  std::uint16_t reclaim(Cookie* cookies, std::uint32_t* lens, std::uint16_t max) noexcept {
    if (health_->broken()) [[unlikely]]
      return 0;
    // The walk runs on a copy of the ring state, written back at the end. On the members
    // themselves, each acquire load below makes the compiler store and reload them, and every
    // descriptor's position would wait on the store of the one before.
    Walk w{ring_.desc,       ids_.data(), ring_.size, used_, packed_used_bits(used_wrap_),
           free_ids_.data(), free_give_,  free_mask_};
    // Each chain taken was outstanding: no more than that many, whatever the device writes.
    const std::uint16_t limit = max < outstanding_ ? max : static_cast<std::uint16_t>(outstanding_);
    // Only once the device has returned the next chain: on an RX ring every descriptor is
    // outstanding, and prefetching lines the device is still writing takes them from it.
    // Out of order, no further than prefetch_ahead descriptors: see there.
    if (limit > 0 && is_used(w)) prefetch_used_lines(!InOrder && limit > prefetch_ahead ? prefetch_ahead : limit);
    std::uint16_t done = 0;
    if constexpr (!InOrder) {
      // Every used descriptor names its chain's id.
      std::uint16_t id;
      std::uint32_t len;
      while (done < limit && read_used(w, id, len, lens != nullptr)) take(w, id, len, cookies, lens, done++);
    } else {
      std::int32_t batch_id = batch_id_;
      std::uint32_t batch_len = batch_len_;
      while (done < limit) {
        if (batch_id < 0) {
          std::uint16_t id;
          if (!read_used(w, id, batch_len, true)) break;
          batch_id = id;  // every chain from the used position through `id` is done
        }
        // Outstanding chains sit contiguously from the used position (ids are positions), so the
        // batch's id is reached; a batch cut by `max` resumes here on the next call without
        // rereading the ring.
        const auto cur = static_cast<std::uint16_t>(w.used);
        if (w.ids[cur].chain_len == 0) [[unlikely]] {
          health_->report(QueueError::used_bad_id, cur);
          batch_id = -1;
          break;
        }
        const bool last = cur == batch_id;
        take(w, cur, last ? batch_len : 0, cookies, lens, done++);
        if (last) batch_id = -1;
      }
      batch_id_ = batch_id;
      batch_len_ = batch_len;
    }
    // The chains taken free what the used position passed: counted here, not per chain. It
    // passes at most the ring's size (what was outstanding), so the wrap flipped once at most.
    const bool flipped = w.used_bits != packed_used_bits(used_wrap_);
    free_ += w.used + (flipped ? ring_.size : 0) - used_;
    used_ = static_cast<std::uint16_t>(w.used);
    used_wrap_ = flipped != used_wrap_;
    outstanding_ -= done;
    free_give_ = w.free_give;
    return done;
  }

  std::uint32_t outstanding() const noexcept { return outstanding_; }

  // Control path, ring stopped: hands every outstanding cookie to `f` and forgets them.
  template <class F>
  void drain(F&& f) {
    for (std::uint32_t i = 0; i < ring_.size; ++i)
      if (ids_[i].chain_len != 0) {
        f(ids_[i].cookie);
        ids_[i].chain_len = 0;
      }
    outstanding_ = 0;
  }

 private:
  // How far ahead an out-of-order reclaim prefetches: 4 lines. A device publishes its used
  // descriptors a few lines at a time while it fills the rest (our net_vhost every 16, DPDK's
  // every 4), and a prefetch of a line it is still writing takes the line from it: with the
  // whole burst (8 lines) our driver side cost more in the host's slow mode (bench/README.md).
  // In order, the same cap measured mixed and is not applied.
  static constexpr std::uint32_t prefetch_ahead = 16;
  // The used descriptors of a burst are read one after the other, each load behind the branch
  // on the one before, so their lines would arrive one or two at a time. Start loading the
  // lines of the next n descriptors (one-descriptor chains: consecutive) while the first is read.
  void prefetch_used_lines(std::uint32_t n) const noexcept {
    constexpr std::uint32_t per_line = 64 / sizeof(PackedDesc);
    for (std::uint32_t k = per_line - used_ % per_line; k < n; k += per_line) {
      std::uint32_t i = used_ + k;
      if (i >= ring_.size) i -= ring_.size;
      __builtin_prefetch(&ring_.desc[i]);
    }
  }
  // reclaim()'s copy of the ring state, in what the loop compares and indexes with: the wrap
  // counter as the flag bits a used descriptor carries, the position as 32 bits.
  struct Walk {
    PackedDesc* desc;
    IdSlot* ids;
    std::uint32_t size;
    std::uint32_t used;
    std::uint16_t used_bits;
    std::uint16_t* free_ids;
    std::uint32_t free_give;
    std::uint32_t free_mask;
  };
  [[gnu::always_inline]] static bool is_used(const Walk& w) noexcept {
    const std::uint16_t flags = __atomic_load_n(&w.desc[w.used].flags, __ATOMIC_RELAXED);
    return packed_wrap_flags(flags) == w.used_bits;
  }
  // Reads the used descriptor at the walk's position. False when the device has not returned it,
  // or when it names an id that is not outstanding (reported: the queue is broken).
  [[gnu::always_inline]] bool read_used(const Walk& w, std::uint16_t& id, std::uint32_t& len, bool want_len) noexcept {
    const PackedDesc* p = &w.desc[w.used];
    // acquire: pairs with the device's release store of the used flags.
    const std::uint16_t flags = __atomic_load_n(&p->flags, __ATOMIC_ACQUIRE);
    if (packed_wrap_flags(flags) != w.used_bits) return false;
    id = detail::load_once(&p->id);
    if (want_len) len = detail::load_once(&p->len);
    if (id >= w.size || w.ids[id].chain_len == 0) [[unlikely]] {
      health_->report(QueueError::used_bad_id, id);
      return false;
    }
    return true;
  }
  [[gnu::always_inline]] static void take(Walk& w, std::uint16_t id, std::uint32_t len, Cookie* cookies,
                                          std::uint32_t* lens, std::uint16_t done) noexcept {
    IdSlot& slot = w.ids[id];
    const std::uint16_t n = slot.chain_len;
    cookies[done] = slot.cookie;
    if (lens != nullptr) lens[done] = len;
    slot.chain_len = 0;
    if constexpr (!InOrder) w.free_ids[w.free_give++ & w.free_mask] = id;
    w.used += n;
    if (w.used >= w.size) {
      w.used -= w.size;
      w.used_bits ^= desc_flag::avail | desc_flag::used;  // the wrap counter flips
    }
  }

  PackedRing ring_{};
  QueueHealth* health_ = nullptr;
  std::vector<IdSlot> ids_;
  // Out of order: the free ids, oldest first, in a ring of their own (an id comes back only
  // while outstanding, so at most once). Taking one is a load at a known index, not a walk
  // that waits on the id before it.
  std::vector<std::uint16_t> free_ids_;
  // free_take_ and free_give_ run freely; & free_mask_ (free_ids_ has a power-of-two size) is
  // one instruction where a wrap at the ring's size was three.
  std::uint32_t free_take_ = 0, free_give_ = 0, free_mask_ = 0;
  std::uint32_t free_ = 0;
  std::uint32_t outstanding_ = 0;
  std::int32_t batch_id_ = -1;  // in-order batch being retired (-1: none)
  std::uint32_t batch_len_ = 0;
  std::uint16_t avail_ = 0, used_ = 0, kicked_ = 0;
  bool avail_wrap_ = true, used_wrap_ = true;
  bool event_idx_ = false;
};

}  // namespace ws::virtio
