// SPDX-License-Identifier: BSD-3-Clause
// The verbose proxy: one queue object per real RX and TX queue, printing each burst.
#include "app/testpmd/prompt/verbose_port.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ws/net/ether.hpp"

namespace ws::testpmd {
namespace {

std::string ipv4_text(std::uint32_t be) {
  const std::uint32_t a = from_be32(be);
  return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
}

// One packet's line: Ethernet, then IPv4 and UDP when present and within the first segment.
void describe(const Mbuf& m, std::string& out) {
  const auto* bytes = m.data<std::uint8_t>();
  if (m.data_len < sizeof(EtherHdr)) {
    out += fmt::format("  length={} - nb_segs={} (runt)\n", m.pkt_len, m.nb_segs);
    return;
  }
  EtherHdr eth;
  std::memcpy(&eth, bytes, sizeof eth);
  const std::uint16_t type = from_be16(eth.ether_type_be);
  out += fmt::format("  src={} - dst={} - type=0x{:04x} - length={} - nb_segs={}", eth.src.to_string(),
                     eth.dst.to_string(), type, m.pkt_len, m.nb_segs);
  // A flow rule's MARK, in dpdk-testpmd's words.
  if (m.ol_flags & mbuf_flag::rx_fdir_id) out += fmt::format(" - FDIR matched ID=0x{:x}", m.mark);
  std::size_t off = sizeof(EtherHdr);
  if (type == ether_type_ipv4 && m.data_len >= off + sizeof(Ipv4Hdr)) {
    Ipv4Hdr ip;
    std::memcpy(&ip, bytes + off, sizeof ip);
    out += fmt::format(" - IPv4 {} -> {} proto={}", ipv4_text(ip.src_addr_be), ipv4_text(ip.dst_addr_be),
                       ip.next_proto_id);
    off += static_cast<std::size_t>(ip.version_ihl & 0x0f) * 4;
    if (ip.next_proto_id == ip_proto_udp && m.data_len >= off + sizeof(UdpHdr)) {
      UdpHdr udp;
      std::memcpy(&udp, bytes + off, sizeof udp);
      out += fmt::format(" - UDP {} -> {}", from_be16(udp.src_port_be), from_be16(udp.dst_port_be));
    }
  }
  out += '\n';
}

// One burst's dump, as dpdk-testpmd's dump_pkt_burst: a header line, then a line per packet.
// Written with one fwrite, so that the lines of two lcores never mix. The allocation and the
// printing are the price of verbose mode; out of memory, the packets still go on unprinted.
void print_burst(const Mbuf* const* pkts, std::uint16_t n, std::uint16_t port, std::uint16_t queue,
                 const char* what) noexcept {
  try {
    std::string text = fmt::format("port {}/queue {}: {} {} packets\n", port, queue, what, n);
    for (std::uint16_t i = 0; i < n; ++i) describe(*pkts[i], text);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } catch (...) {
  }
}

struct VerboseRxQueue : QueueBase {
  Port* real = nullptr;
  std::uint16_t queue = 0;

  // Runs on the polling lcore: what the real queue gave, printed after the burst.
  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    const std::uint16_t got = real->rx_burst(queue, pkts, n);
    if (got != 0) print_burst(pkts, got, real->id(), queue, "received");
    return got;
  }
};

struct VerboseTxQueue : QueueBase {
  Port* real = nullptr;
  std::uint16_t queue = 0;

  // As DPDK's TX callback: every packet offered, printed before the real queue takes (and may
  // free) them.
  std::uint16_t tx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    if (n != 0) print_burst(pkts, n, real->id(), queue, "sent");
    return real->tx_burst(queue, pkts, n);
  }
};

// A proxy for both directions; the streams use it for the directions `level` prints (DPDK's
// rule: 1 RX, 2 TX, 3 and more both) and the real port otherwise.
class VerbosePort final : public Port {
 public:
  explicit VerbosePort(Port& real)
      : Port(real.name() + "(verbose)", real.driver_name()),
        real_(real),
        rx_(real.config().rx_queues),
        tx_(real.config().tx_queues) {
    set_id(real.id());
    for (std::uint16_t q = 0; q < rx_.size(); ++q) rx_[q] = {{}, &real_, q};
    for (std::uint16_t q = 0; q < tx_.size(); ++q) tx_[q] = {{}, &real_, q};
  }
  Result<void> setup_rx_queue(std::uint16_t, const RxQueueConfig&) override { return {}; }
  Result<void> setup_tx_queue(std::uint16_t, const TxQueueConfig&) override { return {}; }
  PortInfo info() const override {
    PortInfo i = real_.info();
    i.max_rx_queues = i.max_tx_queues = port_max_queues;
    return i;
  }

 protected:
  Result<void> do_start() override {
    for (std::uint16_t q = 0; q < rx_.size(); ++q) publish_rx(q, &rx_[q]);
    for (std::uint16_t q = 0; q < tx_.size(); ++q) publish_tx(q, &tx_[q]);
    return {};
  }
  PortStats read_stats() const override { return {}; }

 private:
  Port& real_;
  std::vector<VerboseRxQueue> rx_;
  std::vector<VerboseTxQueue> tx_;
};

}  // namespace

bool verbose_prints_rx(unsigned level) { return level == 1 || level > 2; }
bool verbose_prints_tx(unsigned level) { return level >= 2; }

std::unique_ptr<Port> make_verbose_port(Port& real) {
  auto p = std::make_unique<VerbosePort>(real);
  (void)p->configure({real.config().rx_queues, real.config().tx_queues});
  (void)p->start();
  return p;
}

}  // namespace ws::testpmd
