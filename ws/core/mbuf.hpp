// SPDX-License-Identifier: BSD-3-Clause
// Mbuf: a packet buffer's metadata in two cache lines, followed in its pool object by an
// optional private area; its data buffer (headroom + data room) lies in the arena.
//
//   private memory: [ Mbuf 128 B | private area ]     (no peer ever maps it)
//   arena:          [ headroom | data ... | tailroom ] (shared with vhost-user peers, DMA)
//                     ^buf_addr  ^buf_addr + data_off
//
// The split keeps our pointers (buf_addr, pool, next) out of the memory a vhost-user backend
// maps: it may scribble on packet data, never on where the next packet goes.
//
// Line 0 holds what RX and TX touch; line 1 the rest. A packet may be a chain of segments
// (`next`, `nb_segs` and `pkt_len` on the first). A clone is an "indirect" mbuf pointing at a
// direct mbuf's buffer, which stays alive through the direct mbuf's reference count.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "ws/core/mempool.hpp"

namespace ws {

/// Offload and state flags (Mbuf::ol_flags).
namespace mbuf_flag {
inline constexpr std::uint64_t rx_vlan = 1ULL << 0;           ///< The packet had a VLAN tag; vlan_tci holds it.
inline constexpr std::uint64_t rx_rss_hash = 1ULL << 1;       ///< rss_hash holds the RSS hash.
inline constexpr std::uint64_t rx_fdir = 1ULL << 2;           ///< A flow rule matched (DPDK's RTE_MBUF_F_RX_FDIR).
inline constexpr std::uint64_t rx_fdir_id = 1ULL << 13;       ///< mark holds a flow rule's mark (RX_FDIR_ID).
inline constexpr std::uint64_t rx_ip_cksum_bad = 1ULL << 4;   ///< The IPv4 header checksum is wrong.
inline constexpr std::uint64_t rx_ip_cksum_good = 1ULL << 7;  ///< The IPv4 header checksum is right.
inline constexpr std::uint64_t rx_l4_cksum_bad = 1ULL << 3;   ///< The TCP/UDP checksum is wrong.
inline constexpr std::uint64_t rx_l4_cksum_good = 1ULL << 8;  ///< The TCP/UDP checksum is right.
inline constexpr std::uint64_t rx_vlan_stripped = 1ULL << 6;  ///< The VLAN tag was removed from the data (in vlan_tci).
inline constexpr std::uint64_t rx_lro = 1ULL << 16;           ///< coalesced packet; tso_segsz = the sender's MSS
inline constexpr std::uint64_t tx_tcp_seg = 1ULL
                                            << 50;  ///< Segment this TCP packet into tso_segsz-byte segments (TSO).
inline constexpr std::uint64_t tx_tcp_cksum = 1ULL << 52;  ///< Fill the TCP checksum.
inline constexpr std::uint64_t tx_udp_cksum = 3ULL << 52;  ///< Fill the UDP checksum.
inline constexpr std::uint64_t tx_l4_mask = 3ULL << 52;    ///< The L4 checksum request bits.
inline constexpr std::uint64_t tx_ip_cksum = 1ULL << 54;   ///< Fill the IPv4 header checksum.
inline constexpr std::uint64_t tx_ipv4 = 1ULL << 55;       ///< The packet is IPv4 (with checksum or TSO requests).
inline constexpr std::uint64_t tx_ipv6 = 1ULL << 56;       ///< The packet is IPv6 (with checksum or TSO requests).
inline constexpr std::uint64_t tx_vlan = 1ULL << 57;       ///< Insert vlan_tci as a VLAN tag.
inline constexpr std::uint64_t indirect = 1ULL << 62;      ///< buffer belongs to another mbuf
}  // namespace mbuf_flag

/// A packet buffer's metadata (DPDK's rte_mbuf, two cache lines); the data follows it in its
/// pool object. A packet may be a chain of segments.
struct alignas(cache_line_bytes) Mbuf {
  // ---- cache line 0: touched by RX and TX ----
  std::uint8_t* buf_addr;             ///< start of the buffer (own, or the direct mbuf's)
  std::uint64_t buf_iova;             ///< the device's address of buf_addr (Arena::iova)
  std::uint16_t data_off;             ///< packet data starts at buf_addr + data_off
  std::atomic<std::uint16_t> refcnt;  ///< 1 while one owner holds it; free mbufs hold 1
  std::uint16_t nb_segs;              ///< segments in the chain (first segment only)
  std::uint16_t port;                 ///< input port
  std::uint64_t ol_flags;             ///< mbuf_flag::*
  std::uint32_t packet_type;          ///< layer types, filled by parsers or drivers
  std::uint32_t pkt_len;              ///< whole packet (first segment only)
  std::uint16_t data_len;             ///< this segment
  std::uint16_t vlan_tci;             ///< VLAN tag control information (rx_vlan, tx_vlan)
  std::uint32_t rss_hash;             ///< RSS hash (rx_rss_hash)
  std::uint16_t vlan_tci_outer;       ///< outer VLAN tag (QinQ)
  std::uint16_t buf_len;              ///< bytes from buf_addr to the buffer's end
  std::uint32_t mark;                 ///< a flow rule's MARK id (rx_fdir_id), DPDK's hash.fdir.hi
  std::uint64_t timestamp;            ///< free for drivers and applications (nanoseconds by convention)

  // ---- cache line 1: the rest ----
  Mempool* pool;  ///< the pool this mbuf returns to
  Mbuf* next;     ///< next segment
  union {
    std::uint64_t tx_offload;
    struct {
      std::uint64_t l2_len : 7;
      std::uint64_t l3_len : 9;
      std::uint64_t l4_len : 8;
      std::uint64_t tso_segsz : 16;
      std::uint64_t outer_l3_len : 9;
      std::uint64_t outer_l2_len : 7;
      std::uint64_t : 8;
    };
  };
  Mbuf* direct;                    ///< for indirect mbufs: whose buffer we use
  std::uint64_t user_data;         ///< free for the application (line 1, as DPDK's)
  std::uint64_t own_buf_iova;      ///< buf_iova of this mbuf's own buffer
  std::uint16_t priv_size;         ///< bytes of the application's area after the Mbuf
  std::uint16_t own_buf_len;       ///< length of this mbuf's own buffer
  std::uint16_t headroom_default;  ///< data_off after reset
  std::uint8_t reserved1[2];       ///< padding, unused
  std::uint8_t* own_buf_addr;      ///< this mbuf's own buffer, in the arena

  // ---- data access ----
  /// The packet data (of this segment) as a T*.
  template <class T = std::uint8_t>
  T* data() noexcept {
    return reinterpret_cast<T*>(buf_addr + data_off);
  }
  /// The packet data (of this segment) as a const T*.
  template <class T = std::uint8_t>
  const T* data() const noexcept {
    return reinterpret_cast<const T*>(buf_addr + data_off);
  }
  /// This mbuf's own buffer (an indirect mbuf's buf_addr points elsewhere).
  std::uint8_t* own_buffer() noexcept { return own_buf_addr; }
  /// The application's private area (priv_size bytes), right after the Mbuf.
  void* priv() noexcept { return this + 1; }
  /// Bytes free before the data.
  std::uint16_t headroom() const noexcept { return data_off; }
  /// Bytes free after the data of this segment.
  std::uint16_t tailroom() const noexcept { return static_cast<std::uint16_t>(buf_len - data_off - data_len); }
  /// True for a clone using another mbuf's buffer.
  bool is_indirect() const noexcept { return (ol_flags & mbuf_flag::indirect) != 0; }
  /// The last segment of the chain.
  Mbuf* last_segment() noexcept {
    Mbuf* m = this;
    while (m->next) m = m->next;
    return m;
  }

  // ---- editing (on the first segment of a packet); nullptr / false when it does not fit ----
  std::uint8_t* append(std::uint16_t len) noexcept;   ///< grow at the tail of the last segment
  std::uint8_t* prepend(std::uint16_t len) noexcept;  ///< grow into the headroom
  std::uint8_t* adj(std::uint16_t len) noexcept;      ///< drop len bytes from the front
  bool trim(std::uint16_t len) noexcept;              ///< drop len bytes from the end (last segment)
  bool chain(Mbuf* tail) noexcept;                    ///< append a packet as further segments

  /// Back to the state alloc hands out (length 0, one segment, default headroom). Direct mbufs only.
  void reset() noexcept {
    next = nullptr;
    pkt_len = 0;
    data_len = 0;
    nb_segs = 1;
    port = 0xffff;
    ol_flags = 0;
    packet_type = 0;
    vlan_tci = 0;
    vlan_tci_outer = 0;
    tx_offload = 0;
    data_off = headroom_default;
  }
};

static_assert(sizeof(Mbuf) == 2 * cache_line_bytes, "Mbuf must be two cache lines");
static_assert(offsetof(Mbuf, refcnt) < cache_line_bytes && offsetof(Mbuf, ol_flags) < cache_line_bytes &&
                  offsetof(Mbuf, pkt_len) < cache_line_bytes && offsetof(Mbuf, data_len) < cache_line_bytes &&
                  offsetof(Mbuf, rss_hash) < cache_line_bytes,
              "RX/TX fields must sit in the first cache line");
static_assert(offsetof(Mbuf, pool) == cache_line_bytes, "line 1 starts with the pool");
static_assert(offsetof(Mbuf, buf_iova) < cache_line_bytes, "drivers read buf_iova with buf_addr");
static_assert(offsetof(Mbuf, own_buf_addr) % alignof(std::uint8_t*) == 0, "own_buf_addr is aligned");
static_assert(std::atomic<std::uint16_t>::is_always_lock_free);

/// Headroom of a fresh mbuf (RTE_PKTMBUF_HEADROOM).
inline constexpr std::uint16_t mbuf_default_headroom = 128;
inline constexpr std::uint16_t mbuf_default_data_room = 2048 + mbuf_default_headroom;  ///< as DPDK
/// The largest burst the library's bulk paths take at once.
inline constexpr std::uint16_t mbuf_max_burst = 512;

namespace detail {
// The last reference dropped (an indirect mbuf detached): whether m goes back to its pool.
bool mbuf_release_shared(Mbuf* m) noexcept;
// `refs` references to direct mbuf m dropped at once: whether they were the last (m then holds
// refcnt 1 again, ready for its pool).
bool mbuf_release_refs(Mbuf* m, std::uint16_t refs) noexcept;
}  // namespace detail

/// Decide whether the last reference to segment `m` is being dropped; if so, detach it (for an
/// indirect mbuf, which may in turn free the direct one) and return it ready for its pool.
/// Inline for a direct mbuf we alone hold, what a forwarding burst frees: out of line, the call
/// cost a burst more than the check (~13 instructions per packet).
inline Mbuf* mbuf_prefree_segment(Mbuf* m) noexcept {
  // Sole owner: no atomic read-modify-write needed (DPDK's fast path too). acquire: when 1 was
  // written by another holder's decrement (a clone detached on another lcore), it pairs with
  // that acq_rel fetch_sub, so their reads of the buffer happen before we reuse it.
  if (m->refcnt.load(std::memory_order_acquire) != 1 || m->is_indirect()) [[unlikely]] {
    if (!detail::mbuf_release_shared(m)) return nullptr;
  }
  if (m->next) {
    m->next = nullptr;
    m->nb_segs = 1;
  }
  return m;
}

/// Free a whole packet (every segment, honouring reference counts). Lock-free.
inline void mbuf_free(Mbuf* m) noexcept {
  while (m) {
    Mbuf* next = m->next;
    if (Mbuf* f = mbuf_prefree_segment(m)) f->pool->put(f);
    m = next;
  }
}

/// Free many packets, returning segments to their pools in bulk. Lock-free.
[[gnu::hot]] void mbuf_free_bulk(std::span<Mbuf* const> pkts) noexcept;

/// A pool of mbufs: Mempool objects initialised as Mbufs with their buffers.
class PktmbufPool {
 public:
  /// What create() makes (as rte_pktmbuf_pool_create's arguments).
  struct Options {
    std::string name = "mbuf_pool";                          ///< Names the pool in errors.
    std::uint32_t count = 8192;                              ///< Mbufs in the pool.
    std::uint32_t cache_size = 250;                          ///< Per-lcore cache, <= mempool_cache_max.
    std::uint16_t data_room_bytes = mbuf_default_data_room;  ///< headroom included
    std::uint16_t priv_bytes = 0;                            ///< Application area between each Mbuf and its buffer.
  };
  /// Carves the data buffers from `arena`, puts the Mbufs (and their private areas) in private
  /// memory, and initialises every mbuf; errors name the pool.
  static Result<std::unique_ptr<PktmbufPool>> create(Arena& arena, const Options& options);
  /// Bytes create() takes from the arena for `options` (to size an arena before creating it), in
  /// either IOVA mode.
  static std::size_t memory_bytes(const Options& options) noexcept;
  /// The arena block that holds every data buffer (what a device or a peer must reach).
  std::span<const std::byte> buffers() const noexcept { return buffers_; }

  /// Allocate and reset n mbufs, all or none. Lock-free (see Mempool).
  bool alloc_bulk(std::span<Mbuf*> out) noexcept {
    if (!raw_alloc_bulk(out)) return false;
    for (Mbuf* m : out) m->reset();
    return true;
  }
  /// One reset mbuf, or nullptr when the pool is empty.
  Mbuf* alloc() noexcept {
    Mbuf* m = nullptr;
    return alloc_bulk(std::span<Mbuf*>(&m, 1)) ? m : nullptr;
  }
  /// Allocate without reset: next == nullptr, nb_segs == 1 and refcnt == 1 hold for every free
  /// mbuf; other fields are whatever the last user left.
  bool raw_alloc_bulk(std::span<Mbuf*> out) noexcept {
    return pool_->get_bulk(std::span<void*>(reinterpret_cast<void**>(out.data()), out.size()));
  }

  /// Clone packet `m`: a chain of indirect mbufs from this pool sharing m's buffers.
  Mbuf* clone(Mbuf* m) noexcept;

  /// Copy `len` bytes into a new packet: one mbuf, or a chain when the bytes exceed one mbuf's
  /// data room (as DPDK's jumbo RX paths). nullptr, with nothing held, when the pool runs dry.
  /// Lock-free (see Mempool); for drivers that receive into their own memory (pcap, af_packet).
  Mbuf* copy_in(const std::uint8_t* data, std::uint32_t len, std::uint16_t port) noexcept {
    Mbuf* head = nullptr;
    Mbuf* tail = nullptr;
    std::uint32_t done = 0;
    do {
      Mbuf* m = nullptr;
      if (!raw_alloc_bulk(std::span<Mbuf*>(&m, 1))) [[unlikely]] {
        if (head) mbuf_free(head);
        return nullptr;
      }
      m->data_off = m->headroom_default;
      m->ol_flags = 0;
      m->packet_type = 0;
      m->vlan_tci = 0;
      m->tx_offload = 0;
      m->port = port;
      const auto chunk = static_cast<std::uint16_t>(std::min<std::uint32_t>(m->buf_len - m->data_off, len - done));
      std::memcpy(m->data(), data + done, chunk);
      m->data_len = chunk;
      done += chunk;
      if (head) {
        tail->next = m;
        ++head->nb_segs;
      } else {
        head = m;  // free mbufs hold nb_segs == 1 and next == nullptr
      }
      tail = m;
    } while (done < len);
    head->pkt_len = len;
    return head;
  }

  Mempool& mempool() noexcept { return *pool_; }                         ///< The underlying pool.
  const Mempool& mempool() const noexcept { return *pool_; }             ///< The underlying pool.
  std::uint32_t in_use() const noexcept { return pool_->in_use(); }      ///< Mbufs handed out (see Mempool::in_use).
  std::uint16_t data_room_bytes() const noexcept { return data_room_; }  ///< Buffer bytes per mbuf, headroom included.

 private:
  PktmbufPool(std::unique_ptr<Mempool> pool, std::uint16_t data_room, std::span<const std::byte> buffers)
      : pool_(std::move(pool)), data_room_(data_room), buffers_(buffers) {}
  std::unique_ptr<Mempool> pool_;
  std::uint16_t data_room_;
  std::span<const std::byte> buffers_;
};

}  // namespace ws
