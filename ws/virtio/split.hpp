// SPDX-License-Identifier: BSD-3-Clause
// Split virtqueue (virtio 1.2 §2.7): the ring layout, the device-side engine (vhost: take
// available chains, walk them as hostile input, return used entries) and the driver-side engine
// (virtio_user: post buffers, reclaim used ones). Shadow indices keep shared-memory index
// traffic to one load/store per burst.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ws/virtio/guest_memory.hpp"
#include "ws/virtio/virtqueue.hpp"
#include "ws/virtio/walk.hpp"

namespace ws::virtio {

struct SplitDesc {  // §2.7.5
  std::uint64_t addr;
  std::uint32_t len;
  std::uint16_t flags;
  std::uint16_t next;
};
static_assert(sizeof(SplitDesc) == 16);

struct UsedElem {  // §2.7.8
  std::uint32_t id;
  std::uint32_t len;
};
static_assert(sizeof(UsedElem) == 8);

inline constexpr std::uint16_t avail_f_no_interrupt = 1;  // §2.7.7: driver asks for no interrupts
inline constexpr std::uint16_t used_f_no_notify = 1;      // §2.7.10: device asks for no kicks

// Bytes of each area for a ring of `n` entries (with the event-index words).
constexpr std::size_t split_desc_bytes(std::uint32_t n) { return 16u * n; }
constexpr std::size_t split_avail_bytes(std::uint32_t n) { return 2u * (3u + n); }
constexpr std::size_t split_used_bytes(std::uint32_t n) { return 6u + 8u * n; }

// Where the three areas are, in our address space. Who writes: desc and avail the driver,
// used the device.
struct SplitRing {
  std::uint32_t size = 0;           // power of two, <= 32768
  SplitDesc* desc = nullptr;        // 16-byte aligned
  std::uint16_t* avail = nullptr;   // [0] flags, [1] idx, [2, 2+size) ring, [2+size] used_event
  std::uint16_t* used = nullptr;    // [0] flags, [1] idx, then UsedElem[size], then avail_event; 4-aligned

  std::uint16_t* avail_idx() const noexcept { return avail + 1; }
  std::uint16_t* avail_ring() const noexcept { return avail + 2; }
  std::uint16_t* used_event() const noexcept { return avail + 2 + size; }
  std::uint16_t* used_idx() const noexcept { return used + 1; }
  UsedElem* used_ring() const noexcept { return reinterpret_cast<UsedElem*>(used + 2); }
  std::uint16_t* avail_event() const noexcept { return reinterpret_cast<std::uint16_t*>(used_ring() + size); }
};

// Checks size (power of two, 1..32768) and alignments (§2.7 table: 16, 2, 4). Control path.
Result<void> check_split_ring(const SplitRing& ring);

enum class Pop : std::uint8_t { chain, empty, broken };

// Device side of one split ring. One thread (the polling lcore) calls everything but init.
template <std::size_t MaxSegments = default_max_segments>
class SplitDevice {
 public:
  using ChainT = Chain<MaxSegments>;

  // Control path, ring stopped. `ring` was checked by check_split_ring. Returns the index the
  // ring resumes at (next avail entry to take, next used entry to write): the used index the ring
  // holds. After a clean stop that is the base SET_VRING_BASE sent back (we return every chain we
  // take before we stop), so the base itself is not needed here.
  //
  // A frontend whose rings ran on while its backend was replaced (DPDK's virtio_user in server
  // mode, which sends base 0 whatever its rings hold) has its avail index far past the base, and
  // every chain up to the used index was returned by the backend before us. So, as DPDK's and
  // QEMU's backends do, resume at the used index: what the old backend took and never returned
  // is taken again (TX packets sent twice, RX buffers refilled). The frontend writes that index
  // as freely as the base, so it is trusted no further: pop() bounds the avail index by the ring
  // size from it, which only a frontend with more chains outstanding than its ring holds exceeds.
  std::uint16_t init(const SplitRing& ring, const GuestMemory* mem, QueueHealth* health, bool indirect,
                     bool event_idx) noexcept {
    ring_ = ring;
    mask_ = static_cast<std::uint16_t>(ring.size - 1);
    mem_ = mem;
    health_ = health;
    indirect_ = indirect;
    event_idx_ = event_idx;
    const std::uint16_t used = detail::load_once(ring.used_idx());
    last_avail_ = shadow_avail_ = used;
    used_ = signalled_used_ = used;
    return used;
  }

  // Takes the next available chain into `c` (validated, translated). Refusals are counted in
  // the QueueHealth and leave the queue broken.
  Pop pop(ChainT& c) noexcept {
    if (health_->broken()) [[unlikely]] return Pop::broken;
    if (last_avail_ == shadow_avail_) {
      // acquire: pairs with the driver's release store of avail->idx after it filled the ring.
      const std::uint16_t idx = __atomic_load_n(ring_.avail_idx(), __ATOMIC_ACQUIRE);
      // Never more chains available than the ring holds, counting those we took and have not
      // returned: a driver cannot have more outstanding (each takes a descriptor at least).
      if (static_cast<std::uint16_t>(idx - last_avail_) > ring_.size ||
          static_cast<std::uint16_t>(idx - used_) > ring_.size) [[unlikely]] {
        health_->report(QueueError::avail_index_jump, index_detail(idx, last_avail_));
        return Pop::broken;
      }
      shadow_avail_ = idx;
      if (idx == last_avail_) return Pop::empty;
    }
    const std::uint16_t head = detail::load_once(&ring_.avail_ring()[last_avail_ & mask_]);
    if (!walk(head, c)) [[unlikely]] return Pop::broken;
    ++last_avail_;
    return Pop::chain;
  }

  // Hot-path hint, as PackedDevice::peek_buffer: the buffer of the chain `ahead` places past the
  // next one, among those the last avail->idx read announced; nullptr otherwise.
  const std::byte* peek_buffer(std::uint16_t ahead) const noexcept {
    if (ahead >= static_cast<std::uint16_t>(shadow_avail_ - last_avail_)) return nullptr;
    const std::uint16_t head = detail::load_once(&ring_.avail_ring()[(last_avail_ + ahead) & mask_]);
    if (head >= ring_.size) return nullptr;
    return mem_->translate(detail::load_once(&ring_.desc[head].addr), 0);
  }

  // Hot-path hint: starts loading the head descriptors of up to `n` chains after the next one,
  // among those the last avail->idx read announced. Each pop() reads its head descriptor and
  // only then knows the next; the driver wrote them on its core, so without this every
  // descriptor line is a wait of its own. Only for prefetching: nothing is checked.
  void prefetch_heads(std::uint16_t n) const noexcept {
    const auto ready = static_cast<std::uint16_t>(shadow_avail_ - last_avail_);
    if (n > ready) n = ready;
    for (std::uint16_t k = 0; k < n; ++k) {
      const std::uint16_t head = detail::load_once(&ring_.avail_ring()[(last_avail_ + k) & mask_]);
      if (head < ring_.size) __builtin_prefetch(&ring_.desc[head]);
    }
  }

  // Gives back the last `chains` popped chains (not yet pushed used): they will pop again.
  void unpop(std::uint16_t chains) noexcept { last_avail_ = static_cast<std::uint16_t>(last_avail_ - chains); }

  // Split rings publish used entries by index. As PackedDevice::stage_used, a batch is published
  // by itself every `publish_every` entries, so the driver can start on it while we copy the
  // rest. Two cache lines of entries (16), as many packets as a packed group: a batch per line
  // handed our own driver bursts of 8, whose fixed cost per burst showed when lines move slowly
  // between cores; a batch per burst (32) stops the burst splitting, and both sides no longer
  // work at once.
  void stage_used(std::uint16_t id, std::uint32_t len) noexcept {
    push_used(id, len);
    if (used_ % publish_every == 0) flush_used();
  }

  // Available chains not yet taken (reads the shared index). Polling thread.
  std::uint16_t pending() noexcept {
    const std::uint16_t idx = __atomic_load_n(ring_.avail_idx(), __ATOMIC_ACQUIRE);
    return static_cast<std::uint16_t>(idx - last_avail_);
  }

  // Writes one used entry (not visible until flush_used). `id` is a chain's head.
  void push_used(std::uint16_t id, std::uint32_t len) noexcept {
    UsedElem* e = &ring_.used_ring()[used_ & mask_];
    e->id = id;
    e->len = len;
    ++used_;
  }
  // Publishes the used entries written since the last flush.
  void flush_used() noexcept {
    // release: the used entries (and the buffer contents) before the index. Pairs with the
    // driver's acquire load of used->idx.
    __atomic_store_n(ring_.used_idx(), used_, __ATOMIC_RELEASE);
  }

  // Whether the driver wants an interrupt for what was flushed since the last call (§2.7.7).
  bool needs_notify() noexcept {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);  // used idx store before the event read (§2.7.7.2)
    const std::uint16_t old = signalled_used_;
    signalled_used_ = used_;
    if (event_idx_) return need_event(detail::load_once(ring_.used_event()), used_, old);
    return (detail::load_once(ring_.avail) & avail_f_no_interrupt) == 0;
  }
  // Ask the driver not to kick us (we poll). §2.7.10.
  void suppress_kicks(bool on) noexcept {
    __atomic_store_n(ring_.used, static_cast<std::uint16_t>(on ? used_f_no_notify : 0), __ATOMIC_RELAXED);
  }

  std::uint16_t last_avail_idx() const noexcept { return last_avail_; }  // GET_VRING_BASE
  std::uint16_t used_idx() const noexcept { return used_; }
  std::uint32_t size() const noexcept { return ring_.size; }

 private:
  bool walk(std::uint16_t head, ChainT& c) noexcept {
    detail::clear(c);
    c.id = head;
    if (head >= ring_.size) {
      health_->report(QueueError::head_out_of_range);
      return false;
    }
    std::uint16_t i = head;
    for (std::uint32_t steps = 0;; ++steps) {
      if (steps == ring_.size) {  // a chain never holds more descriptors than the ring
        health_->report(QueueError::chain_loop);
        return false;
      }
      const detail::DescCopy d = copy(&ring_.desc[i]);
      ++c.ring_descs;
      if (d.flags & desc_flag::indirect) return walk_indirect(d, c);
      if (!detail::append(c, *mem_, d, *health_)) return false;
      if (!(d.flags & desc_flag::next)) return true;
      if (d.next_or_id >= ring_.size) {
        health_->report(QueueError::next_out_of_range);
        return false;
      }
      i = d.next_or_id;
    }
  }

  // §2.7.5.3: an indirect descriptor ends the chain and its table is a chain of its own.
  bool walk_indirect(const detail::DescCopy& d, ChainT& c) noexcept {
    if (!indirect_) {
      health_->report(QueueError::indirect_disabled);
      return false;
    }
    if (d.flags & desc_flag::next) {  // §2.7.5.3.1: driver MUST NOT set both
      health_->report(QueueError::indirect_with_next);
      return false;
    }
    const std::byte* table = nullptr;
    const std::uint32_t n = detail::map_indirect(*mem_, d, ring_.size, table, *health_);
    if (n == 0) return false;
    const auto* descs = reinterpret_cast<const SplitDesc*>(table);
    std::uint32_t i = 0;
    for (std::uint32_t steps = 0;; ++steps) {
      if (steps == n) {
        health_->report(QueueError::chain_loop);
        return false;
      }
      const detail::DescCopy e = copy(&descs[i]);
      if (e.flags & desc_flag::indirect) {
        health_->report(QueueError::indirect_nested);
        return false;
      }
      if (!detail::append(c, *mem_, e, *health_)) return false;
      if (!(e.flags & desc_flag::next)) return true;
      if (e.next_or_id >= n) {
        health_->report(QueueError::next_out_of_range);
        return false;
      }
      i = e.next_or_id;
    }
  }

  static detail::DescCopy copy(const SplitDesc* p) noexcept {
    return {detail::load_once(&p->addr), detail::load_once(&p->len), detail::load_once(&p->flags),
            detail::load_once(&p->next)};
  }

  // Used entries per published batch (see stage_used): two cache lines.
  static constexpr std::uint16_t publish_every = 2 * 64 / sizeof(UsedElem);

  SplitRing ring_{};
  const GuestMemory* mem_ = nullptr;
  QueueHealth* health_ = nullptr;
  std::uint16_t mask_ = 0;
  std::uint16_t last_avail_ = 0;    // next avail entry to take
  std::uint16_t shadow_avail_ = 0;  // avail->idx as last read
  std::uint16_t used_ = 0;          // next used entry to write (shadow of used->idx)
  std::uint16_t signalled_used_ = 0;
  bool indirect_ = false;
  bool event_idx_ = false;
};

// A buffer the driver posts: an address in the shared memory (IOVA = VA) and who writes it.
struct Buffer {
  std::uint64_t addr;
  std::uint32_t len;
  bool device_writes;
};

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
        : desc_(d.ring_.desc), avail_ring_(d.ring_.avail_ring()), links_(d.next_.data()),
          chain_len_(d.chain_len_.data()), cookies_(d.cookie_.data()), free_(d.free_), mask_(d.mask_),
          next_(InOrder ? d.next_desc_ : d.free_head_), avail_(d.avail_) {}
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

  // Takes up to `max` used chains: their cookies and the lengths the device wrote. A device that
  // returns an id we never posted, or moves used->idx too far, breaks the queue.
  std::uint16_t reclaim(Cookie* cookies, std::uint32_t* lens, std::uint16_t max) noexcept {
    if (health_->broken()) [[unlikely]] return 0;
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
