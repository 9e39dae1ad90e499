// SPDX-License-Identifier: BSD-3-Clause
// Statistics output in dpdk-testpmd's layout, so scripts that parse it keep working.
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "app/testpmd/testpmd.hpp"

namespace ws::testpmd {

void Testpmd::print_nic_stats(bool throughput, std::optional<std::uint16_t> only) {
  static constexpr const char* border = "########################";
  if (throughput && isatty(STDOUT_FILENO)) std::printf("\033[2J\033[1;1H");  // clear, as dpdk-testpmd
  std::printf("\nPort statistics ====================================");
  const std::uint64_t now = rdtsc();
  if (last_show_.size() != ports_.size()) last_show_.assign(ports_.size(), PortSnapshot{});
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    if ((only && i != *only) || detached(static_cast<std::uint16_t>(i))) continue;
    const PortStats s = ports_[i]->stats();
    std::printf("\n  %s NIC statistics for port %-2zu %s\n", border, i, border);
    std::printf("  RX-packets: %-10" PRIu64 " RX-missed: %-10" PRIu64 " RX-bytes:  %-" PRIu64 "\n", s.ipackets,
                s.imissed, s.ibytes);
    std::printf("  RX-errors: %-" PRIu64 "\n", s.ierrors);
    std::printf("  RX-nombuf:  %-10" PRIu64 "\n", s.rx_nombuf);
    std::printf("  TX-packets: %-10" PRIu64 " TX-errors: %-10" PRIu64 " TX-bytes:  %-" PRIu64 "\n", s.opackets,
                s.oerrors, s.obytes);
    PortSnapshot& last = last_show_[i];
    const double dt = last.tsc ? static_cast<double>(now - last.tsc) / static_cast<double>(tsc_hz()) : 0.0;
    auto rate = [&](std::uint64_t cur, std::uint64_t prev) -> std::uint64_t {
      return dt > 0 && cur >= prev ? static_cast<std::uint64_t>(static_cast<double>(cur - prev) / dt) : 0;
    };
    std::printf("\n  Throughput (since last show)\n");
    std::printf("  Rx-pps: %12" PRIu64 "          Rx-bps: %12" PRIu64 "\n  Tx-pps: %12" PRIu64
                "          Tx-bps: %12" PRIu64 "\n",
                rate(s.ipackets, last.stats.ipackets), rate(s.ibytes, last.stats.ibytes) * 8,
                rate(s.opackets, last.stats.opackets), rate(s.obytes, last.stats.obytes) * 8);
    if (!app_.display_xstats.empty()) print_display_xstats(i, dt);
    std::printf("  %s############################%s\n", border, border);
    last = {s, now};
  }
  std::fflush(stdout);
}

// --display-xstats: the named xstats and their rates since the last show, in dpdk-testpmd's
// layout; names the port lacks were reported once at start-up and are skipped.
void Testpmd::print_display_xstats(std::size_t port, double seconds) {
  if (last_xstats_.size() != ports_.size()) last_xstats_.resize(ports_.size());
  auto& last = last_xstats_[port];
  const std::vector<XStat> all = port_xstats(static_cast<std::uint16_t>(port));
  std::printf("\n%-31s%-17s%s\n", " ", "Value", "Rate (since last show)");
  for (const std::string& name : app_.display_xstats) {
    const auto x = std::find_if(all.begin(), all.end(), [&](const XStat& s) { return s.name == name; });
    if (x == all.end()) continue;
    const auto prev = last.find(name);
    const std::uint64_t rate = seconds > 0 && prev != last.end() && x->value >= prev->second
                                   ? static_cast<std::uint64_t>(static_cast<double>(x->value - prev->second) / seconds)
                                   : 0;
    std::printf("  %-25s%12" PRIu64 " %15" PRIu64 "\n", name.c_str(), x->value, rate);
    last[name] = x->value;
  }
}

namespace {

constexpr const char* fwd_border = "----------------------";
constexpr const char* acc_border = "+++++++++++++++";

// As dpdk-testpmd: with more streams than ports (several queues), each stream that moved
// anything first.
void print_stream_stats(const std::vector<std::unique_ptr<Stream>>& streams) {
  for (const auto& st : streams) {
    const std::uint64_t srx = st->rx_packets.read(), stx = st->tx_packets.read(), sdrop = st->fwd_dropped.read();
    if (srx == 0 && stx == 0 && sdrop == 0) continue;
    std::printf("\n  %s Forward Stats for RX Port=%2u/Queue=%2u -> TX Port=%2u/Queue=%2u %s\n", fwd_border,
                st->rx_port_id, st->rx_queue, st->tx_port_id, st->tx_queue, fwd_border);
    std::printf("  RX-packets: %-14" PRIu64 " TX-packets: %-14" PRIu64 " TX-dropped: %-14" PRIu64 "\n", srx, stx,
                sdrop);
  }
}

// --record-burst-stats: the streams receiving from, then sending to, `port`.
void print_burst_spreads(const std::vector<std::unique_ptr<Stream>>& streams, std::size_t port) {
  for (const auto& st : streams)
    if (st->rx_port_id == port)
      if (auto line = burst_spread_line("RX", st->rx_bursts); !line.empty()) std::printf("%s\n", line.c_str());
  for (const auto& st : streams)
    if (st->tx_port_id == port)
      if (auto line = burst_spread_line("TX", st->tx_bursts); !line.empty()) std::printf("%s\n", line.c_str());
}

}  // namespace

ForwardSums Testpmd::print_port_forward_stats(std::size_t i) const {
  PortStats s = ports_[i]->stats();
  if (i < start_.size()) s -= start_[i].stats;
  std::uint64_t dropped = 0;
  for (const auto& st : streams_)
    if (st->tx_port_id == i) dropped += st->fwd_dropped.read();
  std::printf("\n  %s Forward statistics for port %-2zu %s\n", fwd_border, i, fwd_border);
  std::printf("  RX-packets: %-14" PRIu64 " RX-dropped: %-14" PRIu64 "RX-total: %-" PRIu64 "\n", s.ipackets, s.imissed,
              s.ipackets + s.imissed);
  if (s.ierrors + s.rx_nombuf > 0) {
    std::printf("  RX-error: %-" PRIu64 "\n", s.ierrors);
    std::printf("  RX-nombufs: %-14" PRIu64 "\n", s.rx_nombuf);
  }
  std::printf("  TX-packets: %-14" PRIu64 " TX-dropped: %-14" PRIu64 "TX-total: %-" PRIu64 "\n", s.opackets, dropped,
              s.opackets + dropped);
  if (fwd_config_.rx_ptype_counts) {  // rxonly --rx-ptype-counts
    std::printf("  Packet types:");
    const auto counts = ptype_counts(i);
    for (std::size_t k = 0; k < counts.size(); ++k)
      if (counts[k]) std::printf(" %s %" PRIu64, std::string(ptype_class_names[k]).c_str(), counts[k]);
    std::printf("\n");
  }
  if (fwd_config_.record_burst_stats) print_burst_spreads(streams_, i);
  std::printf("  %s--------------------------------%s\n", fwd_border, fwd_border);
  return ForwardSums{s.ipackets, s.imissed, s.opackets, dropped, s.rx_nombuf};
}

void Testpmd::print_forward_stats() const {
  if (streams_.size() > fwd_ports_.size()) print_stream_stats(streams_);
  ForwardSums all;
  for (const std::size_t i : fwd_ports_) all += print_port_forward_stats(i);
  std::printf("\n  %s Accumulated forward statistics for all ports%s\n", acc_border, acc_border);
  std::printf("  RX-packets: %-14" PRIu64 " RX-dropped: %-14" PRIu64 "RX-total: %-" PRIu64 "\n", all.rx, all.rx_dropped,
              all.rx + all.rx_dropped);
  std::printf("  TX-packets: %-14" PRIu64 " TX-dropped: %-14" PRIu64 "TX-total: %-" PRIu64 "\n", all.tx, all.tx_dropped,
              all.tx + all.tx_dropped);
  if (all.nombuf > 0) std::printf("  RX-nombufs: %-14" PRIu64 "\n", all.nombuf);
  std::printf("  %s++++++++++++++++++++++++++++++++++++++++++++++%s\n", acc_border, acc_border);
  const std::uint64_t pkts = forwarded_packets();
  if (app_.record_core_cycles && pkts) {
    const FwdTotals t = totals();
    std::printf("\n  CPU cycles/packet=%.2f (busy cycles=%" PRIu64 " / total %s packets=%" PRIu64 ") at %" PRIu64
                " MHz Clock\n",
                static_cast<double>(t.busy_cycles) / static_cast<double>(pkts), t.busy_cycles,
                app_.forward_mode == "txonly" || app_.forward_mode == "flowgen" ? "TX" : "RX", pkts,
                tsc_hz() / 1'000'000);
  }
}

void Testpmd::print_fwd_config() const {
  std::printf("%s packet forwarding - ports=%zu - cores=%u - streams=%zu - burst=%u\n",
              std::string(engine_->name).c_str(), fwd_ports_.size(), fwd_core_count_, streams_.size(), app_.burst);
  for (std::size_t i = 0; i < streams_.size(); ++i) {
    const Stream& s = *streams_[i];
    std::printf("  stream %zu: RX P=%u/Q=%u -> TX P=%u/Q=%u peer=%s\n", i, s.rx_port_id, s.rx_queue, s.tx_port_id,
                s.tx_queue, fwd_config_.peer_mac[s.tx_port_id].to_string().c_str());
  }
}

}  // namespace ws::testpmd
