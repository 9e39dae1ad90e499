// SPDX-License-Identifier: BSD-3-Clause
// The virtio-net driver's queues, whatever carries them (vhost-user for virtio_user, the PCI
// transport for net_virtio): RX reclaims filled buffers into mbufs and reposts fresh ones; TX
// posts mbufs (header pushed into the headroom when the mbuf is ours alone, else a shared zero
// header descriptor) and frees what the device has consumed. Instances per ring format,
// IN_ORDER, MRG_RXBUF and offloads are picked once after negotiation (make_rx_variant); the
// transport adds two things to the hot path, both inline: the address a device uses for a
// buffer and how a queue notifies the device (the Transport parameter, see VhostUserHotPath and
// PciHotPath).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ws/core/burst_gate.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/port/port.hpp"
#include "ws/port/xstats.hpp"
#include "ws/virtio/net/engine.hpp"
#include "ws/virtio/net/net_hdr.hpp"
#include "ws/virtio/net/offload.hpp"
#include "ws/virtio/vhost_user/notifier.hpp"

namespace ws::virtio {

struct QueueCommon;

// What a transport puts in the hot path: T::buffer_addr(m), the address the device uses for the
// start of m's buffer, and T::notify(q), the kick once the device asked for one.
template <class T>
concept QueueTransport = requires(const Mbuf* m, QueueCommon& q) {
  { T::buffer_addr(m) } noexcept -> std::same_as<std::uint64_t>;
  { T::notify(q) } noexcept;
};

// Frees up to `max` (by default every) chains the device has completed and no burst reclaimed
// yet, oldest first; returns how many. A reclaim short of what it asked for took everything
// there was: no further call.
template <class Engine>
std::uint32_t free_completed(Engine& engine, std::uint32_t max = ~std::uint32_t{0}) noexcept {
  Mbuf* done[64];
  std::uint32_t n = 0;
  while (n < max) {
    const auto want = static_cast<std::uint16_t>(max - n < 64 ? max - n : 64);
    const std::uint16_t k = engine.reclaim(done, nullptr, want);
    if (k > 0) mbuf_free_bulk(std::span<Mbuf* const>(done, k));
    n += k;
    if (k < want) break;
  }
  return n;
}

class Notifier;

// Where a transport notifies the device of new buffers.
struct NotifyTarget {
  Notifier* notifier = nullptr;                // vhost-user: the thread that writes the kick fds
  volatile std::uint16_t* doorbell = nullptr;  // PCI: the queue's notify register
  int kick_fd = -1;                            // vhost-net: our own kick eventfd, written by the lcore
};

// Control-path view of a queue, whatever its variant.
struct QueueCommon : QueueBase {
  virtual ~QueueCommon() = default;
  virtual void init(const RingArea& area, bool event_idx) = 0;
  virtual std::uint32_t fill() = 0;  // RX: post buffers; returns how many
  // Ring stopped (or gate closed): frees what the ring holds. Returns how many packets that
  // drops: TX, those taken but never completed by the device; RX, buffers the device filled
  // that no burst took (one per packet, or per part of a mergeable one) and a mergeable packet
  // cut short.
  virtual std::uint32_t release_mbufs() = 0;
  // RX interrupts (Port::rx_intr_enable/disable), polling lcore between bursts: on asks the device
  // for an interrupt at the next packet and returns whether packets are already waiting (the
  // caller must not wait for the interrupt then); off goes back to polling. TX queues never ask.
  virtual bool set_interrupt(bool) noexcept { return false; }
  QueueHealth health;
  // Where the transport notifies the device, and this queue's index there. Each transport's
  // hot path reads its own member; both null: the device is never notified.
  NotifyTarget notify;
  std::uint32_t ring = 0;
  // The lcore enters around each burst; the control path closes it to reset the ring.
  BurstGate gate;
  // Packets dropped by ring resets (a packed ring given to a new backend); control path only.
  Counter reset_dropped;
  // Whether the broken state of `health` was logged: once per break, whichever control thread
  // (link monitor, prompt, stop) sees it first. Cleared with health.reset().
  mutable std::atomic<bool> broken_logged{false};
};

struct alignas(cache_line_bytes) RxCommon : QueueCommon {
  PktmbufPool* pool = nullptr;
  std::uint16_t port_id = 0;
  RxQueueCounters counters;
  PacketClassCounters classes;   // DPDK's multicast, broadcast and size-bin xstats
  Mbuf* partial_head = nullptr;  // mergeable packet still collecting buffers
  Mbuf* partial_tail = nullptr;
  std::uint16_t partial_left = 0;
};

// InOrder: IN_ORDER negotiated. Offload: the device's header (GUEST_CSUM/GUEST_TSO negotiated)
// becomes mbuf flags.
template <QueueTransport T, bool Packed, bool InOrder, bool Mergeable, bool Offload>
struct VirtioRx final : RxCommon {
  DriverEngine<Packed, InOrder, Mbuf*> engine;
  // Buffers the ring may miss before a burst with packets reposts them (see receive): a
  // quarter of a split ring, none of a packed one.
  std::uint32_t refill_owed = 0;
  // The most buffers one mergeable packet can take: the device holds them all before it writes
  // num_buffers, so no more than the ring has.
  std::uint32_t max_buffers = 0;

  void init(const RingArea& area, bool event_idx) override {
    engine.init(area, &health, event_idx);
    // We poll. With EVENT_IDX the device reads used_event, not the flag: left at 0 (the ring is
    // zeroed) it would ask for an interrupt at the first used buffer.
    engine.disarm_interrupt();
    refill_owed = Packed ? 0 : area.size / 4;
    max_buffers = area.size;
  }
  std::uint32_t fill() override { return refill(0xffff); }
  bool set_interrupt(bool on) noexcept override {
    if (!on) {
      engine.disarm_interrupt();
      return false;
    }
    return engine.arm_interrupt();
  }
  std::uint32_t release_mbufs() override {
    std::uint32_t dropped = free_completed(engine);
    engine.drain([](Mbuf* m) { mbuf_free(m); });  // empty buffers: back to the pool
    if (partial_head != nullptr) {
      mbuf_free(partial_head);
      ++dropped;
    }
    partial_head = partial_tail = nullptr;
    partial_left = 0;
    return dropped;
  }

  // Where the device writes a buffer's header: at the end of the default headroom, so that the
  // header shares a cache line with the frame's first bytes, which the application writes
  // anyway. A forwarded packet's TX header (stored where the RX one was) then costs no line of
  // its own on either side.
  static std::uint16_t hdr_offset(const Mbuf* m) noexcept { return m->headroom_default; }

  // Posts up to `max` fresh buffers; the header lands at hdr_offset(), the data right after it.
  std::uint16_t refill(std::uint32_t max) noexcept {
    std::uint32_t want = engine.free_descs();
    if (want > max) want = max;
    Mbuf* fresh[64];
    std::uint16_t posted = 0;
    engine.prefetch_post(want);
    auto posts = engine.begin_posts();
    while (want > 0) {
      const std::uint32_t k = want < 64 ? want : 64;
      if (!pool->alloc_bulk(std::span<Mbuf*>(fresh, k))) {
        counters.nombuf.add(k);
        break;
      }
      for (std::uint32_t i = 0; i < k; ++i) {
        Mbuf* m = fresh[i];
        const std::uint16_t off = hdr_offset(m);
        const Buffer b{T::buffer_addr(m) + off, static_cast<std::uint32_t>(m->buf_len - off), true};
        posts.add(&b, 1, m);
      }
      posted = static_cast<std::uint16_t>(posted + k);
      want -= k;
    }
    engine.end_posts(posts);
    if (posted > 0 && engine.publish()) T::notify(*this);
    return posted;
  }

  // The header of a complete packet still sits in its first buffer's headroom.
  static void apply_offloads(Mbuf* m) noexcept {
    NetHdr hdr;
    std::memcpy(&hdr, m->buf_addr + hdr_offset(m), sizeof hdr);
    if (check_net_hdr(hdr, m->pkt_len) == NetHdrCheck::ok) rx_net_hdr_to_offload(hdr, *m);
  }

  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    if (!gate.enter()) [[unlikely]]
      return 0;
    const std::uint16_t got = receive(pkts, n);
    gate.leave();
    return got;
  }

 private:
  std::uint16_t receive(Mbuf** pkts, std::uint16_t n) noexcept {
    Mbuf* done[mbuf_max_burst];
    std::uint32_t lens[mbuf_max_burst];
    if (n > mbuf_max_burst) n = mbuf_max_burst;
    const std::uint16_t k = engine.reclaim(done, lens, n);
    // Split rings: the buffers bursts took are reposted when a poll finds nothing; the
    // application has sent what it received by then, and the device works on that while we
    // refill. A burst with packets refills only when more than refill_owed buffers are missing,
    // so that a device that never lets a poll come up empty still finds buffers. Packed rings
    // refill at the end of every burst with packets: there a refill while the device takes our
    // TX burst cost the device more than it saved us (bench/README.md).
    if (k == 0) {
      if constexpr (!Packed)
        if (const std::uint32_t free = engine.free_descs(); free > 0) refill(free);
      return 0;
    }
    // The device wrote each header and frame line last: fetch them all at once, for writing, as
    // the forwarding application and a forwarded packet's TX header write them.
    for (std::uint16_t i = 0; i < k; ++i) __builtin_prefetch(done[i]->buf_addr + hdr_offset(done[i]), 1);
    std::uint16_t got = 0;
    std::uint64_t bytes = 0;
    // Members the loop reads every packet, in locals: the mbuf fields it stores are 16-bit too,
    // so on the members the compiler would reload them after each store.
    std::uint16_t left = partial_left;
    const std::uint16_t port = port_id;
    for (std::uint16_t i = 0; i < k; ++i) {
      Mbuf* m = done[i];
      const std::uint32_t len = lens[i];
      const bool first = !Mergeable || left == 0;
      if (!length_fits(m, len, first)) [[unlikely]]
        continue;
      if (first) {
        if (start_packet(m, len, port, left)) deliver(m, pkts, got, bytes);
      } else if (append_buffer(m, len, left)) {
        deliver(partial_head, pkts, got, bytes);
        partial_head = partial_tail = nullptr;
      }
    }
    partial_left = left;
    if (const std::uint32_t free = engine.free_descs(); free > refill_owed) refill(free);
    classes.count(pkts, got);
    counters.packets.add(got);
    counters.bytes.add(bytes);
    return got;
  }

  // The steps of receive for one buffer, inline into its loop: the loop's locals they update
  // (`left`, `got`, `bytes`, passed by reference) stay in registers.

  // A device that writes past what we gave it, or less than a header, is broken: the queue
  // stops (as for a bad used id), the process goes on. The buffer goes back to the pool.
  [[gnu::always_inline]] bool length_fits(Mbuf* m, std::uint32_t len, bool first) noexcept {
    const std::uint32_t cap = m->buf_len - hdr_offset(m);
    if ((first && len < net_hdr_bytes) || len > cap) [[unlikely]] {
      counters.errors.add(1);
      health.report(QueueError::used_bad_length, len);
      mbuf_free(m);
      return false;
    }
    return true;
  }

  // The first buffer of a packet: the frame after the header. True when it is the whole packet;
  // false when more buffers follow (mergeable: it becomes partial_head and `left` counts them)
  // or when its header was bad (the buffer is then freed).
  [[gnu::always_inline]] bool start_packet(Mbuf* m, std::uint32_t len, std::uint16_t port,
                                           std::uint16_t& left) noexcept {
    const std::uint16_t off = hdr_offset(m);
    m->data_off = static_cast<std::uint16_t>(off + net_hdr_bytes);
    m->data_len = static_cast<std::uint16_t>(len - net_hdr_bytes);
    m->pkt_len = m->data_len;
    m->port = port;
    if constexpr (Mergeable) {
      std::uint16_t num_buffers;
      std::memcpy(&num_buffers, m->buf_addr + off + offsetof(NetHdr, num_buffers), sizeof num_buffers);
      // Zero is no packet; more than the ring holds never completes, and collecting it would
      // keep every buffer the ring gets from then on, which other ports' traffic needs from
      // the same pool.
      if (num_buffers == 0 || num_buffers > max_buffers) [[unlikely]] {
        counters.errors.add(1);
        health.report(QueueError::used_bad_num_buffers, num_buffers);
        mbuf_free(m);
        return false;
      }
      if (num_buffers > 1) {
        partial_head = partial_tail = m;
        left = static_cast<std::uint16_t>(num_buffers - 1);
        return false;
      }
    }
    return true;
  }

  // A further buffer of a mergeable packet (no header in it), chained behind partial_tail.
  // True when it was the last: partial_head is then the whole packet.
  [[gnu::always_inline]] bool append_buffer(Mbuf* m, std::uint32_t len, std::uint16_t& left) noexcept {
    m->data_off = hdr_offset(m);
    m->data_len = static_cast<std::uint16_t>(len);
    partial_tail->next = m;
    partial_tail = m;
    ++partial_head->nb_segs;
    partial_head->pkt_len += len;
    return --left == 0;
  }

  // A whole packet, to the application.
  [[gnu::always_inline]] static void deliver(Mbuf* m, Mbuf** pkts, std::uint16_t& got, std::uint64_t& bytes) noexcept {
    if constexpr (Offload) apply_offloads(m);
    bytes += m->pkt_len;
    pkts[got++] = m;
  }
};

struct alignas(cache_line_bytes) TxCommon : QueueCommon {
  // Control path, gate closed: frees what the device has sent; returns how many packets it
  // still holds.
  virtual std::uint32_t reclaim_sent() = 0;
  std::uint64_t zero_hdr = 0;     // IOVA of a zeroed 12-byte header in shared memory
  HdrOffloads offload;            // what the device takes in our headers (offload variant only)
  bool keep_num_buffers = false;  // pushed headers leave num_buffers alone (store_tx_net_hdr)
  TxQueueCounters counters;
  PacketClassCounters classes;  // DPDK's multicast, broadcast and size-bin xstats
};

// Offload: TX checksum/TSO requests go into the pushed header; a packet that cannot carry its
// own header (shared, chained) has its checksums done in software and a TSO request refused.
template <QueueTransport T, bool Packed, bool InOrder, bool Offload>
struct VirtioTx final : TxCommon {
  DriverEngine<Packed, InOrder, Mbuf*> engine;

  void init(const RingArea& area, bool event_idx) override {
    engine.init(area, &health, event_idx);
    engine.disarm_interrupt();  // as RX: no interrupt, EVENT_IDX or not
  }
  std::uint32_t fill() override { return 0; }
  std::uint32_t reclaim_sent() override {
    (void)free_completed(engine);
    return engine.outstanding();
  }
  std::uint32_t release_mbufs() override {
    (void)free_completed(engine);  // sent: not dropped
    std::uint32_t dropped = 0;
    engine.drain([&dropped](Mbuf* m) {
      mbuf_free(m);
      ++dropped;
    });
    return dropped;
  }

  std::uint16_t tx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    if (!gate.enter()) [[unlikely]] {  // the ring is being reset: as if it were full
      counters.full.add(n);
      return 0;
    }
    const std::uint16_t sent = transmit(pkts, n);
    gate.leave();
    return sent;
  }

 private:
  std::uint16_t transmit(Mbuf** pkts, std::uint16_t n) noexcept {
    // As DPDK's driver: reclaim only when the burst runs short, and only the shortfall, the
    // oldest chains, long completed.
    if (const std::uint32_t free = engine.free_descs(); free < n) free_completed(engine, n - free);
    engine.prefetch_post(n);
    constexpr std::uint16_t max_segs = 63;
    Buffer b[max_segs + 1];
    std::uint16_t sent = 0, posted = 0;  // taken (posted or dropped), and posted
    std::uint64_t bytes = 0;
    const bool keep = keep_num_buffers;
    auto posts = engine.begin_posts();
    for (; sent < n; ++sent) {
      Mbuf* m = pkts[sent];
      // Push the header into the headroom when nobody else sees this buffer (DPDK's can_push).
      // One segment is tested first: the usual packet then needs no test of the segment limit.
      const bool push = m->nb_segs == 1 && m->refcnt.load(std::memory_order_relaxed) == 1 && !m->is_indirect() &&
                        m->data_off >= net_hdr_bytes;
      if (!push && m->nb_segs > max_segs) [[unlikely]] {
        counters.errors.add(1);
        mbuf_free(m);
        pkts[sent] = nullptr;  // taken, not sent: out of the class counts
        continue;
      }
      if constexpr (Offload) {
        NetHdr hdr{};
        if (!tx_offload_to_net_hdr(*m, hdr, push ? offload : HdrOffloads{})) [[unlikely]] {
          counters.errors.add(1);
          mbuf_free(m);
          pkts[sent] = nullptr;  // taken, not sent: out of the class counts
          continue;
        }
        if (push) store_net_hdr(reinterpret_cast<std::byte*>(m->data() - net_hdr_bytes), hdr, !keep);
      }
      if (push) {
        std::uint8_t* h = m->data() - net_hdr_bytes;
        if constexpr (!Offload) store_tx_net_hdr(reinterpret_cast<std::byte*>(h), keep);
        const Buffer one{T::buffer_addr(m) + m->data_off - net_hdr_bytes,
                         static_cast<std::uint32_t>(m->data_len + net_hdr_bytes), false};
        if (!post(posts, &one, 1, m)) break;
      } else {
        std::uint16_t cnt = 0;
        b[cnt++] = {zero_hdr, net_hdr_bytes, false};
        for (Mbuf* s = m; s != nullptr; s = s->next) b[cnt++] = {T::buffer_addr(s) + s->data_off, s->data_len, false};
        if (!post(posts, b, cnt, m)) break;
      }
      ++posted;
      bytes += m->pkt_len;
    }
    engine.end_posts(posts);
    if (posted > 0 && engine.publish()) T::notify(*this);
    // The device only reads what was posted; the mbufs stay ours until free_completed() below.
    classes.count(pkts, sent);
    // Room for a burst like this one is made now, once this one is published: the device works
    // on it while we free what it completed long ago, instead of the next burst waiting for that.
    if (const std::uint32_t free = engine.free_descs(); free < n) free_completed(engine, n - free);
    if (sent < n) counters.full.add(n - sent);
    counters.packets.add(posted);  // the dropped ones are in errors: taken, not sent
    counters.bytes.add(bytes);
    return sent;
  }

  // Posts a packet's chain. Packets of several descriptors can need more than the shortfall
  // counted: then take back every completed chain and try once more. Inline, so that a chain
  // of a constant one descriptor folds the chain loop away.
  using Posts = typename DriverEngine<Packed, InOrder, Mbuf*>::Posts;
  [[gnu::always_inline]] bool post(Posts& posts, const Buffer* bufs, std::uint16_t cnt, Mbuf* m) noexcept {
    if (posts.add(bufs, cnt, m)) [[likely]]
      return true;
    engine.end_posts(posts);
    const bool room = free_completed(engine) > 0;
    posts = engine.begin_posts();
    return room && posts.add(bufs, cnt, m);
  }
};

}  // namespace ws::virtio
