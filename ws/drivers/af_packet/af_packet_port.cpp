// SPDX-License-Identifier: BSD-3-Clause
// net_af_packet port: device keys, one RX socket (TPACKET_V3 ring) and one TX socket (TPACKET_V2
// ring) per queue pair, PACKET_FANOUT across queue pairs, promiscuous mode, stats.
#include "ws/drivers/af_packet/af_packet_port.hpp"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "ws/core/log.hpp"
#include "ws/drivers/af_packet/af_packet_rxtx.hpp"
#include "ws/drivers/kernel_iface.hpp"

namespace ws {
namespace {

// DPDK's af_packet PMD keys and defaults (drivers/net/af_packet/rte_eth_af_packet.c).
constexpr std::array af_packet_params = {
    ParamSpec{"iface", "string", "", "the kernel interface (required)"},
    ParamSpec{"qpairs", "uint", "1", "queue pairs: one RX and one TX socket each, fanned out by flow hash"},
    ParamSpec{"blocksz", "uint", "4096", "ring block size in bytes, a multiple of the page size"},
    ParamSpec{"framesz", "uint", "2048", "ring frame size in bytes (TX frame; RX frames are packed in blocks)"},
    ParamSpec{"framecnt", "uint", "512", "frames per ring"},
    ParamSpec{"qdisc_bypass", "bool", "1",
              "send without the kernel's queueing discipline (PACKET_QDISC_BYPASS), DPDK's default"},
};

constexpr std::uint32_t rx_block_timeout_ms = 1;  // a partly filled RX block is handed over after this

std::string errno_text(int e) { return std::strerror(e); }

struct Geometry {
  std::uint32_t block_bytes, frame_bytes, frame_count;
  std::uint32_t frames_per_block() const { return block_bytes / frame_bytes; }
  std::uint32_t block_count() const { return frame_count / frames_per_block(); }
  std::size_t ring_bytes() const { return std::size_t{block_bytes} * block_count(); }
};

struct Socket {
  int fd = -1;
  std::uint8_t* ring = nullptr;
  std::size_t ring_bytes = 0;
  bool vnet = false;  // TX: PACKET_VNET_HDR is on
  void close() {
    if (ring) ::munmap(ring, ring_bytes);
    if (fd >= 0) ::close(fd);
    fd = -1;
    ring = nullptr;
  }
};

class AfPacketPort final : public Port {
 public:
  AfPacketPort(std::string name, std::string iface, int ifindex, std::uint16_t qpairs, Geometry g, bool bypass)
      : Port(std::move(name), "net_af_packet"),
        iface_(std::move(iface)),
        ifindex_(ifindex),
        qpairs_(qpairs),
        geo_(g),
        bypass_(bypass) {
    if (auto mac = kernel_interface_mac(iface_)) mac_ = *mac;
  }
  ~AfPacketPort() override { close_all(); }

  PortInfo info() const override { return {"net_af_packet", qpairs_, qpairs_, 0, 65535}; }

  Result<void> do_configure(const PortConfig& c) override {
    close_all();
    rxq_.clear();
    txq_.clear();
    for (std::uint16_t q = 0; q < c.rx_queues; ++q) rxq_.push_back(std::make_unique<af_packet_pmd::RxQueue>());
    for (std::uint16_t q = 0; q < c.tx_queues; ++q) txq_.push_back(std::make_unique<af_packet_pmd::TxQueue>());
    rx_sock_.assign(c.rx_queues, {});
    tx_sock_.assign(c.tx_queues, {});
    return {};
  }

  Result<void> setup_rx_queue(std::uint16_t queue, const RxQueueConfig& c) override;
  Result<void> setup_tx_queue(std::uint16_t queue, const TxQueueConfig& c) override;

  Result<void> do_start() override {
    for (std::uint16_t q = 0; q < rxq_.size(); ++q) {
      if (rx_sock_[q].fd < 0) return fail("RX queue {} was not set up", q);
      publish_rx(q, rxq_[q].get());
    }
    for (std::uint16_t q = 0; q < txq_.size(); ++q) {
      if (tx_sock_[q].fd < 0) return fail("TX queue {} was not set up", q);
      publish_tx(q, txq_[q].get());
    }
    // As DPDK's PMD: starting the port brings the interface up.
    if (auto ok = set_flags(IFF_UP, true); !ok) return ok;
    return apply_promiscuous(promiscuous());
  }

  Result<void> set_promiscuous(bool on) override {
    if (auto ok = apply_promiscuous(on); !ok) return ok;
    return Port::set_promiscuous(on);
  }

  LinkStatus link() const override {
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", iface_.c_str());
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    bool up = false;
    if (fd >= 0 && ::ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) up = (ifr.ifr_flags & IFF_RUNNING) != 0;
    if (fd >= 0) ::close(fd);
    return {up, 10000, true};
  }

  PortStats read_stats() const override {
    PortStats s = sum_queues(rxq_, txq_);
    s.imissed += kernel_drops();
    return s;
  }

  std::vector<XStat> xstats() const override {
    auto out = Port::xstats();
    for (std::size_t q = 0; q < txq_.size(); ++q)
      out.push_back({fmt::format("tx_q{}_ring_full", q), txq_[q]->counters.full.read()});
    return out;
  }

 protected:
  // RX interrupts: the queue's RX socket, readable while a block of its ring is ours (the kernel
  // hands a partly filled block over after rx_block_timeout_ms). Level-triggered and the socket
  // is ours alone: there is nothing to arm, disarm or drain.
  Result<int> do_rx_intr_fd(std::uint16_t queue) override {
    if (queue >= rx_sock_.size() || rx_sock_[queue].fd < 0)
      return fail("device '{}': RX queue {} was not set up", name(), queue);
    return rx_sock_[queue].fd;
  }
  Result<void> do_rx_intr_enable(std::uint16_t queue) override { return intr_fd_ok(queue); }
  Result<void> do_rx_intr_disable(std::uint16_t queue) override { return intr_fd_ok(queue); }

 private:
  Result<void> intr_fd_ok(std::uint16_t queue) {
    if (auto fd = do_rx_intr_fd(queue); !fd) return std::unexpected(fd.error());
    return {};
  }
  Result<void> open_socket(Socket& s, bool rx, std::uint16_t queue);
  Result<void> set_flags(int flag, bool on);
  Result<void> apply_promiscuous(bool on);
  // Packets the kernel dropped because an RX ring was full. PACKET_STATISTICS resets on every
  // read, so the totals accumulate here.
  std::uint64_t kernel_drops() const {
    for (const auto& s : rx_sock_) {
      if (s.fd < 0) continue;
      tpacket_stats_v3 st{};
      socklen_t len = sizeof st;
      if (::getsockopt(s.fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) drops_ += st.tp_drops;
    }
    return drops_;
  }
  void close_all() {
    for (auto& s : rx_sock_) s.close();
    for (auto& s : tx_sock_) s.close();
  }
  Result<void> err(std::string_view what, int e) const {
    return fail("device '{}': key 'iface' value '{}': {}: {}", name(), iface_, what, errno_text(e));
  }

  std::string iface_;
  int ifindex_;
  std::uint16_t qpairs_;
  Geometry geo_;
  bool bypass_;
  std::vector<std::unique_ptr<af_packet_pmd::RxQueue>> rxq_;
  std::vector<std::unique_ptr<af_packet_pmd::TxQueue>> txq_;
  std::vector<Socket> rx_sock_, tx_sock_;
  mutable std::uint64_t drops_ = 0;
};

Result<void> AfPacketPort::set_flags(int flag, bool on) {
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", iface_.c_str());
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return err("socket", errno);
  Result<void> r;
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
    r = err("SIOCGIFFLAGS", errno);
  } else if (((ifr.ifr_flags & flag) != 0) != on) {
    ifr.ifr_flags = static_cast<short>(on ? (ifr.ifr_flags | flag) : (ifr.ifr_flags & ~flag));
    if (::ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) r = err("SIOCSIFFLAGS", errno);
  }
  ::close(fd);
  return r;
}

Result<void> AfPacketPort::apply_promiscuous(bool on) {
  // A membership per RX socket: the kernel counts them and drops them when the socket closes,
  // so a crashed process never leaves the interface promiscuous.
  for (const auto& s : rx_sock_) {
    if (s.fd < 0) continue;
    packet_mreq mr{};
    mr.mr_ifindex = ifindex_;
    mr.mr_type = PACKET_MR_PROMISC;
    const int opt = on ? PACKET_ADD_MEMBERSHIP : PACKET_DROP_MEMBERSHIP;
    if (::setsockopt(s.fd, SOL_PACKET, opt, &mr, sizeof mr) != 0 && on) return err("PACKET_MR_PROMISC", errno);
  }
  return {};
}

Result<void> AfPacketPort::open_socket(Socket& s, bool rx, std::uint16_t queue) {
  s.close();
  // The TX socket binds with protocol 0, so it receives nothing; the RX socket takes every protocol.
  const std::uint16_t proto = rx ? htons(ETH_P_ALL) : 0;
  s.fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, proto);
  if (s.fd < 0) return err("socket(AF_PACKET)", errno);
  const int version = rx ? TPACKET_V3 : TPACKET_V2;
  if (::setsockopt(s.fd, SOL_PACKET, PACKET_VERSION, &version, sizeof version) != 0)
    return err("PACKET_VERSION", errno);
  const int one = 1;
  if (rx) {
    // Our own TX (from this or another queue's socket) is not RX.
    ::setsockopt(s.fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
    tpacket_req3 req{};
    req.tp_block_size = geo_.block_bytes;
    req.tp_block_nr = geo_.block_count();
    req.tp_frame_size = geo_.frame_bytes;
    req.tp_frame_nr = geo_.block_count() * geo_.frames_per_block();
    req.tp_retire_blk_tov = rx_block_timeout_ms;
    if (::setsockopt(s.fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) != 0)
      return fail("device '{}': RX ring (blocksz={}, framesz={}, framecnt={}) refused by the kernel: {}", name(),
                  geo_.block_bytes, geo_.frame_bytes, geo_.frame_count, errno_text(errno));
  } else {
    // A frame the kernel cannot send is skipped, not left blocking the ring.
    ::setsockopt(s.fd, SOL_PACKET, PACKET_LOSS, &one, sizeof one);
    if (bypass_ && ::setsockopt(s.fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) != 0)
      return err("PACKET_QDISC_BYPASS", errno);
    // Before the ring (the kernel refuses it after): lets each frame ask for a linear copy.
    s.vnet = ::setsockopt(s.fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) == 0;
    if (!s.vnet && queue == 0)
      log(LogLevel::info, "{}: PACKET_VNET_HDR refused ({}): small packets are sent as ring-page fragments", name(),
          errno_text(errno));
    tpacket_req req{};
    req.tp_block_size = geo_.block_bytes;
    req.tp_block_nr = geo_.block_count();
    req.tp_frame_size = geo_.frame_bytes;
    req.tp_frame_nr = geo_.block_count() * geo_.frames_per_block();
    if (::setsockopt(s.fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof req) != 0)
      return fail("device '{}': TX ring (blocksz={}, framesz={}, framecnt={}) refused by the kernel: {}", name(),
                  geo_.block_bytes, geo_.frame_bytes, geo_.frame_count, errno_text(errno));
  }
  s.ring_bytes = geo_.ring_bytes();
  void* ring = ::mmap(nullptr, s.ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, s.fd, 0);
  if (ring == MAP_FAILED) return err("mmap of the packet ring", errno);
  s.ring = static_cast<std::uint8_t*>(ring);
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = proto;
  addr.sll_ifindex = ifindex_;
  if (::bind(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return err("bind", errno);
  if (rx && qpairs_ > 1) {
    // One fanout group per port (its id from the pid and the interface, as DPDK's PMD): the
    // kernel spreads flows over the queues by hash; a full queue rolls over to another.
    const int group =
        static_cast<int>((static_cast<unsigned>(::getpid()) * 31u + static_cast<unsigned>(ifindex_)) & 0xffff);
    const int arg = group | ((PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_DEFRAG | PACKET_FANOUT_FLAG_ROLLOVER) << 16);
    if (::setsockopt(s.fd, SOL_PACKET, PACKET_FANOUT, &arg, sizeof arg) != 0) return err("PACKET_FANOUT", errno);
  }
  return {};
}

Result<void> AfPacketPort::setup_rx_queue(std::uint16_t queue, const RxQueueConfig& c) {
  if (queue >= rxq_.size()) return fail("RX queue {} does not exist ({} configured)", queue, rxq_.size());
  if (!c.pool) return fail("RX queue {} needs an mbuf pool", queue);
  Socket& s = rx_sock_[queue];
  if (auto ok = open_socket(s, true, queue); !ok) {
    s.close();
    return ok;
  }
  auto& q = *rxq_[queue];
  q.ring = s.ring;
  q.block_bytes = geo_.block_bytes;
  q.block_count = geo_.block_count();
  q.block = 0;
  q.left = 0;
  q.pool = c.pool;
  q.port = id();
  return {};
}

Result<void> AfPacketPort::setup_tx_queue(std::uint16_t queue, const TxQueueConfig&) {
  if (queue >= txq_.size()) return fail("TX queue {} does not exist ({} configured)", queue, txq_.size());
  Socket& s = tx_sock_[queue];
  if (auto ok = open_socket(s, false, queue); !ok) {
    s.close();
    return ok;
  }
  auto& q = *txq_[queue];
  q.fd = s.fd;
  q.ring = s.ring;
  q.block_bytes = geo_.block_bytes;
  q.frame_bytes = geo_.frame_bytes;
  q.frames_per_block = geo_.frames_per_block();
  q.frame_count = geo_.block_count() * geo_.frames_per_block();
  q.frame = 0;
  q.vnet_bytes = s.vnet ? af_packet_pmd::tx_vnet_bytes : 0;
  return {};
}

class AfPacketDriver final : public Driver {
 public:
  std::string_view name() const override { return "net_af_packet"; }
  std::span<const ParamSpec> params() const override { return af_packet_params; }

  Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv&) override {
    const std::string iface = args.get_string("iface", "");
    if (iface.empty()) return fail("device '{}': key 'iface' is required (the kernel interface to use)", args.name());
    if (iface.size() >= IFNAMSIZ)
      return fail("device '{}': key 'iface' value '{}': longer than {} characters", args.name(), iface, IFNAMSIZ - 1);
    const unsigned ifindex = ::if_nametoindex(iface.c_str());
    if (ifindex == 0)
      return fail("device '{}': key 'iface' value '{}': no such interface ({})", args.name(), iface, errno_text(errno));
    auto qpairs = args.get_uint("qpairs", 1, 1, port_max_queues);
    if (!qpairs) return std::unexpected(qpairs.error());
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    auto blocksz = args.get_uint("blocksz", page, page, 1u << 30);
    if (!blocksz) return std::unexpected(blocksz.error());
    if (*blocksz % page != 0)
      return fail("device '{}': key 'blocksz' has value {}, expected a multiple of the page size {}", args.name(),
                  *blocksz, page);
    auto framesz = args.get_uint("framesz", 2048, TPACKET_ALIGN(TPACKET3_HDRLEN) + 64, *blocksz);
    if (!framesz) return std::unexpected(framesz.error());
    if (*framesz % TPACKET_ALIGNMENT != 0 || *blocksz % *framesz != 0)
      return fail("device '{}': key 'framesz' has value {}, expected a multiple of {} that divides blocksz {}",
                  args.name(), *framesz, TPACKET_ALIGNMENT, *blocksz);
    auto framecnt = args.get_uint("framecnt", 512, 1, 1u << 24);
    if (!framecnt) return std::unexpected(framecnt.error());
    const std::uint64_t per_block = *blocksz / *framesz;
    if (*framecnt % per_block != 0)
      return fail("device '{}': key 'framecnt' has value {}, expected a multiple of blocksz/framesz = {}", args.name(),
                  *framecnt, per_block);
    auto bypass = args.get_bool("qdisc_bypass", true);
    if (!bypass) return std::unexpected(bypass.error());
    const Geometry g{static_cast<std::uint32_t>(*blocksz), static_cast<std::uint32_t>(*framesz),
                     static_cast<std::uint32_t>(*framecnt)};
    return std::make_unique<AfPacketPort>(args.name(), iface, static_cast<int>(ifindex),
                                          static_cast<std::uint16_t>(*qpairs), g, *bypass);
  }
};

}  // namespace

std::unique_ptr<Driver> make_af_packet_driver() { return std::make_unique<AfPacketDriver>(); }

}  // namespace ws
