// SPDX-License-Identifier: BSD-3-Clause
// Split virtqueue, driver side (virtio_user, net_virtio): post buffers, reclaim used ones.
// Shadow indices keep shared-memory index traffic to one load/store per burst.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ws/virtio/ring/split.hpp"
#include "ws/virtio/ring/virtqueue.hpp"

namespace ws::virtio {

// Driver side of one split ring; Cookie identifies what a chain carried (an Mbuf*). InOrder:
// VIRTIO_F_IN_ORDER negotiated (a type, picked once). One thread calls post/publish/reclaim;
// init is control path.
template <class Cookie, bool InOrder = false>
class SplitDriver {
 public:
  // Control path: `ring` lies in memory the device shares, zeroed. Allocates the private state.
  // InOrder: descriptors are used in table order, as DPDK's in-order driver does (virtio 1.2
  // §2.7.5.1): a chain of one descriptor sits at the avail slot of the same number, so after
  // the first lap the avail ring is never written again and its lines stay clean in the
  // device's cache. Completions come back in posting order, so
  // reclaim reads only used->idx (and the lengths the caller asks for), never the ids: the
  // device may skip the entries of a batch but the last (§2.7.8.2), and a TX ring's used lines
  // stay the device's to write.
  void init(const RingArea& a, QueueHealth* health, bool event_idx) {
    init(SplitRing{a.size, reinterpret_cast<SplitDesc*>(a.desc), reinterpret_cast<std::uint16_t*>(a.driver),
                   reinterpret_cast<std::uint16_t*>(a.device)},
         health, event_idx);
  }
  void init(const SplitRing& ring, QueueHealth* health, bool event_idx) {
    ring_ = ring;
    mask_ = static_cast<std::uint16_t>(ring.size - 1);
    health_ = health;
    event_idx_ = event_idx;
    next_desc_ = done_desc_ = 0;
    next_.assign(ring.size, 0);
    chain_len_.assign(ring.size, 0);
    cookie_.assign(ring.size, Cookie{});
    for (std::uint32_t i = 0; i < ring.size; ++i) next_[i] = static_cast<std::uint16_t>((i + 1) & mask_);
    free_head_ = 0;
    free_tail_ = mask_;
    free_ = ring.size;
    avail_ = kicked_avail_ = last_used_ = 0;
  }

  std::uint32_t free_descs() const noexcept { return free_; }

  // Fills a chain of `n` (>= 1) buffers and puts its head in the avail ring (visible after
  // publish). False when fewer than n descriptors are free.
  bool post(const Buffer* bufs, std::uint16_t n, Cookie cookie) noexcept {
    Posts p = begin_posts();
    const bool ok = p.add(bufs, n, cookie);
    end_posts(p);
    return ok;
  }

  // A burst's posts on a copy of the ring state, as PackedDriver::Posts.
  class Posts {
   public:
    // As post().
    [[gnu::always_inline]] bool add(const Buffer* bufs, std::uint16_t n, Cookie cookie) noexcept {
      if (n == 0 || n > free_) return false;
      const std::uint32_t head = next_;
      std::uint32_t i = head;
      for (std::uint16_t k = 0; k < n; ++k) {
        SplitDesc& d = desc_[i];
        d.addr = bufs[k].addr;
        d.len = bufs[k].len;
        d.flags = static_cast<std::uint16_t>((bufs[k].device_writes ? desc_flag::write : 0) |
                                             (k + 1 < n ? desc_flag::next : 0));
        d.next = links_[i];  // in order, the free list is the table's order: i + 1
        if (k + 1 < n) i = links_[i];
      }
      next_ = links_[i];
      free_ -= n;
      chain_len_[head] = n;
      cookies_[head] = cookie;
      std::uint16_t& slot = avail_ring_[avail_ & mask_];
      // unchanged after a lap while completions come in order
      if (detail::load_once(&slot) != head) slot = static_cast<std::uint16_t>(head);
      ++avail_;
      return true;
    }

   private:
    friend class SplitDriver;
    explicit Posts(SplitDriver& d) noexcept
        : desc_(d.ring_.desc),
          avail_ring_(d.ring_.avail_ring()),
          links_(d.next_.data()),
          chain_len_(d.chain_len_.data()),
          cookies_(d.cookie_.data()),
          free_(d.free_),
          mask_(d.mask_),
          next_(InOrder ? d.next_desc_ : d.free_head_),
          avail_(d.avail_) {}
    SplitDesc* desc_;
    std::uint16_t* avail_ring_;
    const std::uint16_t* links_;
    std::uint16_t* chain_len_;
    Cookie* cookies_;
    std::uint32_t free_;
    std::uint32_t mask_;  // 32-bit copies: no 16-bit arithmetic in the loop
    std::uint32_t next_;  // the next chain's head: in order the table's next, else the free list's
    std::uint32_t avail_;
  };
  Posts begin_posts() noexcept { return Posts(*this); }
  void end_posts(const Posts& p) noexcept {
    (InOrder ? next_desc_ : free_head_) = static_cast<std::uint16_t>(p.next_);
    free_ = p.free_;
    avail_ = static_cast<std::uint16_t>(p.avail_);
  }

  // Asks for the descriptor lines the next n one-descriptor posts write, all at once and for
  // writing (see PackedDriver::prefetch_post).
  void prefetch_post(std::uint32_t n) const noexcept {
    constexpr std::uint32_t per_line = 64 / sizeof(SplitDesc);
    if (n > free_) n = free_;
    std::uint32_t i = InOrder ? next_desc_ : free_head_;
    if constexpr (InOrder) {  // the table's order: one prefetch per line
      for (std::uint32_t k = 0; k < n + i % per_line; k += per_line)
        __builtin_prefetch(&ring_.desc[(i - i % per_line + k) & mask_], 1);
    } else {  // the free list's order: a line asked for twice costs less than telling it apart
      for (std::uint32_t k = 0; k < n; ++k, i = next_[i]) __builtin_prefetch(&ring_.desc[i], 1);
    }
  }

  // Makes posted chains visible to the device; returns whether it wants a kick (§2.7.10).
  bool publish() noexcept {
    // release: descriptors and avail entries before the index. Pairs with the device's acquire.
    __atomic_store_n(ring_.avail_idx(), avail_, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);  // index store before reading the device's event
    const std::uint16_t old = kicked_avail_;
    kicked_avail_ = avail_;
    if (event_idx_) return need_event(detail::load_once(ring_.avail_event()), avail_, old);
    return (detail::load_once(ring_.used) & used_f_no_notify) == 0;
  }
  // Ask the device not to interrupt us (we poll).
  void suppress_interrupts(bool on) noexcept {
    __atomic_store_n(ring_.avail, static_cast<std::uint16_t>(on ? avail_f_no_interrupt : 0), __ATOMIC_RELAXED);
  }
  // Asks for an interrupt at the next used chain (§2.7.10: with EVENT_IDX the device reads
  // used_event, not the flag) and returns whether one came before the request was visible: the
  // caller must then not wait for the interrupt.
  bool arm_interrupt() noexcept {
    if (event_idx_) __atomic_store_n(ring_.used_event(), last_used_, __ATOMIC_RELAXED);
    suppress_interrupts(false);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);  // the request before reading the device's index
    return used_pending();
  }
  // Back to polling: no interrupt wanted (with EVENT_IDX, not before used_idx wraps around).
  void disarm_interrupt() noexcept {
    if (event_idx_) __atomic_store_n(ring_.used_event(), static_cast<std::uint16_t>(last_used_ - 1), __ATOMIC_RELAXED);
    suppress_interrupts(true);
  }
  // Whether the device returned chains no reclaim took yet.
  bool used_pending() const noexcept { return __atomic_load_n(ring_.used_idx(), __ATOMIC_ACQUIRE) != last_used_; }

  // Takes up to `max` used chains: their cookies and the lengths the device wrote. A device that
  // returns an id we never posted, or moves used->idx too far, breaks the queue.
  std::uint16_t reclaim(Cookie* cookies, std::uint32_t* lens, std::uint16_t max) noexcept {
    if (health_->broken()) [[unlikely]]
      return 0;
    // acquire: pairs with the device's release store of used->idx.
    const std::uint16_t used = __atomic_load_n(ring_.used_idx(), __ATOMIC_ACQUIRE);
    const std::uint16_t ready = static_cast<std::uint16_t>(used - last_used_);
    if (ready > static_cast<std::uint16_t>(avail_ - last_used_)) [[unlikely]] {
      health_->report(QueueError::used_index_jump, index_detail(used, last_used_));
      return 0;
    }
    const std::uint16_t n = ready < max ? ready : max;
    if constexpr (InOrder) return reclaim_in_order(cookies, lens, n);
    // On a copy of the state in locals, written back once: on the members, every store into
    // the 16-bit link and length tables could alias them, and the compiler reloaded them all.
    const UsedElem* used_ring = ring_.used_ring();
    std::uint16_t* const chain_len = chain_len_.data();
    std::uint16_t* const links = next_.data();
    const std::uint32_t size = ring_.size, mask = mask_;
    std::uint32_t last_used = last_used_, free = free_, free_head = free_head_, free_tail = free_tail_;
    std::uint16_t k = 0;
    for (; k < n; ++k) {
      const UsedElem* e = &used_ring[last_used & mask];
      const std::uint32_t id = detail::load_once(&e->id);
      if (id >= size || chain_len[id] == 0) [[unlikely]] {
        health_->report(QueueError::used_bad_id, id);
        break;
      }
      cookies[k] = cookie_[id];
      if (lens != nullptr) lens[k] = detail::load_once(&e->len);
      // Free the chain: first in, first out, as the ids were posted. While the device completes
      // in order, slot s gets id s again each lap and posts leave the avail ring's lines clean.
      const std::uint16_t descs = chain_len[id];
      std::uint32_t last = id;
      for (std::uint16_t j = 1; j < descs; ++j) last = links[last];  // our private links, not the ring's
      if (free == 0) {
        free_head = id;
      } else {
        links[free_tail] = static_cast<std::uint16_t>(id);
      }
      free_tail = last;
      free += descs;
      chain_len[id] = 0;
      ++last_used;
    }
    last_used_ = static_cast<std::uint16_t>(last_used);
    free_ = free;
    free_head_ = static_cast<std::uint16_t>(free_head);
    free_tail_ = static_cast<std::uint16_t>(free_tail);
    return k;
  }

  // Control path, ring stopped: hands every outstanding cookie to `f` and forgets them.
  template <class F>
  void drain(F&& f) {
    for (std::uint32_t i = 0; i < ring_.size; ++i)
      if (chain_len_[i] != 0) {
        f(cookie_[i]);
        chain_len_[i] = 0;
      }
  }

  std::uint16_t avail_idx() const noexcept { return avail_; }
  std::uint16_t outstanding() const noexcept { return static_cast<std::uint16_t>(avail_ - last_used_); }

 private:
  // The next n chains in posting order; their ids are ours, not read from the ring.
  // On locals, as reclaim() (see there).
  std::uint16_t reclaim_in_order(Cookie* cookies, std::uint32_t* lens, std::uint16_t n) noexcept {
    const UsedElem* used_ring = ring_.used_ring();
    std::uint16_t* const chain_len = chain_len_.data();
    const std::uint32_t mask = mask_;
    std::uint32_t head = done_desc_, free = free_, last_used = last_used_;
    for (std::uint16_t k = 0; k < n; ++k) {
      const std::uint16_t descs = chain_len[head];
      cookies[k] = cookie_[head];
      if (lens != nullptr) lens[k] = detail::load_once(&used_ring[(last_used + k) & mask].len);
      chain_len[head] = 0;
      free += descs;
      head = (head + descs) & mask;
    }
    done_desc_ = static_cast<std::uint16_t>(head);
    free_ = free;
    last_used_ = static_cast<std::uint16_t>(last_used + n);
    return n;
  }

  SplitRing ring_{};
  QueueHealth* health_ = nullptr;
  std::vector<std::uint16_t> next_;       // private copy of the links: the device cannot corrupt it
  std::vector<std::uint16_t> chain_len_;  // 0 = not outstanding
  std::vector<Cookie> cookie_;
  std::uint16_t mask_ = 0;
  std::uint16_t free_head_ = 0;
  std::uint16_t free_tail_ = 0;  // out of order: the last free descriptor, where release() appends
  std::uint32_t free_ = 0;
  std::uint16_t avail_ = 0;  // shadow of avail->idx
  std::uint16_t kicked_avail_ = 0;
  std::uint16_t last_used_ = 0;
  std::uint16_t next_desc_ = 0;  // in order: the next chain's head (table order)
  std::uint16_t done_desc_ = 0;  // in order: the head of the oldest chain not reclaimed
  bool event_idx_ = false;
};

}  // namespace ws::virtio
