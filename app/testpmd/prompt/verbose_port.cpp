// The verbose RX proxy: one queue object per real RX queue, printing after each burst.
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

struct VerboseRxQueue : QueueBase {
  Port* real = nullptr;
  std::uint16_t queue = 0;

  // Runs on the polling lcore; the allocation and printing are the price of verbose mode.
  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    const std::uint16_t got = real->rx_burst(queue, pkts, n);
    if (got == 0) return 0;
    try {
      std::string text = fmt::format("port {}/queue {}: received {} packets\n", real->id(), queue, got);
      for (std::uint16_t i = 0; i < got; ++i) describe(*pkts[i], text);
      std::fwrite(text.data(), 1, text.size(), stdout);  // one write: lines of two lcores never mix
      std::fflush(stdout);
    } catch (...) {  // out of memory while printing: the packets still go on
    }
    return got;
  }
};

class VerboseRxPort final : public Port {
 public:
  explicit VerboseRxPort(Port& real) : Port(real.name() + "(verbose)", real.driver_name()), real_(real) {
    set_id(real.id());
  }
  Result<void> setup_rx_queue(std::uint16_t queue, const RxQueueConfig&) override {
    queues_[queue].real = &real_;
    queues_[queue].queue = queue;
    return {};
  }
  Result<void> setup_tx_queue(std::uint16_t, const TxQueueConfig&) override { return {}; }
  PortInfo info() const override {
    PortInfo i = real_.info();
    i.max_rx_queues = i.max_tx_queues = port_max_queues;
    return i;
  }
  void size(std::uint16_t rx_queues) { queues_.resize(rx_queues); }

 protected:
  Result<void> do_start() override {
    for (std::uint16_t q = 0; q < queues_.size(); ++q) publish_rx(q, &queues_[q]);
    return {};
  }
  PortStats read_stats() const override { return {}; }

 private:
  Port& real_;
  std::vector<VerboseRxQueue> queues_;
};

}  // namespace

std::unique_ptr<Port> make_verbose_rx_port(Port& real, unsigned) {
  auto p = std::make_unique<VerboseRxPort>(real);
  const std::uint16_t queues = real.config().rx_queues;
  p->size(queues);
  (void)p->configure({queues, 1});
  for (std::uint16_t q = 0; q < queues; ++q) (void)p->setup_rx_queue(q, {});
  (void)p->start();
  return p;
}

}  // namespace ws::testpmd
