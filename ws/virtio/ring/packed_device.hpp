// SPDX-License-Identifier: BSD-3-Clause
// Packed virtqueue, device side (vhost): take available chains, walk them as hostile input,
// mark them used.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ws/virtio/ring/guest_memory.hpp"
#include "ws/virtio/ring/packed.hpp"
#include "ws/virtio/ring/virtqueue.hpp"
#include "ws/virtio/ring/walk.hpp"

namespace ws::virtio {

// Device side of one packed ring. One thread (the polling lcore) calls everything but init.
template <std::size_t MaxSegments = default_max_segments>
class PackedDevice {
 public:
  using ChainT = Chain<MaxSegments>;

  // Control path. `base` as SET_VRING_BASE sends it: bits 0-14 index, bit 15 wrap counter.
  void init(const PackedRing& ring, const GuestMemory* mem, QueueHealth* health, bool indirect, bool event_idx,
            std::uint16_t base) noexcept {
    ring_ = ring;
    mem_ = mem;
    health_ = health;
    indirect_ = indirect;
    event_idx_ = event_idx;
    avail_ = used_ = signalled_used_ = static_cast<std::uint16_t>(base & 0x7fff);
    avail_wrap_ = used_wrap_ = (base & 0x8000) != 0;
    staged_count_ = 0;
    taken_ = 0;
    if (avail_ >= ring_.size) avail_ = used_ = signalled_used_ = 0;  // checked by the caller; be safe
  }

  Pop pop(ChainT& c) noexcept {
    if (health_->broken()) [[unlikely]]
      return Pop::broken;
    // acquire: pairs with the driver's release store of the chain's first flags (made available last).
    const std::uint16_t first = __atomic_load_n(&ring_.desc[avail_].flags, __ATOMIC_ACQUIRE);
    if (!packed_avail(first, avail_wrap_)) return Pop::empty;
    detail::clear(c);
    std::uint16_t i = avail_;
    bool wrap = avail_wrap_;
    std::uint16_t flags = first;
    for (std::uint32_t n = 0;; ++n) {
      // Every descriptor taken and not yet returned is one of the ring's: a driver that makes a
      // slot we hold available again (flipping its flags) would otherwise have us take it twice,
      // and the used positions written for the lot would run past the ring (§2.8.7).
      if (taken_ + n == ring_.size) {
        health_->report(taken_ == 0 ? QueueError::chain_loop : QueueError::too_many_taken);
        return Pop::broken;
      }
      if (n > 0) {
        // Later descriptors were written before the first was released; they must be available
        // with the same wrap counter, or the driver is inconsistent.
        flags = __atomic_load_n(&ring_.desc[i].flags, __ATOMIC_ACQUIRE);
        if (!packed_avail(flags, wrap)) {
          health_->report(QueueError::packed_bad_wrap);
          return Pop::broken;
        }
      }
      const PackedDesc* p = &ring_.desc[i];
      const detail::DescCopy d{detail::load_once(&p->addr), detail::load_once(&p->len), flags,
                               detail::load_once(&p->id)};
      ++c.ring_descs;
      if (++i == ring_.size) {
        i = 0;
        wrap = !wrap;
      }
      if (d.flags & desc_flag::indirect) {
        if (!walk_indirect(d, c)) return Pop::broken;
      } else if (!detail::append(c, *mem_, d, *health_)) {
        return Pop::broken;
      }
      if (!(d.flags & desc_flag::next) || (d.flags & desc_flag::indirect)) {
        // §2.8.6: the buffer id sits in the chain's last descriptor.
        if (d.next_or_id >= ring_.size) {
          health_->report(QueueError::packed_bad_id);
          return Pop::broken;
        }
        c.id = d.next_or_id;
        break;
      }
    }
    avail_ = i;
    avail_wrap_ = wrap;
    taken_ += c.ring_descs;
    return Pop::chain;
  }

  // A chain of one descriptor, as pop_batch() takes them.
  struct Single {
    std::byte* host;
    std::uint32_t len;
    std::uint16_t id;
  };
  static constexpr std::uint16_t batch = 64 / sizeof(PackedDesc);  // one cache line of descriptors

  // The fast path, as DPDK's vhost batches: takes the next `batch` descriptors at once when they
  // fill one aligned cache line, are all available, each a whole chain (neither NEXT nor
  // INDIRECT), all device-readable (Writable false) or all device-writable, with lengths in
  // [min_len, max_len] and addresses inside guest memory. Otherwise takes nothing and returns
  // false: pop() then walks them one by one and reports whatever is wrong. One line read, four
  // flags checked together, no chain bookkeeping: a quarter of pop()'s work per descriptor.
  template <bool Writable>
  bool pop_batch(Single (&out)[batch], std::uint32_t min_len, std::uint32_t max_len) noexcept {
    if (!at_batch_start() || std::uint32_t{avail_} + batch > ring_.size || taken_ + batch > ring_.size ||
        health_->broken())
      return false;
    const PackedDesc* d = &ring_.desc[avail_];
    constexpr std::uint16_t mask =
        desc_flag::avail | desc_flag::used | desc_flag::next | desc_flag::indirect | desc_flag::write;
    const auto want = static_cast<std::uint16_t>((avail_wrap_ ? desc_flag::avail : desc_flag::used) |
                                                 (Writable ? desc_flag::write : 0));
    for (std::uint16_t k = 0; k < batch; ++k)
      if ((detail::load_once(&d[k].flags) & mask) != want) return false;
    // acquire: pairs with the driver's release stores of the four flags (each its chain's head).
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    for (std::uint16_t k = 0; k < batch; ++k) {
      const std::uint64_t addr = detail::load_once(&d[k].addr);  // each field read once
      const std::uint32_t len = detail::load_once(&d[k].len);
      const std::uint16_t id = detail::load_once(&d[k].id);
      if (len < min_len || len > max_len || id >= ring_.size) return false;
      std::byte* host = mem_->translate(addr, len);
      if (host == nullptr) return false;
      out[k] = Single{host, len, id};
    }
    avail_ = static_cast<std::uint16_t>(avail_ + batch);
    if (avail_ == ring_.size) {
      avail_ = 0;
      avail_wrap_ = !avail_wrap_;
    }
    taken_ += batch;
    return true;
  }
  // Whether the next descriptor starts a cache line of them (where pop_batch() can start).
  bool at_batch_start() const noexcept { return avail_ % batch == 0; }

  // Hot-path hint: where the buffer of the descriptor `ahead` places past the next one points,
  // when that descriptor is already available; nullptr otherwise. Only for prefetching: nothing
  // but the translation is checked, and pop() still walks the chain in full.
  const std::byte* peek_buffer(std::uint16_t ahead) const noexcept {
    if (ahead >= ring_.size) return nullptr;
    std::uint32_t i = avail_ + ahead;
    bool wrap = avail_wrap_;
    if (i >= ring_.size) {
      i -= ring_.size;
      wrap = !wrap;
    }
    const PackedDesc* p = &ring_.desc[i];
    if (!packed_avail(detail::load_once(&p->flags), wrap)) return nullptr;
    return mem_->translate(detail::load_once(&p->addr), 0);
  }

  // Gives back popped chains (not yet pushed used) spanning `ring_descs` descriptors. More than
  // were taken is refused (the ring breaks): the rewind below assumes at most one lap.
  void unpop(std::uint32_t ring_descs) noexcept {
    if (!give_back(ring_descs)) [[unlikely]]
      return;
    if (ring_descs <= avail_) {
      avail_ = static_cast<std::uint16_t>(avail_ - ring_descs);
    } else {
      avail_ = static_cast<std::uint16_t>(avail_ + ring_.size - ring_descs);
      avail_wrap_ = !avail_wrap_;
    }
  }

  // Writes the used descriptor for a chain at the used position and skips the chain's length
  // (§2.8.7). Visible to the driver at once (its flags store is the release).
  void push_used(std::uint16_t id, std::uint32_t len, std::uint16_t ring_descs) noexcept {
    if (!give_back(ring_descs)) [[unlikely]]
      return;
    PackedDesc* p = &ring_.desc[used_];
    p->id = id;
    p->len = len;
    const auto flags = static_cast<std::uint16_t>(used_wrap_ ? (desc_flag::avail | desc_flag::used) : 0);
    // release: id/len (and the buffer contents) before the flags. Pairs with the driver's acquire.
    __atomic_store_n(&p->flags, flags, __ATOMIC_RELEASE);
    used_ = static_cast<std::uint16_t>(used_ + ring_descs);
    if (used_ >= ring_.size) {
      used_ = static_cast<std::uint16_t>(used_ - ring_.size);
      used_wrap_ = !used_wrap_;
    }
  }
  // The chains of one packet (MRG_RXBUF) made used together: the driver must see all of them at
  // once (virtio 1.2 §5.1.6.4.1). What was staged goes first (it precedes them in the ring); then
  // every descriptor but the first is written, and the first's flags last (release).
  template <class ChainT>
  void push_used_together(const ChainT* chains, const std::uint32_t* lens, std::uint16_t n) noexcept {
    flush_used();
    PackedDesc* first = nullptr;
    std::uint16_t first_flags = 0;
    for (std::uint16_t i = 0; i < n; ++i) {
      if (!give_back(chains[i].ring_descs)) [[unlikely]]
        return;  // the ring is broken
      PackedDesc* p = &ring_.desc[used_];
      const auto flags = static_cast<std::uint16_t>(used_wrap_ ? (desc_flag::avail | desc_flag::used) : 0);
      p->id = chains[i].id;
      p->len = lens[i];
      if (i == 0) {
        first = p;
        first_flags = flags;
      } else {
        __atomic_store_n(&p->flags, flags, __ATOMIC_RELAXED);  // published by the first's release
      }
      used_ = static_cast<std::uint16_t>(used_ + chains[i].ring_descs);
      if (used_ >= ring_.size) {
        used_ = static_cast<std::uint16_t>(used_ - ring_.size);
        used_wrap_ = !used_wrap_;
      }
    }
    // release: the other descriptors (and the buffer contents) before the first flags.
    if (first != nullptr) __atomic_store_n(&first->flags, first_flags, __ATOMIC_RELEASE);
  }
  // Batched form of push_used: the used descriptor is only recorded, and flush_used() writes the
  // batch, the first descriptor's flags last (release). The driver reads used descriptors in ring
  // order and stops at the first one not yet used, so it sees the whole batch at once, as DPDK's
  // vhost does. The ring lines are written in one go, not a descriptor between each packet's
  // copy: the driver polls the line holding its next used descriptor, and every store of ours
  // to it must first take the line back.
  //
  // A batch is also published by itself whenever it fills a group of `publish_every` ring slots
  // (4 cache lines of descriptors): the driver starts on the first packets of a burst while we
  // still copy the rest, and never polls a line we are still writing. With one burst circulating
  // between two cores (testpmd --tx-first) the burst splits and both sides work at once. Four
  // lines, not one: a group per line hands DPDK's virtio_user bursts of 4 packets, which cost its
  // RX more per packet; much larger groups make the driver wait for the copies again.
  void stage_used(std::uint16_t id, std::uint32_t len, std::uint16_t ring_descs) noexcept {
    if (!give_back(ring_descs)) [[unlikely]]
      return;
    const auto flags = static_cast<std::uint16_t>(used_wrap_ ? (desc_flag::avail | desc_flag::used) : 0);
    staged_[staged_count_++] = StagedUsed{&ring_.desc[used_], len, id, flags};
    const std::uint16_t group = static_cast<std::uint16_t>(used_ / publish_every);
    used_ = static_cast<std::uint16_t>(used_ + ring_descs);
    bool group_done = group != used_ / publish_every;
    if (used_ >= ring_.size) {
      used_ = static_cast<std::uint16_t>(used_ - ring_.size);
      used_wrap_ = !used_wrap_;
      group_done = true;  // the ring's last group, whatever the ring size
    }
    if (group_done) flush_used();
  }
  // Writes and publishes what stage_used() recorded (push_used() needs no flush).
  void flush_used() noexcept {
    if (staged_count_ == 0) return;
    for (std::uint16_t k = 1; k < staged_count_; ++k) {
      const StagedUsed& u = staged_[k];
      u.desc->id = u.id;
      u.desc->len = u.len;
      __atomic_store_n(&u.desc->flags, u.flags, __ATOMIC_RELAXED);  // published by the first's release
    }
    const StagedUsed& first = staged_[0];
    first.desc->id = first.id;
    first.desc->len = first.len;
    // release: the batch's ids, lens, later flags (and the buffer contents) before the first
    // flags. Pairs with the driver's acquire.
    __atomic_store_n(&first.desc->flags, first.flags, __ATOMIC_RELEASE);
    staged_count_ = 0;
  }

  // §2.8.10: the driver's event suppression area decides whether it wants an interrupt.
  bool needs_notify() noexcept {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    const std::uint16_t old = signalled_used_;
    signalled_used_ = used_;
    const std::uint16_t flags = detail::load_once(&ring_.driver_event->flags);
    if (flags != EventSuppress::desc || !event_idx_) return flags != EventSuppress::disable;
    const std::uint16_t off_wrap = detail::load_once(&ring_.driver_event->off_wrap);
    auto event = static_cast<std::uint16_t>(off_wrap & 0x7fff);
    if (((off_wrap >> 15) != 0) != used_wrap_) event = static_cast<std::uint16_t>(event - ring_.size);
    return need_event(event, used_, old);
  }
  void suppress_kicks(bool on) noexcept {
    __atomic_store_n(&ring_.device_event->flags, on ? EventSuppress::disable : EventSuppress::enable, __ATOMIC_RELAXED);
  }
  // Asks the driver to kick at its next avail chain (§2.8.10: flags enable, whatever EVENT_IDX)
  // and returns whether one came before the request was visible: the caller must then not wait.
  bool arm_kick() noexcept {
    suppress_kicks(false);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);  // the request before reading the descriptor's flags
    return packed_avail(__atomic_load_n(&ring_.desc[avail_].flags, __ATOMIC_ACQUIRE), avail_wrap_);
  }
  void disarm_kick() noexcept { suppress_kicks(true); }  // back to polling

  // GET_VRING_BASE: bits 0-14 next avail index, bit 15 avail wrap counter.
  std::uint16_t last_avail_idx() const noexcept {
    return static_cast<std::uint16_t>(avail_ | (avail_wrap_ ? 0x8000 : 0));
  }
  std::uint32_t size() const noexcept { return ring_.size; }
  // Descriptors taken and not yet returned used (or given back).
  std::uint32_t taken() const noexcept { return taken_; }

 private:
  // Returns `ring_descs` taken descriptors (used, or given back): at least one, and no more than
  // were taken. Anything else would move the used position past what the driver made available,
  // so it breaks the ring and nothing is written. Only pop() can make it fail, if its bound did.
  bool give_back(std::uint32_t ring_descs) noexcept {
    if (ring_descs == 0 || ring_descs > taken_) [[unlikely]] {
      health_->report(QueueError::too_many_taken, ring_descs);
      return false;
    }
    taken_ -= ring_descs;
    return true;
  }

  // §2.8.19: a table of sequential descriptors; only WRITE is valid inside it.
  bool walk_indirect(const detail::DescCopy& d, ChainT& c) noexcept {
    if (!indirect_) {
      health_->report(QueueError::indirect_disabled);
      return false;
    }
    if (d.flags & desc_flag::next) {
      health_->report(QueueError::indirect_with_next);
      return false;
    }
    const std::byte* table = nullptr;
    const std::uint32_t n = detail::map_indirect(*mem_, d, ring_.size, table, *health_);
    if (n == 0) return false;
    const auto* descs = reinterpret_cast<const PackedDesc*>(table);
    for (std::uint32_t k = 0; k < n; ++k) {
      const PackedDesc* p = &descs[k];
      const detail::DescCopy e{detail::load_once(&p->addr), detail::load_once(&p->len), detail::load_once(&p->flags),
                               0};
      if (e.flags & desc_flag::indirect) {
        health_->report(QueueError::indirect_nested);
        return false;
      }
      if (e.flags & desc_flag::next) {
        health_->report(QueueError::indirect_with_next);
        return false;
      }
      if (!detail::append(c, *mem_, e, *health_)) return false;
    }
    return true;
  }

  // Descriptors per published batch (see stage_used): 4 cache lines.
  static constexpr std::uint16_t publish_every = 4 * 64 / sizeof(PackedDesc);
  // A used descriptor recorded by stage_used(), written by flush_used().
  struct StagedUsed {
    PackedDesc* desc;
    std::uint32_t len;
    std::uint16_t id;
    std::uint16_t flags;
  };

  PackedRing ring_{};
  const GuestMemory* mem_ = nullptr;
  QueueHealth* health_ = nullptr;
  std::uint16_t avail_ = 0;  // next descriptor to look at
  std::uint16_t used_ = 0;   // next used slot to write
  std::uint16_t signalled_used_ = 0;
  std::uint16_t staged_count_ = 0;
  std::uint32_t taken_ = 0;           // descriptors popped and not yet returned: at most ring_.size
  StagedUsed staged_[publish_every];  // a batch (each chain takes one slot at least)
  bool avail_wrap_ = true;            // §2.8.1: both counters start at 1
  bool used_wrap_ = true;
  bool indirect_ = false;
  bool event_idx_ = false;
};

}  // namespace ws::virtio
