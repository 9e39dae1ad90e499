// SPDX-License-Identifier: BSD-3-Clause
// Split virtqueue, device side (vhost): take available chains, walk them as hostile input,
// return used entries. Shadow indices keep shared-memory index traffic to one load/store per
// burst.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ws/virtio/ring/guest_memory.hpp"
#include "ws/virtio/ring/split.hpp"
#include "ws/virtio/ring/virtqueue.hpp"
#include "ws/virtio/ring/walk.hpp"

namespace ws::virtio {

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
    if (health_->broken()) [[unlikely]]
      return Pop::broken;
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
    if (!walk(head, c)) [[unlikely]]
      return Pop::broken;
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
  // Asks the driver to kick at its next avail chain (with EVENT_IDX the driver reads avail_event,
  // not the flag) and returns whether one came before the request was visible: the caller must
  // then not wait for the kick.
  bool arm_kick() noexcept {
    if (event_idx_) __atomic_store_n(ring_.avail_event(), last_avail_, __ATOMIC_RELAXED);
    suppress_kicks(false);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);  // the request before reading the driver's index
    return __atomic_load_n(ring_.avail_idx(), __ATOMIC_ACQUIRE) != last_avail_;
  }
  // Back to polling: no kick wanted (with EVENT_IDX, not before avail_idx wraps around).
  void disarm_kick() noexcept {
    if (event_idx_)
      __atomic_store_n(ring_.avail_event(), static_cast<std::uint16_t>(last_avail_ - 1), __ATOMIC_RELAXED);
    suppress_kicks(true);
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

}  // namespace ws::virtio
