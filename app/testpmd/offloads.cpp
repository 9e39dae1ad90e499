// SPDX-License-Identifier: BSD-3-Clause
// The csum engine's per-port settings (`csum set`, `tso set`) and the TX offloads they enable
// on the port: a layer set to hw, or a TSO segment size, enables the matching offload, which
// the port does itself or in software (ws::Port). Also the ports' RSS types (`port config all
// rss`). The ports must be stopped; the change applies at their next start.
#include "app/testpmd/testpmd.hpp"

namespace ws::testpmd {

PortConfig Testpmd::port_config(const Port& p) const {
  PortConfig c;
  c.rx_queues = app_.rxq;
  c.tx_queues = app_.txq;
  c.tx_offloads = p.config().tx_offloads;
  c.rx_offloads = p.config().rx_offloads;
  c.mtu = p.config().mtu;
  c.tx_segment_pool = pool_;
  // As dpdk-testpmd: RSS with more than one RX queue, Microsoft's key, a round-robin table;
  // done in software by ports whose device has no hash.
  if (app_.rxq > 1) c.rss.types = app_.rss_types;
  return c;
}

Result<void> Testpmd::set_rss_types(std::uint32_t types) {
  for (auto& p : ports_)
    if (p->started()) return fail("Please stop all ports first (port {} is started)", p->id());
  app_.rss_types = types;
  for (auto& p : ports_)
    if (auto ok = p->set_rss(port_config(*p).rss); !ok) return ok;
  return {};
}

Result<void> Testpmd::apply_csum_config(std::uint16_t port) {
  const CsumConfig& c = fwd_config_.csum[port];
  std::uint64_t offloads = 0;
  if (c.ip_hw) offloads |= tx_offload::ipv4_cksum;
  if (c.udp_hw) offloads |= tx_offload::udp_cksum;
  if (c.tcp_hw) offloads |= tx_offload::tcp_cksum;
  if (c.tso_segsz) offloads |= tx_offload::tcp_tso | tx_offload::ipv4_cksum | tx_offload::tcp_cksum;
  return ports_[port]->set_tx_offloads(offloads, pool_);
}

Result<void> Testpmd::set_csum_offload(std::uint16_t port, std::string_view layer, bool hw) {
  if (port >= ports_.size()) return fail("port {} does not exist", port);
  if (forwarding() || ports_[port]->started()) return fail("Please stop port {} first", port);
  CsumConfig& c = fwd_config_.csum[port];
  const CsumConfig before = c;
  if (layer == "ip")
    c.ip_hw = hw;
  else if (layer == "udp")
    c.udp_hw = hw;
  else if (layer == "tcp")
    c.tcp_hw = hw;
  else
    return fail("csum set {}: the csum engine computes ip, udp and tcp checksums (no SCTP CRC32c, no tunnels)", layer);
  if (auto ok = apply_csum_config(port); !ok) {
    c = before;
    return ok;
  }
  return {};
}

Result<void> Testpmd::set_tso(std::uint16_t port, std::uint16_t segsz) {
  if (port >= ports_.size()) return fail("port {} does not exist", port);
  if (forwarding() || ports_[port]->started()) return fail("Please stop port {} first", port);
  const std::uint16_t before = fwd_config_.csum[port].tso_segsz;
  fwd_config_.csum[port].tso_segsz = segsz;
  if (auto ok = apply_csum_config(port); !ok) {
    fwd_config_.csum[port].tso_segsz = before;
    return ok;
  }
  return {};
}

}  // namespace ws::testpmd
