// SPDX-License-Identifier: BSD-3-Clause
// net_pcap hot path: RX copies records from a libpcap handle (file or live interface) or from
// an in-memory replay set into mbufs; TX copies packets into a dump file or injects them.
#pragma once
#include <pcap/pcap.h>

#include <cstring>
#include <ctime>
#include <vector>

#include "ws/core/mbuf.hpp"
#include "ws/port/port.hpp"

namespace ws::pcap_pmd {

// A replay set for infinite_rx: every record of the file, in one buffer.
struct Replay {
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint32_t> offsets;  // record i is bytes[offsets[i] .. offsets[i+1])
};

struct alignas(cache_line_bytes) RxQueue : QueueBase {
  pcap_t* handle = nullptr;        // a file or a live interface; nullptr: no RX source
  const Replay* replay = nullptr;  // infinite_rx: records in memory, replayed in a loop
  std::size_t replay_next = 0;
  PktmbufPool* pool = nullptr;
  std::uint16_t port = 0;
  bool file_done = false;  // the file is exhausted (or broken): receive nothing more
  RxQueueCounters counters;

  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    if (replay) return rx_replay(pkts, n);
    if (!handle || file_done) return 0;
    std::uint16_t got = 0;
    std::uint64_t bytes = 0;
    while (got < n) {
      pcap_pkthdr* hdr = nullptr;
      const u_char* data = nullptr;
      const int rc = pcap_next_ex(handle, &hdr, &data);
      if (rc == 0) break;  // live capture: nothing pending
      if (rc < 0) {        // end of file (PCAP_ERROR_BREAK) or a record libpcap cannot read
        if (rc != PCAP_ERROR_BREAK) counters.errors.add(1);
        file_done = true;
        break;
      }
      Mbuf* m = pool->copy_in(data, hdr->caplen, port);
      if (!m) [[unlikely]] {
        counters.nombuf.add(1);
        break;
      }
      m->timestamp = std::uint64_t(hdr->ts.tv_sec) * 1000000000ull + std::uint64_t(hdr->ts.tv_usec);
      pkts[got++] = m;
      bytes += hdr->caplen;
    }
    counters.packets.add(got);
    counters.bytes.add(bytes);
    return got;
  }

  std::uint16_t rx_replay(Mbuf** pkts, std::uint16_t n) noexcept {
    const std::size_t records = replay->offsets.size() - 1;
    std::uint16_t got = 0;
    std::uint64_t bytes = 0;
    for (; got < n; ++got) {
      const std::uint32_t off = replay->offsets[replay_next];
      const std::uint32_t len = replay->offsets[replay_next + 1] - off;
      Mbuf* m = pool->copy_in(replay->bytes.data() + off, len, port);
      if (!m) [[unlikely]] {
        counters.nombuf.add(1);
        break;
      }
      pkts[got] = m;
      bytes += len;
      if (++replay_next == records) replay_next = 0;
    }
    counters.packets.add(got);
    counters.bytes.add(bytes);
    return got;
  }
};

struct alignas(cache_line_bytes) TxQueue : QueueBase {
  pcap_dumper_t* dumper = nullptr;  // tx_pcap
  pcap_t* handle = nullptr;         // tx_iface / iface: inject
  std::uint8_t* linear = nullptr;   // scratch for multi-segment packets (max_frame bytes)
  std::uint32_t max_frame = 0;
  TxQueueCounters counters;

  // Every packet is taken (and freed): written, injected, or counted as an error (too long, or
  // refused by the interface) or, with no TX sink, dropped as DPDK's pcap PMD does.
  std::uint16_t tx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    std::uint64_t bytes = 0;
    std::uint16_t sent = 0;
    pcap_pkthdr hdr{};
    if (dumper) {
      timespec now{};
      clock_gettime(CLOCK_REALTIME, &now);  // one timestamp per burst (vDSO, no syscall)
      hdr.ts.tv_sec = now.tv_sec;
      hdr.ts.tv_usec = now.tv_nsec;  // the dumper was opened with nanosecond precision
    }
    for (std::uint16_t i = 0; i < n; ++i) {
      Mbuf* m = pkts[i];
      const std::uint8_t* data = m->data();
      if (m->nb_segs > 1) {
        if (m->pkt_len > max_frame) [[unlikely]] {
          counters.errors.add(1);
          continue;
        }
        std::uint32_t off = 0;
        for (Mbuf* s = m; s; s = s->next) {
          std::memcpy(linear + off, s->data(), s->data_len);
          off += s->data_len;
        }
        data = linear;
      }
      if (dumper) {
        hdr.caplen = hdr.len = m->pkt_len;
        pcap_dump(reinterpret_cast<u_char*>(dumper), &hdr, data);
      } else if (handle) {
        if (pcap_sendpacket(handle, data, static_cast<int>(m->pkt_len)) != 0) [[unlikely]] {
          counters.errors.add(1);
          continue;
        }
      } else {
        counters.full.add(1);  // no TX sink: dropped
        continue;
      }
      ++sent;
      bytes += m->pkt_len;
    }
    mbuf_free_bulk(std::span<Mbuf* const>(pkts, n));
    counters.packets.add(sent);
    counters.bytes.add(bytes);
    return n;
  }
};

}  // namespace ws::pcap_pmd
