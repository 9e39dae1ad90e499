// SPDX-License-Identifier: BSD-3-Clause
// net_e1000_em hot path: one legacy RX descriptor ring and one TX ring per port, in our DMA
// memory; the tail registers are MMIO stores to the device's BAR, done by the polling lcore.
// The device's write-backs are input we check: a length beyond the buffer or a fragment we
// never asked for (no jumbo chaining is enabled) stops the queue and is counted.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "ws/core/mbuf.hpp"
#include "ws/drivers/e1000/e1000_regs.hpp"
#include "ws/net/checksum.hpp"
#include "ws/net/headers.hpp"
#include "ws/port/port.hpp"

namespace ws::e1000 {

// The device writes RX and TX descriptors by DMA: every field it may write is read once,
// status first with acquire (the rest of the write-back is visible once DD is).
template <class T>
inline T load_once(const T* p) noexcept {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}

// An MMIO register store (a tail): the descriptors written before it must be in memory first;
// on x86 a compiler barrier keeps the store order, and stores to uncached memory are not
// reordered with earlier stores.
inline void write_reg(volatile std::uint32_t* r, std::uint32_t v) noexcept {
  __atomic_thread_fence(__ATOMIC_RELEASE);
  *r = v;
}

struct alignas(cache_line_bytes) Rx : QueueBase {
  RxDesc* ring = nullptr;    // in DMA memory
  std::vector<Mbuf*> slots;  // the mbuf whose buffer each descriptor points at
  std::uint16_t size = 0;
  std::uint16_t next = 0;  // next descriptor to look at
  volatile std::uint32_t* rdt = nullptr;
  PktmbufPool* pool = nullptr;
  std::uint16_t port_id = 0;
  std::uint16_t buf_bytes = 2048;  // RCTL.BSIZE: what the device may write per descriptor
  std::uint16_t unposted = 0;      // refilled descriptors not yet given back by RDT
  std::uint16_t free_thresh = 32;  // RDT is written once this many are refilled (an MMIO exit)
  bool broken = false;             // the device wrote garbage: the queue stopped
  RxQueueCounters counters;
  Counter bad_descriptors;

  static std::uint64_t buffer_iova(const Mbuf* m) noexcept { return m->buf_iova + m->headroom_default; }

  // Control path: every descriptor gets a fresh buffer; the device owns all but one (RDT).
  Result<void> fill(std::string_view who) {
    for (std::uint16_t i = 0; i < size; ++i) {
      Mbuf* m = pool->alloc();
      if (m == nullptr) {
        release();
        return fail("{}: RX pool '{}' has no mbufs for {} descriptors", who, pool->mempool().name(), size);
      }
      slots[i] = m;
      ring[i] = {buffer_iova(m), 0, 0, 0, 0, 0};
    }
    next = 0;
    unposted = 0;
    free_thresh = static_cast<std::uint16_t>(size / 8 < 32 ? size / 8 : 32);
    broken = false;
    return {};
  }
  void release() noexcept {
    for (Mbuf*& m : slots)
      if (m != nullptr) {
        mbuf_free(m);
        m = nullptr;
      }
  }

  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    if (broken) [[unlikely]]
      return 0;
    std::uint16_t ready = count_done(n);
    if (ready == 0) return 0;
    Mbuf* fresh[mbuf_max_burst];
    if (ready > mbuf_max_burst) ready = mbuf_max_burst;
    if (!pool->raw_alloc_bulk(std::span<Mbuf*>(fresh, ready))) [[unlikely]] {
      counters.nombuf.add(ready);  // the packets stay in the ring until mbufs come back
      return 0;
    }
    std::uint16_t got = 0, used = 0;
    std::uint64_t bytes = 0;
    std::uint16_t i = next;
    for (; used < ready; ++used) {
      RxDesc& d = ring[i];
      const std::uint8_t status = load_once(&d.status);
      const std::uint8_t errors = load_once(&d.errors);
      const std::uint16_t len = load_once(&d.length);
      if (len > buf_bytes || (status & rx_status::eop) == 0) [[unlikely]] {
        bad_descriptors.add(1);
        broken = true;
        break;
      }
      Mbuf* m = swap_buffer(i, fresh[used]);
      i = static_cast<std::uint16_t>(i + 1 == size ? 0 : i + 1);
      if ((errors & rx_error::frame) != 0 || len == 0) [[unlikely]] {
        counters.errors.add(1);
        mbuf_free(m);
        continue;
      }
      fill_packet(m, len, rx_csum_flags(status, errors));
      bytes += len;
      pkts[got++] = m;
    }
    if (used < ready) mbuf_free_bulk(std::span<Mbuf* const>(fresh + used, ready - used));
    give_back(i, used);
    counters.packets.add(got);
    counters.bytes.add(bytes);
    return got;
  }

  // The steps of rx_burst, inline into it.

  // How many descriptors are done, up to n (DD is written last by the device).
  [[gnu::always_inline]] std::uint16_t count_done(std::uint16_t n) const noexcept {
    std::uint16_t ready = 0;
    for (std::uint16_t i = next; ready < n; i = static_cast<std::uint16_t>(i + 1 == size ? 0 : i + 1)) {
      if ((__atomic_load_n(&ring[i].status, __ATOMIC_ACQUIRE) & rx_status::dd) == 0) break;
      ++ready;
    }
    return ready;
  }

  // Descriptor i gets the fresh buffer `f` and goes back to the device; returns the mbuf whose
  // buffer the device filled.
  [[gnu::always_inline]] Mbuf* swap_buffer(std::uint16_t i, Mbuf* f) noexcept {
    RxDesc& d = ring[i];
    Mbuf* m = slots[i];
    slots[i] = f;
    d.addr = buffer_iova(f);
    d.status = 0;
    return m;
  }

  // A received frame of `len` bytes in m's buffer, as the application sees it.
  [[gnu::always_inline]] void fill_packet(Mbuf* m, std::uint16_t len, std::uint64_t ol_flags) const noexcept {
    m->data_off = m->headroom_default;
    m->data_len = len;
    m->pkt_len = len;
    m->port = port_id;
    m->packet_type = 0;
    m->vlan_tci = 0;
    m->tx_offload = 0;
    m->ol_flags = ol_flags;
  }

  // The `used` descriptors before `i` have fresh buffers: the next burst starts at i, and RDT
  // moves (an MMIO exit) once free_thresh of them wait.
  [[gnu::always_inline]] void give_back(std::uint16_t i, std::uint16_t used) noexcept {
    next = i;
    unposted = static_cast<std::uint16_t>(unposted + used);
    if (unposted >= free_thresh) {
      unposted = 0;
      write_reg(rdt, i == 0 ? size - 1u : i - 1u);  // one behind the next to read: the ring never looks empty
    }
  }

  // ---- for the isolation test only (e1000_testing.hpp); never on the data path ----
  // Points the descriptor the device fills next at `iova`, memory that is not ours; the mbuf
  // stays in its slot. Between bursts, on a ring with nothing received.
  void post_stray(std::uint64_t iova) noexcept { ring[next].addr = iova; }
  // Once the device has filled that descriptor (DD), the frame went wherever `iova` led, never
  // into our mbuf: the queue counts an error and the descriptor goes back with its own buffer.
  // Returns whether it was done; its length in `len`.
  bool take_stray(std::uint16_t& len) noexcept {
    RxDesc& d = ring[next];
    if ((__atomic_load_n(&d.status, __ATOMIC_ACQUIRE) & rx_status::dd) == 0) return false;
    len = load_once(&d.length);
    counters.errors.add(1);
    d.addr = buffer_iova(slots[next]);
    d.status = 0;
    give_back(static_cast<std::uint16_t>(next + 1 == size ? 0 : next + 1), 1);
    return true;
  }

  // §7.1.4.2: IXSM means the device did not check; IPCS/TCPCS/UDPCS that it did, IPE/TCPE
  // whether it failed.
  static std::uint64_t rx_csum_flags(std::uint8_t status, std::uint8_t errors) noexcept {
    if (status & rx_status::ixsm) return 0;
    std::uint64_t f = 0;
    if (status & rx_status::ipcs)
      f |= (errors & rx_error::ipe) ? mbuf_flag::rx_ip_cksum_bad : mbuf_flag::rx_ip_cksum_good;
    if (status & (rx_status::tcpcs | rx_status::udpcs))
      f |= (errors & rx_error::tcpe) ? mbuf_flag::rx_l4_cksum_bad : mbuf_flag::rx_l4_cksum_good;
    return f;
  }
};

// TX reports completion (RS, then DD written back) once per rs_thresh descriptors, as DPDK's
// em does: each write-back is a DMA write by the device, and a completed RS descriptor means
// every descriptor before it is done too (§7.2.10: descriptors are processed in order).
struct alignas(cache_line_bytes) TxCommon : QueueBase {
  TxDesc* ring = nullptr;
  std::vector<Mbuf*> slots;       // at a packet's last descriptor: the packet
  std::vector<std::uint16_t> rs;  // descriptors with RS set, oldest first (a FIFO of `size`)
  std::uint16_t rs_head = 0, rs_count = 0;
  std::uint16_t size = 0;
  std::uint16_t tail = 0;        // next descriptor to fill (TDT)
  std::uint16_t clean = 0;       // first descriptor not yet reclaimed
  std::uint16_t free = 0;        // descriptors we may fill (one always stays empty)
  std::uint16_t rs_thresh = 32;  // descriptors between two RS
  std::uint16_t since_rs = 0;    // descriptors filled since the last RS
  volatile std::uint32_t* tdt = nullptr;
  // The checksum context loaded in the device (§7.2.6), as Tx::context_key; 0: none.
  std::uint32_t context = 0;
  TxQueueCounters counters;

  void init() noexcept {
    std::memset(ring, 0, sizeof(TxDesc) * size);
    slots.assign(size, nullptr);
    rs.assign(size, 0);
    rs_head = rs_count = 0;
    tail = clean = 0;
    free = static_cast<std::uint16_t>(size - 1);
    rs_thresh = static_cast<std::uint16_t>(size / 4 < 32 ? size / 4 : 32);
    since_rs = 0;
    context = 0;
  }
  std::uint16_t wrap(std::uint32_t i) const noexcept { return static_cast<std::uint16_t>(i >= size ? i - size : i); }
  // Sets RS on descriptor `eop` (a packet's last) and remembers it.
  void mark_rs(std::uint16_t eop) noexcept {
    ring[eop].cmd_len |= txd::rs;
    rs[wrap(std::uint32_t{rs_head} + rs_count)] = eop;
    ++rs_count;
    since_rs = 0;
  }
  // Frees what the device has sent: everything up to each RS descriptor that has DD.
  void reclaim() noexcept {
    Mbuf* done[64];
    std::uint16_t k = 0;
    while (rs_count > 0) {
      const std::uint16_t pos = rs[rs_head];
      if ((__atomic_load_n(&ring[pos].upper, __ATOMIC_ACQUIRE) & txd::sta_dd) == 0) break;
      const std::uint16_t after = wrap(std::uint32_t{pos} + 1);
      for (std::uint16_t i = clean; i != after; i = wrap(std::uint32_t{i} + 1)) {
        if (slots[i] == nullptr) continue;
        done[k++] = slots[i];
        slots[i] = nullptr;
        if (k == 64) {
          mbuf_free_bulk(std::span<Mbuf* const>(done, k));
          k = 0;
        }
      }
      free = static_cast<std::uint16_t>(free + wrap(std::uint32_t{after} + size - clean));
      clean = after;
      rs_head = wrap(std::uint32_t{rs_head} + 1);
      --rs_count;
    }
    if (k > 0) mbuf_free_bulk(std::span<Mbuf* const>(done, k));
  }
  // Control path, device stopped: frees what it still holds; returns how many packets.
  std::uint32_t release() noexcept {
    std::uint32_t n = 0;
    for (Mbuf*& m : slots)
      if (m != nullptr) {
        mbuf_free(m);
        m = nullptr;
        ++n;
      }
    return n;
  }
};

// Offload: checksum requests (ol_flags) become a context descriptor (when it changes) and
// extended data descriptors with POPTS; without, every descriptor is a legacy one.
template <bool Offload>
struct Tx final : TxCommon {
  std::uint16_t tx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    if (free < 2 * rs_thresh) reclaim();
    std::uint16_t sent = 0, posted = 0;
    std::uint64_t bytes = 0;
    std::uint16_t last = 0;
    for (; sent < n; ++sent) {
      Mbuf* m = pkts[sent];
      std::uint32_t popts = 0;
      std::uint32_t need = m->nb_segs;
      std::uint32_t ctx = 0;
      if constexpr (Offload) {
        ctx = context_key(*m);
        if (ctx != 0 && ctx != context) ++need;
      }
      if (need > free) [[unlikely]] {
        reclaim();
        if (need > free) break;
      }
      if constexpr (Offload) {
        if (ctx != 0) {
          if (!prepare_checksums(*m)) [[unlikely]] {
            counters.errors.add(1);
            mbuf_free(m);
            continue;
          }
          if (ctx != context) write_context(*m, ctx);
          popts = (m->ol_flags & mbuf_flag::tx_ip_cksum ? txd::popts_ixsm : 0) |
                  (m->ol_flags & mbuf_flag::tx_l4_mask ? txd::popts_txsm : 0);
        }
      }
      for (Mbuf* s = m; s != nullptr; s = s->next) {
        last = tail;
        TxDesc& d = ring[tail];
        d.addr = s->buf_iova + s->data_off;
        std::uint32_t cmd = s->data_len | txd::ifcs;
        if (Offload && ctx != 0) cmd |= txd::dext | txd::dtyp_data;
        if (s->next == nullptr) cmd |= txd::eop;
        d.cmd_len = cmd;
        d.upper = popts;
        tail = wrap(std::uint32_t{tail} + 1);
      }
      free = static_cast<std::uint16_t>(free - m->nb_segs);
      since_rs = static_cast<std::uint16_t>(since_rs + need);
      slots[last] = m;
      if (since_rs >= rs_thresh) mark_rs(last);
      bytes += m->pkt_len;
      ++posted;
    }
    if (posted > 0) {
      // A ring this full would wait for an RS that no later burst may come to set.
      if (since_rs > 0 && free < 2 * rs_thresh) mark_rs(last);
      write_reg(tdt, tail);
    }
    if (sent < n) counters.full.add(n - sent);
    counters.packets.add(posted);
    counters.bytes.add(bytes);
    return sent;
  }

 private:
  static std::uint32_t context_key(const Mbuf& m) noexcept {
    const std::uint64_t want = m.ol_flags & (mbuf_flag::tx_ip_cksum | mbuf_flag::tx_l4_mask);
    if (want == 0) return 0;
    const std::uint32_t kind = (m.ol_flags & mbuf_flag::tx_ipv6 ? 1u : 0u) |
                               ((m.ol_flags & mbuf_flag::tx_l4_mask) == mbuf_flag::tx_tcp_cksum ? 2u : 0u) |
                               ((m.ol_flags & mbuf_flag::tx_l4_mask) == mbuf_flag::tx_udp_cksum ? 4u : 0u) |
                               (m.ol_flags & mbuf_flag::tx_ip_cksum ? 8u : 0u);
    return static_cast<std::uint32_t>(m.l2_len) | static_cast<std::uint32_t>(m.l3_len) << 8 | kind << 24 | 1u << 31;
  }
  // As Intel's drivers ask (DPDK's rte_net_intel_cksum_prepare): the IPv4 checksum field zero,
  // the L4 one holding the pseudo-header sum; the device adds the rest.
  static bool prepare_checksums(Mbuf& m) noexcept {
    const std::uint32_t l4_off = m.l2_len + m.l3_len;
    const std::uint64_t l4 = m.ol_flags & mbuf_flag::tx_l4_mask;
    const std::uint32_t l4_hdr = l4 == mbuf_flag::tx_tcp_cksum ? sizeof(TcpHdr) : l4 ? sizeof(UdpHdr) : 0;
    if (m.l3_len == 0 || l4_off + l4_hdr > m.data_len) return false;
    std::uint8_t* l3 = m.data() + m.l2_len;
    const bool ipv6 = (m.ol_flags & mbuf_flag::tx_ipv6) != 0;
    if (!ipv6 && (m.ol_flags & mbuf_flag::tx_ip_cksum)) reinterpret_cast<Ipv4Hdr*>(l3)->hdr_checksum = 0;
    if (l4 == 0) return true;
    const std::uint32_t l4_len = m.pkt_len - l4_off;
    const bool tcp = l4 == mbuf_flag::tx_tcp_cksum;
    const std::uint32_t sum =
        ipv6 ? ipv6_pseudo_sum(*reinterpret_cast<const Ipv6Hdr*>(l3), l4_len, tcp ? ip_proto_tcp : ip_proto_udp)
             : ipv4_pseudo_sum(*reinterpret_cast<const Ipv4Hdr*>(l3), l4_len);
    const std::uint16_t folded = fold_sum(sum);
    std::memcpy(m.data() + l4_off + (tcp ? offsetof(TcpHdr, cksum) : offsetof(UdpHdr, dgram_cksum)), &folded, 2);
    return true;
  }
  void write_context(const Mbuf& m, std::uint32_t key) noexcept {
    auto& c = reinterpret_cast<TxContextDesc&>(ring[tail]);
    const auto l2 = static_cast<std::uint8_t>(m.l2_len);
    const std::uint32_t l4_start = m.l2_len + m.l3_len;
    const std::uint64_t l4 = m.ol_flags & mbuf_flag::tx_l4_mask;
    c.ipcss = l2;
    c.ipcso = static_cast<std::uint8_t>(l2 + offsetof(Ipv4Hdr, hdr_checksum));
    c.ipcse = static_cast<std::uint16_t>(l4_start - 1);
    c.tucss = static_cast<std::uint8_t>(l4_start);
    c.tucso = static_cast<std::uint8_t>(
        l4_start + (l4 == mbuf_flag::tx_tcp_cksum ? offsetof(TcpHdr, cksum) : offsetof(UdpHdr, dgram_cksum)));
    c.tucse = 0;  // to the end of the packet
    c.cmd_len = txd::dext | (m.ol_flags & mbuf_flag::tx_ipv6 ? 0 : txd::tucmd_ip) |
                (l4 == mbuf_flag::tx_tcp_cksum ? txd::tucmd_tcp : 0);
    c.status = 0;
    c.hdr_len = 0;
    c.mss = 0;
    tail = wrap(std::uint32_t{tail} + 1);
    --free;
    context = key;
  }
};

}  // namespace ws::e1000
