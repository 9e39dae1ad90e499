// SPDX-License-Identifier: BSD-3-Clause
// Packed virtqueue (virtio 1.2 §2.8): one descriptor ring both sides write, wrap counters instead
// of indices, event suppression areas. Device-side engine (hostile-input walker) and driver-side
// engine, as in split.hpp.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ws/virtio/guest_memory.hpp"
#include "ws/virtio/split.hpp"  // Pop, Buffer
#include "ws/virtio/virtqueue.hpp"
#include "ws/virtio/walk.hpp"

namespace ws::virtio {

struct PackedDesc {  // §2.8.13
  std::uint64_t addr;
  std::uint32_t len;
  std::uint16_t id;
  std::uint16_t flags;
};
static_assert(sizeof(PackedDesc) == 16);

struct EventSuppress {  // §2.8.10
  static constexpr std::uint16_t enable = 0;
  static constexpr std::uint16_t disable = 1;
  static constexpr std::uint16_t desc = 2;  // with EVENT_IDX: notify at off_wrap
  std::uint16_t off_wrap;
  std::uint16_t flags;
};
static_assert(sizeof(EventSuppress) == 4);

struct PackedRing {
  std::uint32_t size = 0;                // 1..32768, any value
  PackedDesc* desc = nullptr;            // 16-byte aligned; both sides write
  EventSuppress* driver_event = nullptr; // driver writes, device reads; 4-aligned
  EventSuppress* device_event = nullptr; // device writes, driver reads; 4-aligned
};

constexpr std::size_t packed_desc_bytes(std::uint32_t n) { return 16u * n; }

Result<void> check_packed_ring(const PackedRing& ring);

// §2.8.1: available when AVAIL equals the wrap counter and USED differs; used when both equal it.
// One mask and one compare: the two bits tested one by one cost the hot loops 7 instructions.
constexpr std::uint16_t packed_avail_bits(bool wrap) noexcept { return wrap ? desc_flag::avail : desc_flag::used; }
constexpr std::uint16_t packed_used_bits(bool wrap) noexcept { return wrap ? desc_flag::avail | desc_flag::used : 0; }
constexpr std::uint16_t packed_wrap_flags(std::uint16_t flags) noexcept {
  return flags & (desc_flag::avail | desc_flag::used);
}
constexpr bool packed_avail(std::uint16_t flags, bool wrap) noexcept {
  return packed_wrap_flags(flags) == packed_avail_bits(wrap);
}
constexpr bool packed_used(std::uint16_t flags, bool wrap) noexcept {
  return packed_wrap_flags(flags) == packed_used_bits(wrap);
}

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
    if (health_->broken()) [[unlikely]] return Pop::broken;
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
    if (!give_back(ring_descs)) [[unlikely]] return;
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
    if (!give_back(ring_descs)) [[unlikely]] return;
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
      if (!give_back(chains[i].ring_descs)) [[unlikely]] return;  // the ring is broken
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
    if (!give_back(ring_descs)) [[unlikely]] return;
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
    __atomic_store_n(&ring_.device_event->flags, on ? EventSuppress::disable : EventSuppress::enable,
                     __ATOMIC_RELAXED);
  }

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
  std::uint32_t taken_ = 0;  // descriptors popped and not yet returned: at most ring_.size
  StagedUsed staged_[publish_every];  // a batch (each chain takes one slot at least)
  bool avail_wrap_ = true;   // §2.8.1: both counters start at 1
  bool used_wrap_ = true;
  bool indirect_ = false;
  bool event_idx_ = false;
};

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
        : desc_(d.ring_.desc), ids_(d.ids_.data()), free_ids_(d.free_ids_.data()), size_(d.ring_.size),
          free_(d.free_), avail_(d.avail_), free_take_(d.free_take_), free_mask_(d.free_mask_),
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
    std::uint32_t avail_;  // 32-bit copies: no 16-bit arithmetic in the loop
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
    __atomic_store_n(&ring_.driver_event->flags, on ? EventSuppress::disable : EventSuppress::enable,
                     __ATOMIC_RELAXED);
  }

  // Takes up to `max` completed chains. Ids we did not post break the queue.
  std::uint16_t reclaim(Cookie* cookies, std::uint32_t* lens, std::uint16_t max) noexcept {
    if (health_->broken()) [[unlikely]] return 0;
    // The walk runs on a copy of the ring state, written back at the end. On the members
    // themselves, each acquire load below makes the compiler store and reload them, and every
    // descriptor's position would wait on the store of the one before.
    Walk w{ring_.desc, ids_.data(), ring_.size, used_, packed_used_bits(used_wrap_),
           free_ids_.data(), free_give_, free_mask_};
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
