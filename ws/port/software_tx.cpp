// SPDX-License-Identifier: BSD-3-Clause
// Software TX offloads in front of a driver's burst function (SoftwareTxQueue): checksums and
// VLAN insertion in place, TSO/UDP segmentation into clones sharing the payload.
//
// Accounting: the return value counts the caller's packets taken, a segmented packet counting
// once however many segments it became (the driver counts the segments it sends). A packet the
// port had to give up on (bad headers, segments the queue refused) is taken, freed and counted
// in SoftwareTxQueue::dropped; a packet that could not be segmented for want of mbufs is not
// taken and stays with the caller, as when a queue is full.
#include "ws/port/software_tx.hpp"

#include "ws/net/gso.hpp"
#include "ws/net/tx_offload.hpp"
#include "ws/port/port.hpp"

namespace ws {
namespace {

// The most segments one packet may become: a 64 KiB packet cut at an MSS of 256 bytes.
constexpr std::size_t max_segments = 256;

}  // namespace

template <bool Checksum, bool Segment>
std::uint16_t software_offload_tx(QueueBase* base, Mbuf** pkts, std::uint16_t n) noexcept {
  auto& q = *static_cast<SoftwareTxQueue*>(base);
  std::uint16_t run = 0;  // pkts[run, i) are ready and go to the driver as they are
  // Send the pending run; the count of the caller's packets handled so far.
  auto flush = [&](std::uint16_t end) noexcept -> std::uint16_t {
    if (run == end) return end;
    return static_cast<std::uint16_t>(run + q.driver(pkts + run, static_cast<std::uint16_t>(end - run)));
  };
  for (std::uint16_t i = 0; i < n; ++i) {
    Mbuf* m = pkts[i];
    if constexpr (Segment) {
      if (m->ol_flags & (mbuf_flag::tx_tcp_seg | gso_flag::tx_udp_seg)) {
        if (const std::uint16_t done = flush(i); done != i) return done;
        run = static_cast<std::uint16_t>(i + 1);
        Mbuf* segs[max_segments];
        const GsoPools pools{q.segment_pool, q.segment_pool, q.sw_checksums};
        const auto count = gso_segment(m, pools, segs);
        if (!count) {
          if (count.error() == GsoError::no_mbufs) return i;  // not taken: the caller keeps it
          q.dropped.add(1);
          mbuf_free(m);
          continue;
        }
        const std::uint16_t sent = q.driver(segs, *count);
        if (sent < *count) {  // the queue filled up mid-packet: what is left cannot go back
          q.dropped.add(*count - sent);
          mbuf_free_bulk(std::span<Mbuf* const>(segs + sent, *count - sent));
          return run;
        }
        continue;
      }
    }
    if constexpr (Checksum) {
      if (!apply_tx_offloads_sw(*m)) [[unlikely]] {
        if (const std::uint16_t done = flush(i); done != i) return done;
        run = static_cast<std::uint16_t>(i + 1);
        q.dropped.add(1);
        mbuf_free(m);
      }
    }
  }
  return flush(n);
}

template std::uint16_t software_offload_tx<true, true>(QueueBase*, Mbuf**, std::uint16_t) noexcept;
template std::uint16_t software_offload_tx<true, false>(QueueBase*, Mbuf**, std::uint16_t) noexcept;
template std::uint16_t software_offload_tx<false, true>(QueueBase*, Mbuf**, std::uint16_t) noexcept;

}  // namespace ws
