// SPDX-License-Identifier: BSD-3-Clause
// net_pcap port: device keys, opening files and interfaces per queue, validation of input files
// at queue setup (so a bad file is an error that names it, never a crash mid-run), stats.
#include "ws/drivers/pcap/pcap_port.hpp"

#include <linux/if_packet.h>
#include <sys/socket.h>

#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "ws/core/log.hpp"
#include "ws/drivers/pcap/pcap_rxtx.hpp"

namespace ws {
namespace {

// DPDK's pcap PMD keys.
constexpr std::array pcap_params = {
    ParamSpec{"rx_pcap", "path", "", "receive from a pcap or pcapng file; repeat for more RX queues"},
    ParamSpec{"tx_pcap", "path", "", "write transmitted packets to a pcap file (ns timestamps); repeat per TX queue"},
    ParamSpec{"rx_iface", "string", "", "capture on an interface (both directions); repeat per RX queue"},
    ParamSpec{"rx_iface_in", "string", "", "capture only packets arriving on an interface"},
    ParamSpec{"tx_iface", "string", "", "inject transmitted packets on an interface; repeat per TX queue"},
    ParamSpec{"iface", "string", "", "one interface for RX (incoming packets) and TX"},
    ParamSpec{"infinite_rx", "bool", "0", "replay the rx_pcap files endlessly (held in memory)"},
    ParamSpec{"phy_mac", "bool", "0", "with iface: the port takes the interface's MAC address"},
};

constexpr int live_snaplen = 65535;
constexpr std::uint32_t max_frame_bytes = 65535;  // largest packet written or injected

struct RxSource {
  std::string key;    // rx_pcap, rx_iface, rx_iface_in, iface
  std::string value;  // file or interface
  bool file() const { return key == "rx_pcap"; }
};
struct TxSink {
  std::string key;  // tx_pcap, tx_iface, iface
  std::string value;
  bool file() const { return key == "tx_pcap"; }
};

class PcapPort final : public Port {
 public:
  PcapPort(std::string name, std::vector<RxSource> rx, std::vector<TxSink> tx, bool infinite,
           std::optional<MacAddress> phy_mac)
      : Port(std::move(name), "net_pcap"), rx_(std::move(rx)), tx_(std::move(tx)), infinite_(infinite) {
    // DPDK's pcap PMD default address, with the last byte from the name's hash for uniqueness.
    std::uint8_t h = 0;
    for (char c : this->name()) h = static_cast<std::uint8_t>(h * 31 + static_cast<std::uint8_t>(c));
    mac_ = phy_mac.value_or(MacAddress{{0x02, 0x70, 0x63, 0x61, 0x70, h}});
  }
  ~PcapPort() override { close_all(); }

  PortInfo info() const override {
    const auto rxn = static_cast<std::uint16_t>(rx_.empty() ? port_max_queues : rx_.size());
    const auto txn = static_cast<std::uint16_t>(tx_.empty() ? port_max_queues : tx_.size());
    return {"net_pcap", rxn, txn, 0, 65535};
  }

  Result<void> do_configure(const PortConfig& c) override {
    close_all();
    rxq_.clear();
    txq_.clear();
    replays_.clear();
    for (std::uint16_t q = 0; q < c.rx_queues; ++q) rxq_.push_back(std::make_unique<pcap_pmd::RxQueue>());
    for (std::uint16_t q = 0; q < c.tx_queues; ++q) txq_.push_back(std::make_unique<pcap_pmd::TxQueue>());
    replays_.resize(c.rx_queues);
    rx_ready_.assign(c.rx_queues, false);
    return {};
  }

  Result<void> setup_rx_queue(std::uint16_t queue, const RxQueueConfig& c) override;
  Result<void> setup_tx_queue(std::uint16_t queue, const TxQueueConfig& c) override;

  Result<void> do_start() override {
    for (std::uint16_t q = 0; q < rxq_.size(); ++q) {
      if (!rx_ready_[q]) return fail("RX queue {} was not set up", q);
      publish_rx(q, rxq_[q].get());
    }
    for (std::uint16_t q = 0; q < txq_.size(); ++q) publish_tx(q, txq_[q].get());
    return {};
  }

  void do_stop() override {
    // A stopped port's file must be complete on disk (testpmd may exit right after).
    for (auto& q : txq_)
      if (q->dumper) pcap_dump_flush(q->dumper);
  }

  PortStats read_stats() const override { return sum_queues(rxq_, txq_); }

  std::vector<XStat> xstats() const override {
    auto out = Port::xstats();
    for (std::size_t q = 0; q < txq_.size(); ++q)
      out.push_back({fmt::format("tx_q{}_dropped_no_sink", q), txq_[q]->counters.full.read()});
    return out;
  }

 private:
  Result<pcap_t*> open_live(const std::string& key, const std::string& iface, bool inbound_only);
  Result<void> check_file(const RxSource& src, PktmbufPool& pool, pcap_pmd::Replay* replay);
  void close_all() {
    for (auto& q : rxq_) {
      if (q->handle) pcap_close(q->handle);
      q->handle = nullptr;
    }
    for (auto& q : txq_) {
      if (q->dumper) pcap_dump_close(q->dumper);
      if (q->handle) pcap_close(q->handle);
      q->dumper = nullptr;
      q->handle = nullptr;
    }
    for (pcap_t* p : dead_) pcap_close(p);
    dead_.clear();
  }

  std::vector<RxSource> rx_;
  std::vector<TxSink> tx_;
  bool infinite_;
  std::vector<std::unique_ptr<pcap_pmd::RxQueue>> rxq_;
  std::vector<std::unique_ptr<pcap_pmd::TxQueue>> txq_;
  std::vector<std::unique_ptr<pcap_pmd::Replay>> replays_;
  std::vector<bool> rx_ready_;
  std::vector<pcap_t*> dead_;  // handles behind the dumpers
  std::vector<std::uint8_t> linear_ = std::vector<std::uint8_t>(max_frame_bytes);
};

Result<pcap_t*> PcapPort::open_live(const std::string& key, const std::string& iface, bool inbound_only) {
  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_create(iface.c_str(), err);
  if (!p) return fail("device '{}': key '{}' value '{}': {}", name(), key, iface, err);
  pcap_set_snaplen(p, live_snaplen);
  pcap_set_promisc(p, 1);
  pcap_set_immediate_mode(p, 1);  // deliver each packet at once, as a NIC would
  pcap_set_timeout(p, 1);
  const int rc = pcap_activate(p);
  if (rc < 0) {
    std::string why = pcap_geterr(p);
    pcap_close(p);
    return fail("device '{}': key '{}' value '{}': cannot open the interface: {}", name(), key, iface,
                why.empty() ? pcap_statustostr(rc) : why);
  }
  if (pcap_setnonblock(p, 1, err) != 0) {
    pcap_close(p);
    return fail("device '{}': key '{}' value '{}': {}", name(), key, iface, err);
  }
  if (inbound_only && pcap_setdirection(p, PCAP_D_IN) != 0) {
    std::string why = pcap_geterr(p);
    pcap_close(p);
    return fail("device '{}': key '{}' value '{}': cannot capture inbound only: {}", name(), key, iface, why);
  }
  return p;
}

// Reads the whole file once: any record libpcap refuses (truncated file, bad lengths) is an
// error naming the file and the record, before any packet flows. With infinite_rx the records
// are kept for the replay.
Result<void> PcapPort::check_file(const RxSource& src, PktmbufPool& pool, pcap_pmd::Replay* replay) {
  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_open_offline_with_tstamp_precision(src.value.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
  if (!p)
    return fail("device '{}': key '{}' value '{}': not a readable pcap or pcapng file: {}", name(), src.key, src.value,
                err);
  std::uint64_t record = 0;
  Result<void> result;
  const auto max_pkt = static_cast<std::uint32_t>(pool.data_room_bytes() - mbuf_default_headroom) * 255;
  for (;;) {
    pcap_pkthdr* hdr = nullptr;
    const u_char* data = nullptr;
    const int rc = pcap_next_ex(p, &hdr, &data);
    if (rc == PCAP_ERROR_BREAK) break;
    if (rc < 0) {
      result = fail("device '{}': key '{}' value '{}': record {} cannot be read: {}", name(), src.key, src.value,
                    record + 1, pcap_geterr(p));
      break;
    }
    ++record;
    if (hdr->caplen > max_pkt) {
      result = fail("device '{}': key '{}' value '{}': record {} holds {} bytes, more than {} segments of {} bytes",
                    name(), src.key, src.value, record, hdr->caplen, 255, max_pkt / 255);
      break;
    }
    if (replay) {
      if (replay->offsets.empty()) replay->offsets.push_back(0);
      replay->bytes.insert(replay->bytes.end(), data, data + hdr->caplen);
      replay->offsets.push_back(static_cast<std::uint32_t>(replay->bytes.size()));
      if (replay->bytes.size() > (1ull << 31))
        result = fail("device '{}': key 'infinite_rx': file '{}' is larger than 2 GiB", name(), src.value);
    }
    if (!result) break;
  }
  pcap_close(p);
  if (result && replay && record == 0)
    return fail("device '{}': key 'infinite_rx': file '{}' has no packets to replay", name(), src.value);
  return result;
}

Result<void> PcapPort::setup_rx_queue(std::uint16_t queue, const RxQueueConfig& c) {
  if (queue >= rxq_.size()) return fail("RX queue {} does not exist ({} configured)", queue, rxq_.size());
  if (!c.pool) return fail("RX queue {} needs an mbuf pool", queue);
  auto& q = *rxq_[queue];
  if (q.handle) pcap_close(q.handle);
  q.handle = nullptr;
  q.replay = nullptr;
  q.replay_next = 0;
  q.file_done = false;
  q.pool = c.pool;
  q.port = id();
  rx_ready_[queue] = true;
  if (rx_.empty()) return {};  // no RX source: the queue receives nothing (DPDK: eth_null_rx)
  const RxSource& src = rx_[queue];
  if (src.file()) {
    replays_[queue] = infinite_ ? std::make_unique<pcap_pmd::Replay>() : nullptr;
    if (auto ok = check_file(src, *c.pool, replays_[queue].get()); !ok) {
      rx_ready_[queue] = false;
      return ok;
    }
    if (infinite_) {
      q.replay = replays_[queue].get();
      return {};
    }
    char err[PCAP_ERRBUF_SIZE] = {};
    q.handle = pcap_open_offline_with_tstamp_precision(src.value.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
    if (!q.handle) return fail("device '{}': key '{}' value '{}': {}", name(), src.key, src.value, err);
    return {};
  }
  auto p = open_live(src.key, src.value, src.key != "rx_iface");
  if (!p) {
    rx_ready_[queue] = false;
    return std::unexpected(p.error());
  }
  q.handle = *p;
  return {};
}

Result<void> PcapPort::setup_tx_queue(std::uint16_t queue, const TxQueueConfig&) {
  if (queue >= txq_.size()) return fail("TX queue {} does not exist ({} configured)", queue, txq_.size());
  auto& q = *txq_[queue];
  if (q.dumper) pcap_dump_close(q.dumper);
  if (q.handle) pcap_close(q.handle);
  q.dumper = nullptr;
  q.handle = nullptr;
  q.linear = linear_.data();
  q.max_frame = max_frame_bytes;
  if (tx_.empty()) return {};  // no TX sink: packets are counted and dropped
  const TxSink& sink = tx_[queue];
  if (sink.file()) {
    pcap_t* dead =
        pcap_open_dead_with_tstamp_precision(DLT_EN10MB, static_cast<int>(max_frame_bytes), PCAP_TSTAMP_PRECISION_NANO);
    if (!dead) return fail("device '{}': key 'tx_pcap': libpcap could not make a handle", name());
    q.dumper = pcap_dump_open(dead, sink.value.c_str());
    if (!q.dumper) {
      std::string why = pcap_geterr(dead);
      pcap_close(dead);
      return fail("device '{}': key 'tx_pcap' value '{}': cannot write the file: {}", name(), sink.value, why);
    }
    dead_.push_back(dead);
    return {};
  }
  auto p = open_live(sink.key, sink.value, false);
  if (!p) return std::unexpected(p.error());
  q.handle = *p;
  return {};
}

// The interface's hardware address, through libpcap's interface list (as DPDK's PMD on Linux
// reads it with SIOCGIFHWADDR).
Result<MacAddress> interface_mac(const std::string& iface) {
  pcap_if_t* all = nullptr;
  char err[PCAP_ERRBUF_SIZE] = {};
  if (pcap_findalldevs(&all, err) != 0) return fail("cannot list interfaces: {}", err);
  std::optional<MacAddress> mac;
  for (pcap_if_t* d = all; d && !mac; d = d->next) {
    if (iface != d->name) continue;
    for (pcap_addr_t* a = d->addresses; a && !mac; a = a->next) {
      if (!a->addr || a->addr->sa_family != AF_PACKET) continue;
      const auto* ll = reinterpret_cast<const sockaddr_ll*>(a->addr);
      if (ll->sll_halen != 6) continue;
      MacAddress m;
      std::memcpy(m.bytes.data(), ll->sll_addr, 6);
      mac = m;
    }
  }
  pcap_freealldevs(all);
  if (!mac) return fail("no such interface with an Ethernet address");
  return *mac;
}

class PcapDriver final : public Driver {
 public:
  std::string_view name() const override { return "net_pcap"; }
  std::span<const ParamSpec> params() const override { return pcap_params; }

  Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv&) override {
    std::vector<RxSource> rx;
    std::vector<TxSink> tx;
    for (const auto& [key, value] : args.pairs()) {
      if (key == "infinite_rx" || key == "phy_mac") continue;
      if (value.empty()) return fail("device '{}': key '{}' needs a value (a file or an interface)", args.name(), key);
      if (key == "iface") {
        rx.push_back({key, value});
        tx.push_back({key, value});
      } else if (key.starts_with("rx_")) {
        rx.push_back({key, value});
      } else {
        tx.push_back({key, value});
      }
    }
    if (rx.empty() && tx.empty())
      return fail("device '{}': give at least one of rx_pcap, tx_pcap, rx_iface, rx_iface_in, tx_iface, iface",
                  args.name());
    bool files = false, ifaces = false;
    for (const auto& s : rx) (s.file() ? files : ifaces) = true;
    if (files && ifaces)
      return fail("device '{}': RX queues must all be files (rx_pcap) or all interfaces, not both", args.name());
    auto infinite = args.get_bool("infinite_rx", false);
    if (!infinite) return std::unexpected(infinite.error());
    if (*infinite && !files) return fail("device '{}': key 'infinite_rx' needs rx_pcap files to replay", args.name());
    auto phy_mac = args.get_bool("phy_mac", false);
    if (!phy_mac) return std::unexpected(phy_mac.error());
    std::optional<MacAddress> mac;
    if (*phy_mac) {
      const auto iface = args.get("iface");
      if (!iface)
        return fail("device '{}': key 'phy_mac' needs iface= (the interface whose address to take)", args.name());
      auto m = interface_mac(std::string(*iface));
      if (!m) return fail("device '{}': key 'phy_mac': interface '{}': {}", args.name(), *iface, m.error().message);
      mac = *m;
    }
    return std::make_unique<PcapPort>(args.name(), std::move(rx), std::move(tx), *infinite, mac);
  }
};

}  // namespace

std::unique_ptr<Driver> make_pcap_driver() { return std::make_unique<PcapDriver>(); }

}  // namespace ws
