// SPDX-License-Identifier: BSD-3-Clause
// JSON summary for scripted runs (tests and benchmarks read it).
#include "app/testpmd/summary.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ws::testpmd {

bool accounting_exact(const FwdTotals& t) { return t.rx + t.generated == t.tx + t.dropped + t.consumed; }

Result<void> write_summary(const Testpmd& tp, const std::string& path, bool pool_ok) {
  using nlohmann::json;
  const FwdTotals t = tp.totals();
  const double seconds = tp.forwarding_seconds();
  json ports = json::array();
  for (std::size_t i = 0; i < tp.ports().size(); ++i) {
    const Port& p = *tp.ports()[i];
    PortStats s = p.stats();
    if (i < tp.start_snapshots().size()) s -= tp.start_snapshots()[i].stats;
    ports.push_back({{"id", p.id()},
                     {"name", p.name()},
                     {"driver", p.driver_name()},
                     {"rx_packets", s.ipackets},
                     {"tx_packets", s.opackets},
                     {"rx_bytes", s.ibytes},
                     {"tx_bytes", s.obytes},
                     {"rx_missed", s.imissed},
                     {"rx_errors", s.ierrors},
                     {"tx_errors", s.oerrors},
                     {"rx_nombuf", s.rx_nombuf}});
    if (tp.fwd_config().rx_ptype_counts) {  // rxonly --rx-ptype-counts
      json types = json::object();
      const auto counts = tp.ptype_counts(i);
      for (std::size_t k = 0; k < counts.size(); ++k) types[std::string(ptype_class_names[k])] = counts[k];
      ports.back()["ptypes"] = types;
    }
  }
  const std::uint64_t pkts = tp.forwarded_packets();
  const double mpps = seconds > 0 ? static_cast<double>(pkts) / seconds / 1e6 : 0.0;
  const double cycles_per_packet =
      pkts ? static_cast<double>(tsc_hz()) * tp.forwarding_cores() * seconds / static_cast<double>(pkts) : 0.0;
  json j = {{"forward_mode", tp.app().forward_mode},
            {"burst", tp.app().burst},
            {"forwarding_cores", tp.forwarding_cores()},
            {"seconds", seconds},
            {"tsc_hz", tsc_hz()},
            {"ports", ports},
            {"totals",
             {{"rx_packets", t.rx},
              {"tx_packets", t.tx},
              {"fwd_dropped", t.dropped},
              {"generated", t.generated},
              {"consumed", t.consumed},
              {"bad_ip_csum", t.bad_ip_csum},
              {"bad_l4_csum", t.bad_l4_csum}}},
            {"accounting_exact", accounting_exact(t)},
            {"mpps", mpps},
            {"rx_mpps", seconds > 0 ? static_cast<double>(t.rx) / seconds / 1e6 : 0.0},
            {"tx_mpps", seconds > 0 ? static_cast<double>(t.tx) / seconds / 1e6 : 0.0},
            {"cycles_per_packet", cycles_per_packet},
            {"mbufs_total", tp.pool().mempool().count()},
            {"mbufs_in_use_at_exit", tp.mbufs_in_use_at_exit()},
            {"pool_audit_ok", pool_ok}};
  if (tp.app().record_core_cycles && pkts)
    j["busy_cycles_per_packet"] = static_cast<double>(t.busy_cycles) / static_cast<double>(pkts);
  std::ofstream out(path);
  if (!out) return fail("--summary-json {}: cannot open for writing: {}", path, std::strerror(errno));
  out << j.dump(2) << "\n";
  if (!out) return fail("--summary-json {}: write failed", path);
  return {};
}

}  // namespace ws::testpmd
