// SPDX-License-Identifier: BSD-3-Clause
// net_af_packet hot path. RX walks a TPACKET_V3 ring of blocks the kernel fills with many
// packets each; TX fills TPACKET_V2 frames and kicks the kernel once per burst.
//   (Documentation/networking/packet_mmap.rst: "TPACKET versions", "AF_PACKET TPACKET_V3 example")
//
//   RX ring:  [block 0: bd | pkt pkt pkt ...][block 1 ...] ...   block_status: KERNEL -> USER -> KERNEL
//   TX ring:  [frame 0: hdr | vnet | data][frame 1] ...           tp_status: AVAILABLE -> SEND_REQUEST
//
// The TX socket has PACKET_VNET_HDR: each frame starts with a virtio_net_hdr whose hdr_len tells
// the kernel how many bytes to copy into the skb's linear part (tpacket_snd). Without it the
// kernel copies only the Ethernet header and attaches the rest as fragments of the ring's pages,
// which every forwarding step that may not keep user pages (veth into another namespace, any
// local delivery) copies again into freshly allocated pages (skb_copy_ubufs): for small packets
// one linear copy is much cheaper.
#pragma once
#include <linux/if_packet.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>

#include "ws/core/mbuf.hpp"
#include "ws/port/port.hpp"
#include "ws/virtio/net/net_hdr.hpp"

namespace ws::af_packet_pmd {

struct alignas(cache_line_bytes) RxQueue : QueueBase {
  std::uint8_t* ring = nullptr;  // mmap of the PACKET_RX_RING
  std::uint32_t block_bytes = 0;
  std::uint32_t block_count = 0;
  std::uint32_t block = 0;  // the block we read (or wait for) next
  std::uint32_t left = 0;   // packets not yet taken from the current block
  const std::uint8_t* next_pkt = nullptr;
  PktmbufPool* pool = nullptr;
  std::uint16_t port = 0;
  RxQueueCounters counters;

  tpacket_block_desc* desc(std::uint32_t i) const noexcept {
    return reinterpret_cast<tpacket_block_desc*>(ring + std::size_t{i} * block_bytes);
  }

  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    std::uint16_t got = 0;
    std::uint64_t bytes = 0;
    while (got < n) {
      tpacket_block_desc* bd = desc(block);
      if (left == 0) {
        // acquire: pairs with the kernel's smp_wmb() before it sets TP_STATUS_USER
        // (prb_close_block), so the block's packets are visible once we see the status.
        const auto status = std::atomic_ref<std::uint32_t>(bd->hdr.bh1.block_status).load(std::memory_order_acquire);
        if ((status & TP_STATUS_USER) == 0) break;
        left = bd->hdr.bh1.num_pkts;
        next_pkt = reinterpret_cast<const std::uint8_t*>(bd) + bd->hdr.bh1.offset_to_first_pkt;
        if (left == 0) {
          release_block(bd);
          continue;
        }
      }
      const auto* h = reinterpret_cast<const tpacket3_hdr*>(next_pkt);
      Mbuf* m = pool->copy_in(next_pkt + h->tp_mac, h->tp_snaplen, port);
      if (!m) [[unlikely]] {
        counters.nombuf.add(1);
        break;  // the packet stays in the ring for the next call
      }
      pkts[got++] = m;
      bytes += h->tp_snaplen;
      next_pkt += h->tp_next_offset;
      if (--left == 0) release_block(bd);
    }
    counters.packets.add(got);
    counters.bytes.add(bytes);
    return got;
  }

  void release_block(tpacket_block_desc* bd) noexcept {
    // release: our reads of the block happen before the kernel may refill it.
    std::atomic_ref<std::uint32_t>(bd->hdr.bh1.block_status).store(TP_STATUS_KERNEL, std::memory_order_release);
    if (++block == block_count) block = 0;
  }
};

// TPACKET_V2 frames carry data at TPACKET_ALIGN(sizeof(tpacket2_hdr)) (packet_mmap.rst, TX ring).
inline constexpr std::uint32_t tx_data_offset = TPACKET_ALIGN(sizeof(tpacket2_hdr));
// Packets up to this size are copied whole into the skb's linear part (see the top of the file);
// larger ones keep the kernel's default (headers linear, the rest as ring-page fragments).
inline constexpr std::uint16_t tx_linear_max = 512;
// PACKET_VNET_HDR's header is the legacy virtio_net_hdr: ours without num_buffers, in host order.
inline constexpr std::uint32_t tx_vnet_bytes = offsetof(virtio::NetHdr, num_buffers);
static_assert(tx_vnet_bytes == 10);

struct alignas(cache_line_bytes) TxQueue : QueueBase {
  int fd = -1;
  std::uint8_t* ring = nullptr;
  std::uint32_t block_bytes = 0;
  std::uint32_t frame_bytes = 0;
  std::uint32_t frames_per_block = 0;
  std::uint32_t frame_count = 0;
  std::uint32_t frame = 0;       // next frame to fill
  std::uint32_t vnet_bytes = 0;  // tx_vnet_bytes when the socket has PACKET_VNET_HDR, else 0
  TxQueueCounters counters;

  tpacket2_hdr* hdr(std::uint32_t i) const noexcept {
    return reinterpret_cast<tpacket2_hdr*>(ring + std::size_t{i / frames_per_block} * block_bytes +
                                           std::size_t{i % frames_per_block} * frame_bytes);
  }

  // Takes what fits in free frames; oversized packets are taken, freed and counted as errors.
  std::uint16_t tx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    std::uint16_t taken = 0;
    std::uint16_t queued = 0;
    std::uint64_t bytes = 0;
    const std::uint32_t room = frame_bytes - tx_data_offset - vnet_bytes;
    for (; taken < n; ++taken) {
      Mbuf* m = pkts[taken];
      tpacket2_hdr* h = hdr(frame);
      // acquire: pairs with the kernel's store of TP_STATUS_AVAILABLE after it sent the frame.
      const auto status = std::atomic_ref<std::uint32_t>(h->tp_status).load(std::memory_order_acquire);
      if (status != TP_STATUS_AVAILABLE) break;  // ring full (kernel still sending)
      if (m->pkt_len > room) [[unlikely]] {
        counters.errors.add(1);
        continue;
      }
      std::uint8_t* dst = reinterpret_cast<std::uint8_t*>(h) + tx_data_offset;
      if (vnet_bytes) {
        virtio::NetHdr vh{};  // no checksum or GSO request: flags 0, gso_none
        vh.hdr_len = static_cast<std::uint16_t>(m->pkt_len <= tx_linear_max ? m->pkt_len : 0);
        std::memcpy(dst, &vh, tx_vnet_bytes);
        dst += vnet_bytes;
      }
      for (const Mbuf* s = m; s; s = s->next) {
        std::memcpy(dst, s->data(), s->data_len);
        dst += s->data_len;
      }
      h->tp_len = m->pkt_len + vnet_bytes;
      // release: the frame's bytes are written before the kernel sees SEND_REQUEST.
      std::atomic_ref<std::uint32_t>(h->tp_status).store(TP_STATUS_SEND_REQUEST, std::memory_order_release);
      if (++frame == frame_count) frame = 0;
      ++queued;
      bytes += m->pkt_len;
    }
    if (taken < n) [[unlikely]]
      counters.full.add(n - taken);
    if (queued) {
      // One kick per burst: the kernel sends every SEND_REQUEST frame before it returns.
      if (::sendto(fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0) < 0) [[unlikely]]
        counters.errors.add(1);  // frames stay queued and go out with the next kick
    }
    mbuf_free_bulk(std::span<Mbuf* const>(pkts, taken));
    counters.packets.add(queued);
    counters.bytes.add(bytes);
    return taken;
  }
};

}  // namespace ws::af_packet_pmd
