// SPDX-License-Identifier: BSD-3-Clause
// net_vhost hot path: the port's RX queue takes chains from the frontend's TX ring and copies them
// into mbufs; its TX queue copies mbufs into the frontend's RX ring (one chain per packet, or
// several with MRG_RXBUF). Variants (split/packed x in-order x mergeable) are template instances
// picked when the ring starts; a burst never branches on a feature.
//
// Per burst, not per packet: mbufs are allocated in bulk, used descriptors are staged and made
// visible by one release store per 16 packed descriptors or 8 split entries (the frontend starts
// on the first packets while we copy the rest), a packed in-order TX ring gets one used
// descriptor for the whole burst (virtio 1.2 §2.8.20), and the ring lock is an asymmetric fence
// (see RingSlot). Small frames are copied inline, never through a libc call; the next frames'
// buffers are prefetched while one is copied.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "ws/core/burst_gate.hpp"
#include "ws/core/copy.hpp"
#include "ws/core/cpu.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/port/port.hpp"
#include "ws/port/xstats.hpp"
#include "ws/virtio/net/net_hdr.hpp"
#include "ws/virtio/net/offload.hpp"
#include "ws/virtio/ring/packed_device.hpp"
#include "ws/virtio/ring/split_device.hpp"
#include "ws/virtio/vhost_user/notifier.hpp"

namespace ws::vhost_pmd {

using virtio::DefaultChain;
using virtio::Pop;

// Fresh mbufs an RX queue allocated in bulk ahead of the chains that will fill them: a burst
// takes one per packet and never gives any back to the pool. Polling lcore only; the control
// path empties it (release) when the port is stopped.
class MbufStash {
 public:
  static constexpr std::uint16_t capacity = mbuf_max_burst;
  explicit MbufStash(PktmbufPool* pool) noexcept : pool_(pool) {}
  MbufStash(const MbufStash&) = delete;
  MbufStash& operator=(const MbufStash&) = delete;
  ~MbufStash() { release(); }

  // At least min(n, capacity) mbufs on hand, refilled by at least a 32-mbuf bulk; fewer when
  // the pool runs dry. Returns how many are on hand.
  std::uint16_t ensure(std::uint16_t n) noexcept {
    if (n > capacity) n = capacity;
    if (count_ >= n) return count_;
    std::uint16_t want = static_cast<std::uint16_t>(n - count_ < 32 ? 32 : n - count_);
    if (want > capacity - count_) want = static_cast<std::uint16_t>(capacity - count_);
    while (want > 0 && !pool_->alloc_bulk(std::span<Mbuf*>(mbufs_ + count_, want)))
      want = static_cast<std::uint16_t>(want / 2);
    count_ = static_cast<std::uint16_t>(count_ + want);
    return count_;
  }
  Mbuf* take() noexcept { return mbufs_[--count_]; }
  const Mbuf* top() const noexcept { return mbufs_[count_ - 1]; }  // the next take(); one on hand
  void put_back(Mbuf* m) noexcept { mbufs_[count_++] = m; }        // one take() handed out, reset
  void release() noexcept {
    mbuf_free_bulk(std::span<Mbuf* const>(mbufs_, count_));
    count_ = 0;
  }
  PktmbufPool& pool() noexcept { return *pool_; }

 private:
  PktmbufPool* pool_;
  std::uint16_t count_ = 0;
  Mbuf* mbufs_[capacity];
};

// Chains one packet may span with MRG_RXBUF (num_buffers): a 64 KiB packet into Linux's smallest
// mergeable buffers (virtio_net's GOOD_PACKET_LEN, 1518 bytes) takes 44; DPDK's vhost takes up
// to 256 descriptors. It also bounds the work a frontend offering tiny buffers makes per packet:
// beyond it the packet is dropped (too_small) and the chains go back.
inline constexpr std::uint16_t max_merged_chains = 64;

// Extra per-ring counters beyond the port's (xstats).
struct RingCounters {
  Counter bad_packet;  // chain shorter than the header, longer than 64 KiB, or a bad header
  Counter too_small;   // RX buffer chain too small for the packet (without MRG_RXBUF)
  Counter not_linear;  // linear-buffer=1: a TX chain that does not fit one mbuf, dropped
  Counter notify;      // interrupts asked of the notifier (the frontend wanted them): DPDK's guest_notifications
  PacketClassCounters classes;  // DPDK's multicast, broadcast and size bins of the packets taken or given
};

// One virtqueue of the frontend as the backend runs it. The control thread starts and stops it
// (ring_started/ring_stopped); the polling lcore enters it around each burst.
//
// The ring lock is a BurstGate (ws/core/burst_gate.hpp): an asymmetric Dekker handshake whose
// lcore side is two plain stores and a load per burst, instead of a locked instruction that
// would drain the store buffer on every burst; stop(), which is rare, pays with membarrier(2).
//
// The burst variant is chosen when the ring starts, and the port publishes its function in the
// burst table (vhost_queues.hpp). An lcore may have loaded the function of the ring's previous
// start just before the table changed: that function finds `variant` is no longer its own and
// does nothing, as if the ring were stopped.
struct alignas(cache_line_bytes) RingSlot {
  BurstGate gate{false};                // open: started (SET_VRING_KICK) and not stopped
  std::atomic<bool> enabled{false};     // SET_VRING_ENABLE; a disabled ring is not polled
  std::uint8_t variant = 0;             // the burst variant started (written with the gate closed); 0: none
  std::atomic<BurstFn> burst{nullptr};  // its function, for the control path to publish; null: stopped
  virtio::SplitDevice<> split;
  virtio::PackedDevice<> packed;
  virtio::Notifier* notifier = nullptr;  // writes the frontend's call fd for this ring
  std::uint32_t ring = 0;                // this ring's index (the notifier's slot)
  bool packed_ring = false;              // which engine runs (written with the gate closed)
  bool broken_logged = false;            // control thread: the broken state was reported
  virtio::HdrOffloads offload;           // what the frontend takes in our headers (offload variants only)
  virtio::QueueHealth health;
  RingCounters counters;
  DefaultChain chains[max_merged_chains];  // scratch: the chains of one mergeable packet, or a lookahead

  // Polling lcore, in the burst function of variant `v`: false when the ring is not running that
  // variant, started and enabled (the burst then does nothing).
  [[gnu::always_inline]] bool enter(std::uint8_t v) noexcept {
    if (!gate.enter()) [[unlikely]]
      return false;
    if (!enabled.load(std::memory_order_relaxed) || variant != v) [[unlikely]] {
      gate.leave();
      return false;
    }
    return true;
  }
  [[gnu::always_inline]] void leave() noexcept { gate.leave(); }
  // Control thread: start() publishes the engine stored before it; after stop() returns, no
  // lcore touches the ring until it is started again.
  void start() noexcept { gate.open(); }
  void stop() noexcept { gate.close(); }
  // The frontend's interrupt, written by the notifier thread: the call fd is the frontend's, and
  // a write to it may block (notifier.hpp).
  void notify() noexcept {
    counters.notify.add(1);
    if (notifier != nullptr) notifier->signal(ring);  // none: a ring driven by a test alone
  }
};

template <bool Packed>
inline auto& engine(RingSlot& s) noexcept {
  if constexpr (Packed)
    return s.packed;
  else
    return s.split;
}
// Writes a chain's used entry (packed: skipping its `ring_descs`); visible after the engine's
// flush_used().
template <bool Packed>
inline void stage_used(RingSlot& s, std::uint16_t id, std::uint32_t len, std::uint16_t ring_descs) noexcept {
  if constexpr (Packed)
    s.packed.stage_used(id, len, ring_descs);
  else
    s.split.stage_used(id, len);
}
template <bool Packed>
inline void stage_used(RingSlot& s, const DefaultChain& c, std::uint32_t len) noexcept {
  stage_used<Packed>(s, c.id, len, c.ring_descs);
}

inline constexpr std::uint32_t max_packet_bytes = 65535 + virtio::net_hdr_bytes;

enum class Copied : std::uint8_t { ok, bad, nombuf, not_linear };

// What a dequeue makes of the frontend's virtio-net header (ws/virtio/net/offload.hpp), picked when the
// ring starts: nothing (no CSUM/HOST_TSO negotiated), RX flags (DPDK's compliant mode, the
// default), or TX requests for the next port (DPDK's legacy-ol-flags=1).
enum class HdrIn : std::uint8_t { ignore, compliant, legacy };

// Copies a readable chain (header first) into `head`, a fresh mbuf, chaining more from `pool`
// when the packet exceeds it. The header is copied once into `hdr` (double fetch: the guest may
// rewrite its copy). On `bad` (chain shorter than the header or longer than a packet) and
// `nombuf`, `head` is back to a fresh single mbuf.
inline Copied copy_from_chain(const DefaultChain& c, Mbuf* head, PktmbufPool& pool, virtio::NetHdr& hdr) noexcept {
  if (c.readable_bytes < virtio::net_hdr_bytes || c.readable_bytes > max_packet_bytes) [[unlikely]]
    return Copied::bad;
  std::uint32_t skip = virtio::net_hdr_bytes, hdr_got = 0;
  Mbuf* m = head;
  for (std::uint16_t i = 0; i < c.readable; ++i) {
    const std::byte* src = c.seg[i].host;
    std::uint32_t len = c.seg[i].len;
    if (skip > 0) {
      const std::uint32_t h = len < skip ? len : skip;
      auto* to = reinterpret_cast<std::byte*>(&hdr);
      if (h == sizeof hdr) {
        __builtin_memcpy(to, src, sizeof hdr);  // the usual case: the whole header, inlined
      } else {
        for (std::uint32_t k = 0; k < h; ++k) to[hdr_got + k] = src[k];  // split across segments
      }
      hdr_got += h;
      skip -= h;
      src += h;
      len -= h;
    }
    while (len > 0) {
      std::uint16_t room = m->tailroom();
      if (room == 0) {
        Mbuf* next = pool.alloc();
        if (next == nullptr) [[unlikely]] {
          mbuf_free(head->next);
          head->reset();
          return Copied::nombuf;
        }
        m->next = next;
        ++head->nb_segs;
        m = next;
        room = m->tailroom();
      }
      const std::uint16_t n = static_cast<std::uint16_t>(len < room ? len : room);
      copy_bytes(m->data() + m->data_len, src, n);
      m->data_len = static_cast<std::uint16_t>(m->data_len + n);
      src += n;
      len -= n;
    }
  }
  head->pkt_len = static_cast<std::uint32_t>(c.readable_bytes - virtio::net_hdr_bytes);
  return Copied::ok;
}

// RX step "read the header": what the frontend's virtio-net header says about packet `m`.
// False refuses the packet. In: its checksum/GSO fields become RX flags (compliant) or TX
// requests (legacy) on the mbuf (ws/virtio/net/offload.hpp).
template <HdrIn In>
inline bool read_net_hdr(const virtio::NetHdr& hdr, Mbuf* m) noexcept {
  if (virtio::check_net_hdr(hdr, m->pkt_len) != virtio::NetHdrCheck::ok) [[unlikely]]
    return false;
  if constexpr (In == HdrIn::compliant) virtio::rx_net_hdr_to_offload(hdr, *m);
  if constexpr (In == HdrIn::legacy) virtio::rx_net_hdr_to_legacy_offload(hdr, *m);
  return true;
}

// TX step "fill the header": the virtio-net header in front of packet `m`. Offload: its
// checksum/TSO requests go into the header (ws/virtio/net/offload.hpp); false when the frontend cannot take
// one (TSO without GUEST_TSO), and the packet is dropped.
template <bool Offload>
inline bool make_net_hdr(RingSlot& s, Mbuf* m, virtio::NetHdr& hdr) noexcept {
  hdr = virtio::NetHdr{};
  if constexpr (Offload) return virtio::tx_offload_to_net_hdr(*m, hdr, s.offload);
  (void)s;
  (void)m;
  return true;
}

// A cache line of one-descriptor chains (PackedDevice::pop_batch), the packed fast path.
using PackedBatch = virtio::PackedDevice<>::Single[virtio::PackedDevice<>::batch];

// TX step "write the header": `hdr` (from make_net_hdr) with `num_buffers` into the frontend's
// buffer, never copied off the stack whole (see virtio::store_net_hdr): without offloads it is
// stored from registers.
// Without offloads the header is stored only where it differs, as DPDK's vhost does
// (ASSIGN_UNLESS_EQUAL): DPDK's virtio_user leaves a buffer's header as the last RX left it, so
// the line stays clean in both caches instead of being taken for ownership every packet. (Our
// frontend zeroes num_buffers on TX as the spec asks, so with it the header always differs.)
template <bool Offload>
inline void write_net_hdr(std::byte* dst, virtio::NetHdr& hdr, std::uint16_t num_buffers) noexcept {
  if constexpr (Offload) {
    hdr.num_buffers = num_buffers;
    virtio::store_net_hdr(dst, hdr);
  } else {
    std::uint64_t head;
    std::uint32_t tail;
    __builtin_memcpy(&head, dst, sizeof head);
    __builtin_memcpy(&tail, dst + sizeof head, sizeof tail);
    if ((head | (tail ^ (std::uint32_t{num_buffers} << 16))) != 0) virtio::store_plain_net_hdr(dst, num_buffers);
  }
}

// Chains a burst takes from the ring before copying the first of them (see dequeue).
inline constexpr std::uint16_t lookahead = 16;
// Cache lines of descriptors the packed fast paths take before copying the first packet: a
// 32-packet burst. The frontend wrote the buffers on its core, so each is a transfer from there;
// asked for together, the transfers overlap instead of one line's waiting behind the last.
inline constexpr std::uint16_t fast_lines = 8;

// Starts loading a buffer that holds a header and a 64 B frame: two cache lines. Write: for
// ownership, as we are about to write it.
template <bool Write = false>
inline void prefetch_buffer(const std::byte* p) noexcept {
  __builtin_prefetch(p, Write);
  __builtin_prefetch(p + 64, Write);
}
inline void prefetch_first_buffer(const DefaultChain& c) noexcept {
  if (c.segments != 0) [[likely]]
    prefetch_buffer(c.seg[0].host);
}

// The common RX case: header and frame in one buffer that fits `m`, copied inline.
inline void copy_from_buffer(const std::byte* host, std::uint32_t frame, Mbuf* m, virtio::NetHdr& hdr) noexcept {
  __builtin_memcpy(&hdr, host, sizeof hdr);
  copy_bytes(m->data(), host + virtio::net_hdr_bytes, frame);
  m->data_len = static_cast<std::uint16_t>(frame);
  m->pkt_len = frame;
}

// Gives back chains[from, to) popped but not handled, in one step.
template <bool Packed>
inline void unpop(RingSlot& s, std::uint16_t from, std::uint16_t to) noexcept {
  if constexpr (Packed) {
    std::uint32_t descs = 0;
    for (std::uint16_t i = from; i < to; ++i) descs += s.chains[i].ring_descs;
    s.packed.unpop(descs);
  } else {
    s.split.unpop(static_cast<std::uint16_t>(to - from));
  }
}

// One dequeue burst in progress: what its steps (below) share. InOrder (packed only): the
// chains taken are returned by one used descriptor at the end (finish_dequeue), so only their
// descriptor count and the last id are kept. The steps are always inlined: the state then lives
// in registers, as one function's locals would.
template <bool Packed, bool InOrder, HdrIn In>
struct RxBurst {
  RingSlot& s;
  MbufStash& stash;
  RxQueueCounters& counters;
  Mbuf** pkts;
  std::uint16_t n;            // packets wanted (no more than the stash holds)
  std::uint16_t got = 0;      // packets delivered into pkts
  std::uint16_t used = 0;     // used entries staged (not InOrder)
  std::uint32_t descs = 0;    // InOrder: descriptors of the chains taken
  std::uint16_t last_id = 0;  // InOrder: the last chain's id
  std::uint64_t bytes = 0;    // of the packets delivered
  bool more = true;           // false once the ring has nothing more (or broke, or mbufs ran out)

  // Hands over packet `m` (ok: its chain was sound and copied), or counts it and puts `m` back.
  [[gnu::always_inline]] void deliver(Mbuf* m, const virtio::NetHdr& hdr, bool ok) noexcept {
    if (ok && read_net_hdr<In>(hdr, m)) [[likely]] {
      bytes += m->pkt_len;
      pkts[got++] = m;
      return;
    }
    s.counters.bad_packet.add(1);  // the chain goes back used; `m` goes back to the stash
    counters.errors.add(1);
    mbuf_free(m->next);
    m->reset();
    stash.put_back(m);
  }
  // The chain goes back used (in order: with the burst's one used descriptor).
  [[gnu::always_inline]] void retire(std::uint16_t id, std::uint16_t ring_descs) noexcept {
    if constexpr (InOrder) {
      descs += ring_descs;
      last_id = id;
    } else {
      stage_used<Packed>(s, id, 0, ring_descs);
      ++used;
    }
  }
};

// RX step "take whole lines" (packed): cache lines of one-descriptor chains, each a header and a
// frame that fits a fresh mbuf, taken a line at once (PackedDevice::pop_batch), as many lines as
// are ready (up to fast_lines) and all their buffers prefetched before the first is copied.
// Returns the packets taken: 0 when the next line does not qualify (take_chains() then goes on).
template <bool InOrder, HdrIn In>
[[gnu::always_inline]] inline std::uint16_t dequeue_lines(RxBurst<true, InOrder, In>& b) noexcept {
  constexpr std::uint16_t batch = virtio::PackedDevice<>::batch;
  PackedBatch line[fast_lines];
  std::uint16_t lines = 0;
  const std::uint32_t max_len = virtio::net_hdr_bytes + b.stash.top()->tailroom();
  while (lines < fast_lines && b.n - b.got - lines * batch >= batch &&
         b.s.packed.template pop_batch<false>(line[lines], virtio::net_hdr_bytes, max_len)) {
    for (const auto& d : line[lines]) prefetch_buffer(d.host);
    ++lines;
  }
  for (std::uint16_t l = 0; l < lines; ++l)
    for (const auto& d : line[l]) {
      Mbuf* m = b.stash.take();
      virtio::NetHdr hdr;
      copy_from_buffer(d.host, d.len - virtio::net_hdr_bytes, m, hdr);
      b.retire(d.id, 1);
      b.deliver(m, hdr, true);
    }
  return static_cast<std::uint16_t>(lines * batch);
}

// RX step "take chains": one chain at a time into s.chains, up to `lookahead` taken before the
// first is copied, their first buffers prefetched: the frontend wrote them on its core, so each
// is a cache miss, and the misses of several packets overlap instead of each stalling its own
// copy. A packed ring stops at a cache line's start, where dequeue_lines() can take over.
// Returns the chains taken; clears `more` when the ring had no more.
template <bool Packed, bool InOrder, HdrIn In>
[[gnu::always_inline]] inline std::uint16_t take_chains(RxBurst<Packed, InOrder, In>& b) noexcept {
  auto& dev = engine<Packed>(b.s);
  const std::uint16_t want = b.n - b.got < lookahead ? static_cast<std::uint16_t>(b.n - b.got) : lookahead;
  std::uint16_t k = 0;
  while (k < want) {
    if (dev.pop(b.s.chains[k]) != Pop::chain) {
      // Nothing new (or the ring broke): pause before the next poll. Every poll reads the line
      // the driver is writing its next descriptor into; polling flat out steals it back and
      // forth and slows the driver down more than it saves us.
      if (k == 0 && b.got == 0) cpu_pause();
      b.more = false;
      break;
    }
    if constexpr (!Packed) {
      if (k == 0 && b.got == 0) dev.prefetch_heads(static_cast<std::uint16_t>(b.n - 1));
    }
    prefetch_first_buffer(b.s.chains[k++]);
    if constexpr (Packed) {
      if (dev.at_batch_start()) break;
    }
  }
  return k;
}

// RX step "copy a chain" into `m`, a fresh mbuf: the common case (header and frame in one buffer
// that fits `m`) inline; Linear (linear-buffer=1): a sound chain too long for one mbuf is
// not_linear, tested only once the chain has left the common case, which pays nothing for it;
// anything else through copy_from_chain(), which checks the chain and chains mbufs.
template <bool Linear>
[[gnu::always_inline]] inline Copied copy_chain(const DefaultChain& c, Mbuf* m, PktmbufPool& pool,
                                                virtio::NetHdr& hdr) noexcept {
  const std::uint32_t frame = c.readable_bytes - virtio::net_hdr_bytes;  // wraps when too short: checked
  if (c.readable == 1 && c.readable_bytes >= virtio::net_hdr_bytes && frame <= m->tailroom()) [[likely]] {
    copy_from_buffer(c.seg[0].host, frame, m, hdr);
    return Copied::ok;
  }
  if (Linear && c.readable_bytes >= virtio::net_hdr_bytes && c.readable_bytes <= max_packet_bytes &&
      frame > m->tailroom())
    return Copied::not_linear;  // a sound chain, too long for one mbuf (an unsound one stays bad_packet)
  return copy_from_chain(c, m, pool, hdr);
}

// RX step "copy the chains taken": s.chains[0..k) into mbufs from the stash, each chain retired.
// When the pool runs out mid-way, the chain and the ones after it go back to the ring untaken.
template <bool Packed, bool InOrder, HdrIn In, bool Linear>
[[gnu::always_inline]] inline void copy_chains(RxBurst<Packed, InOrder, In>& b, std::uint16_t k) noexcept {
  for (std::uint16_t j = 0; j < k; ++j) {
    const DefaultChain& c = b.s.chains[j];
    Mbuf* m = b.stash.take();
    virtio::NetHdr hdr;
    const Copied r = copy_chain<Linear>(c, m, b.stash.pool(), hdr);
    if (r == Copied::nombuf) [[unlikely]] {
      b.stash.put_back(m);
      unpop<Packed>(b.s, j, k);  // this chain and the ones taken after it go back
      b.counters.nombuf.add(1);
      b.more = false;
      return;
    }
    b.retire(c.id, c.ring_descs);
    if (Linear && r == Copied::not_linear) [[unlikely]] {
      b.s.counters.not_linear.add(1);  // the chain goes back used; `m`, untouched, to the stash
      b.counters.errors.add(1);
      b.stash.put_back(m);
      continue;
    }
    b.deliver(m, hdr, r == Copied::ok);
  }
}

// RX step "return the chains": the used entries staged become visible (InOrder: the burst's one
// used descriptor first), the frontend is notified if it asked, and the burst is counted.
template <bool Packed, bool InOrder, HdrIn In>
[[gnu::always_inline]] inline void finish_dequeue(RxBurst<Packed, InOrder, In>& b) noexcept {
  auto& dev = engine<Packed>(b.s);
  if constexpr (InOrder) {
    if (b.descs > 0) {
      dev.stage_used(b.last_id, 0, static_cast<std::uint16_t>(b.descs));
      dev.flush_used();
      if (dev.needs_notify()) b.s.notify();
    }
  } else if (b.used > 0) {
    dev.flush_used();
    if (dev.needs_notify()) b.s.notify();
  }
  b.s.counters.classes.count(b.pkts, b.got);
  b.counters.packets.add(b.got);
  b.counters.bytes.add(b.bytes);
}

// Frontend TX ring -> mbufs (the port's rx_burst). InOrder (packed only): one used descriptor,
// naming the burst's last chain, returns every chain the burst took (virtio 1.2 §2.8.20), at the
// end of the burst as DPDK's vhost does. Never later: a driver may keep fewer chains outstanding
// than its ring holds (dpdk-testpmd posts 512 on a 1024-descriptor ring) and waits for these.
// In: see read_net_hdr. Linear: see copy_chain. Inlined into its variant's burst function
// (vhost_queues.hpp), as enqueue() is: the table's one indirect call lands in the whole burst.
template <bool Packed, bool InOrder, HdrIn In, bool Linear>
[[gnu::always_inline]] inline std::uint16_t dequeue(RingSlot& s, MbufStash& stash, RxQueueCounters& counters,
                                                    Mbuf** pkts, std::uint16_t n) noexcept {
  static_assert(Packed || !InOrder, "split rings return every used entry");
  const std::uint16_t have = stash.ensure(n);
  if (have < n) [[unlikely]] {
    counters.nombuf.add(n - have);  // mbufs asked for and not had, as DPDK's rx_mbuf_alloc_failed
    n = have;
    if (n == 0) return 0;
  }
  RxBurst<Packed, InOrder, In> b{s, stash, counters, pkts, n};
  while (b.more && b.got < b.n) {
    if constexpr (Packed) {
      if (dequeue_lines(b) > 0) continue;
    }
    copy_chains<Packed, InOrder, In, Linear>(b, take_chains(b));
  }
  finish_dequeue(b);
  return b.got;
}

// Starts loading a frontend RX buffer (its header and first frame line): the frontend's core
// touched it last, and without this every packet's copy waits for its own lines in turn. The
// header's line is loaded to be read (write_net_hdr stores only what differs), the frame's for
// ownership.
inline void prefetch_rx_lines(const std::byte* p) noexcept {
  __builtin_prefetch(p, 0);
  __builtin_prefetch(p + 64, 1);
}
// The same for the buffer `ahead` chains past the next one, when it is already available.
template <bool Packed>
inline void prefetch_rx_buffer(RingSlot& s, std::uint16_t ahead) noexcept {
  if (const std::byte* p = engine<Packed>(s).peek_buffer(ahead)) prefetch_rx_lines(p);
}

// Copies `hdr` then `m` into the writable segments of chains[0..k).
inline void copy_to_chains(RingSlot& s, std::uint16_t k, const virtio::NetHdr& hdr, const Mbuf* m,
                           std::uint32_t* written) noexcept {
  const std::byte* src = reinterpret_cast<const std::byte*>(&hdr);
  std::uint32_t left = virtio::net_hdr_bytes;
  bool in_header = true;
  const Mbuf* seg = m;
  for (std::uint16_t ci = 0; ci < k; ++ci) {
    const DefaultChain& c = s.chains[ci];
    written[ci] = 0;
    for (std::uint16_t i = c.readable; i < c.segments; ++i) {
      std::byte* dst = c.seg[i].host;
      std::uint32_t room = c.seg[i].len;
      while (room > 0) {
        if (left == 0) {
          if (in_header) {
            in_header = false;
          } else {
            seg = seg->next;
          }
          while (seg != nullptr && seg->data_len == 0) seg = seg->next;
          if (seg == nullptr) return;
          src = reinterpret_cast<const std::byte*>(seg->data());
          left = seg->data_len;
        }
        const std::uint32_t n = left < room ? left : room;
        copy_bytes(dst, src, n);
        dst += n;
        src += n;
        left -= n;
        room -= n;
        written[ci] += n;
      }
    }
  }
}

// The common TX case: header and the one-segment packet `m` into one buffer that holds both.
template <bool Offload>
inline void copy_to_buffer(std::byte* dst, virtio::NetHdr& hdr, const Mbuf* m) noexcept {
  write_net_hdr<Offload>(dst, hdr, 1);
  copy_bytes(dst + virtio::net_hdr_bytes, m->data(), m->data_len);
}

// What enqueue_one() did with a packet.
enum class Step : std::uint8_t { sent, dropped, stop };

// One packet into the frontend RX ring: one buffer, or several with MRG_RXBUF. `used` counts the
// used entries staged. dropped: `m` was freed (counted); stop: the ring ran dry (or broke) and
// `m` stays with the caller.
template <bool Packed, bool Mergeable, bool Offload>
inline Step enqueue_one(RingSlot& s, TxQueueCounters& counters, Mbuf* m, std::uint16_t& used,
                        std::uint64_t& bytes) noexcept {
  auto& dev = engine<Packed>(s);
  constexpr std::uint16_t max_chains = Mergeable ? max_merged_chains : 1;
  virtio::NetHdr hdr;
  if (!make_net_hdr<Offload>(s, m, hdr)) [[unlikely]] {
    counters.errors.add(1);  // a request the frontend cannot take (TSO without GUEST_TSO)
    mbuf_free(m);
    return Step::dropped;
  }
  const std::uint64_t need = std::uint64_t{m->pkt_len} + virtio::net_hdr_bytes;
  DefaultChain& first = s.chains[0];
  if (dev.pop(first) != Pop::chain) return Step::stop;
  if constexpr (!Packed) {
    if (used == 0) dev.prefetch_heads(32);
  }
  prefetch_rx_buffer<Packed>(s, lookahead - 2);
  // The common case: one mbuf into one writable buffer that holds it.
  if (m->nb_segs == 1 && first.segments == first.readable + 1 && first.writable_bytes >= need) [[likely]] {
    copy_to_buffer<Offload>(first.seg[first.readable].host, hdr, m);
    stage_used<Packed>(s, first, static_cast<std::uint32_t>(need));
    ++used;
    bytes += m->pkt_len;
    return Step::sent;
  }
  std::uint64_t room = first.writable_bytes;
  std::uint16_t k = 1;
  while (room < need && k < max_chains) {
    if (dev.pop(s.chains[k]) != Pop::chain) break;
    room += s.chains[k].writable_bytes;
    ++k;
  }
  if (room < need) {
    unpop<Packed>(s, 0, k);
    if (k == max_chains || !Mergeable) [[unlikely]] {
      // The buffers offered are too small for this packet: drop it, keep the buffers.
      s.counters.too_small.add(1);
      counters.errors.add(1);
      mbuf_free(m);
      return Step::dropped;
    }
    return Step::stop;  // ring ran dry (or broke) mid-packet
  }
  std::uint32_t written[max_merged_chains];
  hdr.num_buffers = k;
  copy_to_chains(s, k, hdr, m, written);
  // virtio 1.2 §5.1.6.4.1: the driver must see all num_buffers chains of a packet used at once.
  // stage_used() publishes a batch whenever it fills a group, which could be mid-packet: a Linux
  // guest then read num_buffers, found fewer chains used ("buffers missing") and dropped the
  // packet (rx_length_errors).
  if constexpr (Packed) {
    s.packed.push_used_together(s.chains, written, k);
  } else {
    for (std::uint16_t i = 0; i < k; ++i) s.split.push_used(s.chains[i].id, written[i]);  // published by the next flush
  }
  used = static_cast<std::uint16_t>(used + k);
  bytes += m->pkt_len;
  return Step::sent;
}

// The packed fast path: single-segment packets into cache lines of single writable descriptors
// that hold them, up to fast_lines lines taken and their buffers prefetched before the first
// copy. Returns the packets sent, whole lines: 0 when the first line's packets or descriptors do
// not fit (enqueue_one() then takes them one by one).
template <bool Offload>
inline std::uint16_t enqueue_batch(RingSlot& s, Mbuf* const* pkts, std::uint16_t n, std::uint64_t& bytes) noexcept {
  constexpr std::uint16_t batch = virtio::PackedDevice<>::batch;
  virtio::NetHdr hdr[fast_lines][batch];
  PackedBatch b[fast_lines];
  std::uint16_t lines = 0;
  for (; lines < fast_lines && n - lines * batch >= batch; ++lines) {
    Mbuf* const* p = pkts + lines * batch;
    std::uint32_t need_max = 0;
    bool fits = true;
    for (std::uint16_t k = 0; k < batch && fits; ++k) {
      const Mbuf* m = p[k];
      fits = m->nb_segs == 1 && make_net_hdr<Offload>(s, p[k], hdr[lines][k]);
      const std::uint32_t need = m->pkt_len + virtio::net_hdr_bytes;
      if (need > need_max) need_max = need;
    }
    if (!fits || !s.packed.pop_batch<true>(b[lines], need_max, ~std::uint32_t{0})) break;
    for (const auto& d : b[lines]) prefetch_rx_lines(d.host);
  }
  for (std::uint16_t l = 0; l < lines; ++l)
    for (std::uint16_t k = 0; k < batch; ++k) {
      const Mbuf* m = pkts[l * batch + k];
      copy_to_buffer<Offload>(b[l][k].host, hdr[l][k], m);
      s.packed.stage_used(b[l][k].id, m->pkt_len + virtio::net_hdr_bytes, 1);
      bytes += m->pkt_len;
    }
  return static_cast<std::uint16_t>(lines * batch);
}

// mbufs -> frontend RX ring (the port's tx_burst). The mbufs are freed: the data was copied.
// Offload: see make_net_hdr.
template <bool Packed, bool Mergeable, bool Offload>
[[gnu::always_inline]] inline std::uint16_t enqueue(RingSlot& s, TxQueueCounters& counters, Mbuf** pkts,
                                                    std::uint16_t n) noexcept {
  auto& dev = engine<Packed>(s);
  std::uint16_t sent = 0, used = 0;
  std::uint64_t bytes = 0;
  for (std::uint16_t ahead = 0; ahead < lookahead; ++ahead) prefetch_rx_buffer<Packed>(s, ahead);
  while (sent < n) {
    if constexpr (Packed) {
      constexpr std::uint16_t batch = virtio::PackedDevice<>::batch;
      if (n - sent >= batch && dev.at_batch_start()) {
        if (const std::uint16_t k =
                enqueue_batch<Offload>(s, pkts + sent, static_cast<std::uint16_t>(n - sent), bytes)) {
          sent = static_cast<std::uint16_t>(sent + k);
          used = static_cast<std::uint16_t>(used + k);
          continue;
        }
      }
    }
    const Step step = enqueue_one<Packed, Mergeable, Offload>(s, counters, pkts[sent], used, bytes);
    if (step == Step::stop) break;
    if (step == Step::dropped) pkts[sent] = nullptr;
    ++sent;
  }
  if (used > 0) {
    dev.flush_used();
    if (dev.needs_notify()) s.notify();
  }
  const auto ok = static_cast<std::uint16_t>(s.counters.classes.count(pkts, sent));  // nullptr: dropped
  mbuf_free_bulk(std::span<Mbuf* const>(pkts, sent));                                // nullptr entries: dropped above
  if (sent < n) counters.full.add(n - sent);
  counters.packets.add(ok);
  counters.bytes.add(bytes);
  return sent;
}

}  // namespace ws::vhost_pmd
