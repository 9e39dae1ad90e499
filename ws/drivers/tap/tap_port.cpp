// SPDX-License-Identifier: BSD-3-Clause
// net_tap port: creating the TAP interface (one file descriptor per queue with IFF_MULTI_QUEUE),
// bringing it up at start, the port's own MAC address, `remote` redirection rules, `persist`,
// stats.
#include "ws/drivers/tap/tap_port.hpp"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <vector>

#include "ws/core/log.hpp"
#include "ws/drivers/kernel_iface.hpp"
#include "ws/drivers/tap/tap_flow.hpp"
#include "ws/drivers/tap/tap_remote.hpp"
#include "ws/drivers/tap/tap_rxtx.hpp"

namespace ws {
namespace {

// DPDK's tap PMD keys.
constexpr std::array tap_params = {
    ParamSpec{"iface", "string", "dtap<N>", "name of the TAP interface to create (or attach to)"},
    ParamSpec{"mac", "string", "", "the port's MAC address (the kernel side keeps its own)"},
    ParamSpec{"remote", "string", "",
              "an interface the TAP stands in for: its incoming traffic is redirected to the port and the "
              "port's traffic leaves through it (tc clsact rules); the port takes its MAC address"},
    ParamSpec{"persist", "bool", "0", "keep the TAP interface when the port closes (TUNSETPERSIST)"},
    ParamSpec{"flow_offload", "bool", "1",
              "flow rules flower can express (drop, queue) become TC flower filters on the TAP, a prefix of "
              "group 0 in matching order; 0: every rule in software"},
};

constexpr std::uint16_t tap_max_queues = 16;  // as DPDK's RTE_PMD_TAP_MAX_QUEUES

class TapPort final : public Port {
 public:
  TapPort(std::string name, std::string iface, MacAddress mac, std::string remote, bool persist, bool flow_offload)
      : Port(std::move(name), "net_tap"),
        iface_(std::move(iface)),
        remote_(std::move(remote)),
        persist_(persist),
        flow_offload_(flow_offload) {
    mac_ = mac;
  }
  ~TapPort() override { close_fds(); }

  PortInfo info() const override { return {"net_tap", tap_max_queues, tap_max_queues, 0, 65535}; }

  Result<void> do_configure(const PortConfig& c) override {
    close_fds();
    rxq_.clear();
    txq_.clear();
    const std::uint16_t n = std::max(c.rx_queues, c.tx_queues);
    for (std::uint16_t q = 0; q < n; ++q) {
      auto fd = open_queue(n > 1);
      if (!fd) {
        close_fds();
        return std::unexpected(fd.error());
      }
      fds_.push_back(*fd);
    }
    if (auto ok = configure_interface(); !ok) {
      close_fds();
      return ok;
    }
    for (std::uint16_t q = 0; q < c.rx_queues; ++q) rxq_.push_back(std::make_unique<tap_pmd::RxQueue>());
    for (std::uint16_t q = 0; q < c.tx_queues; ++q) txq_.push_back(std::make_unique<tap_pmd::TxQueue>());
    return {};
  }

  Result<void> setup_rx_queue(std::uint16_t queue, const RxQueueConfig& c) override {
    if (queue >= rxq_.size()) return fail("RX queue {} does not exist ({} configured)", queue, rxq_.size());
    if (!c.pool) return fail("RX queue {} needs an mbuf pool", queue);
    rxq_[queue]->fd = fds_[queue];
    rxq_[queue]->pool = c.pool;
    rxq_[queue]->port = id();
    return {};
  }

  Result<void> setup_tx_queue(std::uint16_t queue, const TxQueueConfig&) override {
    if (queue >= txq_.size()) return fail("TX queue {} does not exist ({} configured)", queue, txq_.size());
    txq_[queue]->fd = fds_[queue];
    return {};
  }

  Result<void> do_start() override {
    for (std::uint16_t q = 0; q < rxq_.size(); ++q) {
      if (!rxq_[q]->pool) return fail("RX queue {} was not set up", q);
      publish_rx(q, rxq_[q].get());
    }
    for (std::uint16_t q = 0; q < txq_.size(); ++q) {
      if (txq_[q]->fd < 0) return fail("TX queue {} was not set up", q);
      publish_tx(q, txq_[q].get());
    }
    return set_up(true);  // as DPDK's tap PMD: the link follows the port
  }
  void do_stop() override { (void)set_up(false); }

  LinkStatus link() const override { return {started(), 10000, true}; }

  PortStats read_stats() const override { return sum_queues(rxq_, txq_); }

 protected:
  FlowOffloadResult do_flow_offload(const FlowRule& rule, std::uint32_t slot) override {
    if (!flow_offload_) return std::unexpected(FlowOffloadRefusal{false, "flow_offload=0"});
    if (fds_.empty()) return std::unexpected(FlowOffloadRefusal{false, "the TAP interface does not exist yet"});
    return tc_flows_.add(iface_, name(), rule, slot);
  }
  void do_flow_unoffload(const FlowOffload& offload) override {
    tc_flows_.remove(static_cast<std::uint32_t>(offload.handle));
  }
  // RX interrupts: the queue's TAP fd, readable while the kernel has a frame queued for it, as
  // DPDK's tap PMD. Level-triggered and ours alone: nothing to arm, disarm or drain.
  Result<int> do_rx_intr_fd(std::uint16_t queue) override {
    if (queue >= fds_.size()) return fail("device '{}': RX queue {} was not configured", name(), queue);
    return fds_[queue];
  }
  Result<void> do_rx_intr_enable(std::uint16_t queue) override { return intr_fd_ok(queue); }
  Result<void> do_rx_intr_disable(std::uint16_t queue) override { return intr_fd_ok(queue); }
  Result<void> intr_fd_ok(std::uint16_t queue) {
    if (auto fd = do_rx_intr_fd(queue); !fd) return std::unexpected(fd.error());
    return {};
  }

 private:
  Result<int> open_queue(bool multi_queue) {
    const int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return fail("device '{}': cannot open /dev/net/tun: {}", name(), std::strerror(errno));
    ifreq ifr{};
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | (multi_queue ? IFF_MULTI_QUEUE : 0);
    std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", iface_.c_str());
    if (::ioctl(fd, TUNSETIFF, &ifr) != 0) {
      const int e = errno;
      ::close(fd);
      return fail("device '{}': key 'iface' value '{}': TUNSETIFF{} failed: {}", name(), iface_,
                  multi_queue ? " (IFF_MULTI_QUEUE)" : "", std::strerror(e));
    }
    return fd;
  }

  Result<void> set_up(bool up) {
    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return fail("device '{}': socket: {}", name(), std::strerror(errno));
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", iface_.c_str());
    Result<void> r;
    if (::ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
      ifr.ifr_flags = static_cast<short>(up ? (ifr.ifr_flags | IFF_UP) : (ifr.ifr_flags & ~IFF_UP));
      if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
        r = fail("device '{}': key 'iface' value '{}': cannot set the link {}: {}", name(), iface_, up ? "up" : "down",
                 std::strerror(errno));
    }
    ::close(s);
    return r;
  }

  // After the queues' descriptors made the interface exist: persistence and the remote's rules.
  Result<void> configure_interface() {
    if (persist_ && ::ioctl(fds_.front(), TUNSETPERSIST, 1) != 0)
      return fail("device '{}': key 'persist': TUNSETPERSIST on '{}' failed: {}", name(), iface_, std::strerror(errno));
    if (remote_.empty()) return {};
    if (auto ok = redirect_.install(iface_, remote_); !ok) return fail("device '{}': {}", name(), ok.error().message);
    log(LogLevel::info, "{}: traffic of '{}' is redirected to TAP '{}' and back (tc clsact, matchall mirred)", name(),
        remote_, iface_);
    return {};
  }

  void close_fds() {
    tc_flows_.remove_all();  // before the remote's rules: they may share the clsact qdisc
    redirect_.remove();      // before the descriptors: the TAP interface (and its qdisc) may go with them
    for (int fd : fds_) ::close(fd);
    fds_.clear();
  }

  std::string iface_;
  std::string remote_;
  bool persist_;
  bool flow_offload_;
  tap_pmd::RemoteRedirect redirect_;
  tap_pmd::TcFlows tc_flows_;
  std::vector<int> fds_;
  std::vector<std::unique_ptr<tap_pmd::RxQueue>> rxq_;
  std::vector<std::unique_ptr<tap_pmd::TxQueue>> txq_;
};

class TapDriver final : public Driver {
 public:
  std::string_view name() const override { return "net_tap"; }
  std::span<const ParamSpec> params() const override { return tap_params; }

  Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv&) override {
    std::string iface = args.get_string("iface", "");
    if (iface.empty()) iface = fmt::format("dtap{}", created_);  // DPDK's default names
    if (iface.size() >= IFNAMSIZ)
      return fail("device '{}': key 'iface' value '{}': longer than {} characters", args.name(), iface, IFNAMSIZ - 1);
    MacAddress mac{{0x02, 0x74, 0x61, 0x70, 0x00, static_cast<std::uint8_t>(created_)}};  // "tap"
    if (auto text = args.get("mac")) {
      auto m = MacAddress::parse(*text);
      if (!m) return fail("device '{}': key 'mac' value '{}': {}", args.name(), *text, m.error().message);
      mac = *m;
    }
    std::string remote = args.get_string("remote", "");
    if (!remote.empty()) {
      // As DPDK's PMD: the port answers with the remote's address unless told otherwise.
      auto remote_mac = kernel_interface_mac(remote);
      if (!remote_mac)
        return fail("device '{}': key 'remote' value '{}': {}", args.name(), remote, remote_mac.error().message);
      if (!args.has("mac")) mac = *remote_mac;
    }
    auto persist = args.get_bool("persist", false);
    if (!persist) return std::unexpected(persist.error());
    auto offload = args.get_bool("flow_offload", true);
    if (!offload) return std::unexpected(offload.error());
    ++created_;
    return std::make_unique<TapPort>(args.name(), std::move(iface), mac, std::move(remote), *persist, *offload);
  }

 private:
  unsigned created_ = 0;
};

}  // namespace

std::unique_ptr<Driver> make_tap_driver() { return std::make_unique<TapDriver>(); }

}  // namespace ws
