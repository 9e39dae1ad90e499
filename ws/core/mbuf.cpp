// SPDX-License-Identifier: BSD-3-Clause
// Mbuf editing, freeing and cloning.
#include "ws/core/mbuf.hpp"

#include <new>

namespace ws {
namespace {

// Give an indirect mbuf its own buffer back; drop its reference on the direct mbuf.
void detach(Mbuf* mi) noexcept {
  Mbuf* md = mi->direct;
  mi->buf_addr = mi->own_buffer();
  mi->buf_iova = mi->own_buf_iova;
  mi->buf_len = mi->own_buf_len;
  mi->data_off = std::min<std::uint16_t>(mi->headroom_default, mi->buf_len);
  mi->data_len = 0;
  mi->direct = nullptr;
  mi->ol_flags = 0;
  // acq_rel: the last decrement must see every other holder's accesses to the buffer.
  if (md->refcnt.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    md->next = nullptr;
    md->nb_segs = 1;
    md->refcnt.store(1, std::memory_order_relaxed);
    md->pool->put(md);
  }
}

}  // namespace

namespace detail {

// mbuf_prefree_segment() for a segment another holder may share, or an indirect one.
bool mbuf_release_shared(Mbuf* m) noexcept {
  // acquire: as in mbuf_prefree_segment().
  if (m->refcnt.load(std::memory_order_acquire) != 1) {
    // acq_rel: pairs with other holders' decrements so their buffer accesses happen first.
    if (m->refcnt.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    m->refcnt.store(1, std::memory_order_relaxed);
  }
  if (m->is_indirect()) detach(m);
  return true;
}

bool mbuf_release_refs(Mbuf* m, std::uint16_t refs) noexcept {
  // acquire: as in mbuf_prefree_segment(). All the references are ours: nobody else can read
  // or change the count, so no read-modify-write (the sole-owner case generalised).
  if (m->refcnt.load(std::memory_order_acquire) != refs) {
    // acq_rel: pairs with other holders' decrements so their buffer accesses happen first.
    if (m->refcnt.fetch_sub(refs, std::memory_order_acq_rel) != refs) return false;
  }
  m->refcnt.store(1, std::memory_order_relaxed);
  return true;
}

}  // namespace detail

void mbuf_free_bulk(std::span<Mbuf* const> pkts) noexcept {
  // One put per burst (up to dpdk-testpmd's MAX_PKT_BURST): the pool's cache then sees a burst
  // as DPDK's does, and a 128-packet burst no longer crosses the flush threshold in two halves.
  constexpr std::size_t batch = mempool_cache_max;
  void* pending[batch];
  std::size_t n = 0;
  Mempool* pool = nullptr;
  auto stage = [&](Mbuf* f) {
    if (f->pool != pool || n == batch) {
      if (n) pool->put_bulk(std::span<void* const>(pending, n));
      n = 0;
      pool = f->pool;
    }
    pending[n++] = f;
  };
  for (std::size_t i = 0; i < pkts.size(); ++i) {
    Mbuf* m = pkts[i];
    if (m == nullptr) continue;  // as mbuf_free(nullptr): callers may pass empty slots
    const bool single = m->next == nullptr && !m->is_indirect();
    // acquire: as in mbuf_prefree_segment(), whose fast path this is for one segment.
    const std::uint16_t refs = m->refcnt.load(std::memory_order_acquire);
    if (single && refs == 1) [[likely]] {  // ours alone: what a forwarding burst frees
      stage(m);
      continue;
    }
    if (single) {
      // The same mbuf several times in a row (flowgen's clones, one frame sent to many): its
      // references are dropped in one step, not one atomic read-modify-write each.
      std::size_t run = 1;
      while (i + run < pkts.size() && pkts[i + run] == m && run < UINT16_MAX) ++run;
      if (run > 1) {
        i += run - 1;
        if (detail::mbuf_release_refs(m, static_cast<std::uint16_t>(run))) stage(m);
        continue;
      }
    }
    while (m) {
      Mbuf* next = m->next;
      if (Mbuf* f = mbuf_prefree_segment(m)) stage(f);
      m = next;
    }
  }
  if (n) pool->put_bulk(std::span<void* const>(pending, n));
}

std::uint8_t* Mbuf::append(std::uint16_t len) noexcept {
  Mbuf* last = last_segment();
  if (len > last->tailroom()) return nullptr;
  std::uint8_t* tail = last->data() + last->data_len;
  last->data_len = static_cast<std::uint16_t>(last->data_len + len);
  pkt_len += len;
  return tail;
}

std::uint8_t* Mbuf::prepend(std::uint16_t len) noexcept {
  if (len > data_off) return nullptr;
  data_off = static_cast<std::uint16_t>(data_off - len);
  data_len = static_cast<std::uint16_t>(data_len + len);
  pkt_len += len;
  return data();
}

std::uint8_t* Mbuf::adj(std::uint16_t len) noexcept {
  if (len > data_len) return nullptr;
  data_off = static_cast<std::uint16_t>(data_off + len);
  data_len = static_cast<std::uint16_t>(data_len - len);
  pkt_len -= len;
  return data();
}

bool Mbuf::trim(std::uint16_t len) noexcept {
  Mbuf* last = last_segment();
  if (len > last->data_len) return false;
  last->data_len = static_cast<std::uint16_t>(last->data_len - len);
  pkt_len -= len;
  return true;
}

bool Mbuf::chain(Mbuf* tail) noexcept {
  if (std::uint32_t{nb_segs} + tail->nb_segs > 0xffff) return false;
  last_segment()->next = tail;
  nb_segs = static_cast<std::uint16_t>(nb_segs + tail->nb_segs);
  pkt_len += tail->pkt_len;
  tail->pkt_len = tail->data_len;
  tail->nb_segs = 1;
  return true;
}

std::size_t PktmbufPool::memory_bytes(const Options& o) noexcept {
  const std::size_t buffer = (std::size_t{o.data_room_bytes} + cache_line_bytes - 1) & ~(cache_line_bytes - 1);
  const std::size_t bytes = std::size_t{o.count} * buffer;
  // In an arena of physical addresses no buffer crosses a 2 MiB page, so each page may lose up
  // to a buffer; + the block's alignment.
  return bytes + (bytes / (2u << 20) + 2) * buffer + cache_line_bytes;
}

Result<std::unique_ptr<PktmbufPool>> PktmbufPool::create(Arena& arena, const Options& o) {
  if (o.data_room_bytes < mbuf_default_headroom)
    return fail("mbuf pool '{}': data room {} is smaller than the headroom {}", o.name, o.data_room_bytes,
                mbuf_default_headroom);
  if (o.count == 0) return fail("mbuf pool '{}': mbuf count must be > 0", o.name);
  // The buffers first, in the arena: one block, laid out so that a device sees each one whole.
  auto layout = layout_objects(&arena, o.count, o.data_room_bytes, fmt::format("mbuf pool '{}'", o.name));
  if (!layout) return std::unexpected(layout.error());
  auto block =
      arena.allocate(layout->bytes, layout->align,
                     fmt::format("mbuf pool '{}' ({} buffers of {} bytes)", o.name, o.count, o.data_room_bytes));
  if (!block) return std::unexpected(block.error());
  auto* buffers = static_cast<std::uint8_t*>(*block);
  // Then the Mbufs, in private memory, each pointing at its buffer; on huge pages as the arena is.
  auto pool = Mempool::create_private({o.name, o.count, std::uint32_t{sizeof(Mbuf)} + o.priv_bytes, o.cache_size},
                                      arena.huge(), [&](void* obj, std::uint32_t i) {
                                        auto* m = new (obj) Mbuf{};
                                        m->priv_size = o.priv_bytes;
                                        m->own_buf_len = o.data_room_bytes;
                                        m->own_buf_addr = buffers + layout->offset(i);
                                        m->headroom_default = mbuf_default_headroom;
                                        m->buf_addr = m->own_buf_addr;
                                        m->buf_iova = m->own_buf_iova = arena.iova(m->buf_addr);
                                        m->buf_len = o.data_room_bytes;
                                        m->refcnt.store(1, std::memory_order_relaxed);
                                        m->reset();
                                      });
  if (!pool) return std::unexpected(pool.error());
  for (std::uint32_t i = 0; i < (*pool)->count(); ++i) static_cast<Mbuf*>((*pool)->object(i))->pool = pool->get();
  return std::unique_ptr<PktmbufPool>(new PktmbufPool(
      std::move(*pool), o.data_room_bytes, std::span<const std::byte>(static_cast<std::byte*>(*block), layout->bytes)));
}

Mbuf* PktmbufPool::clone(Mbuf* m) noexcept {
  Mbuf* head = nullptr;
  Mbuf* prev = nullptr;
  for (Mbuf* seg = m; seg; seg = seg->next) {
    Mbuf* mi = nullptr;
    if (!raw_alloc_bulk(std::span<Mbuf*>(&mi, 1))) {
      if (head) mbuf_free(head);
      return nullptr;
    }
    Mbuf* md = seg->is_indirect() ? seg->direct : seg;
    md->refcnt.fetch_add(1, std::memory_order_relaxed);  // the holder's reference keeps it alive
    mi->buf_addr = seg->buf_addr;
    mi->buf_iova = seg->buf_iova;
    mi->buf_len = seg->buf_len;
    mi->data_off = seg->data_off;
    mi->data_len = seg->data_len;
    mi->direct = md;
    mi->next = nullptr;
    mi->nb_segs = 1;
    mi->port = seg->port;
    mi->ol_flags = (seg->ol_flags & ~mbuf_flag::indirect) | mbuf_flag::indirect;
    mi->packet_type = seg->packet_type;
    mi->vlan_tci = seg->vlan_tci;
    mi->vlan_tci_outer = seg->vlan_tci_outer;
    mi->rss_hash = seg->rss_hash;
    mi->tx_offload = seg->tx_offload;
    mi->pkt_len = seg->data_len;
    if (prev) {
      prev->next = mi;
    } else {
      head = mi;
    }
    prev = mi;
  }
  if (!head) return nullptr;
  head->nb_segs = m->nb_segs;
  head->pkt_len = m->pkt_len;
  return head;
}

}  // namespace ws
