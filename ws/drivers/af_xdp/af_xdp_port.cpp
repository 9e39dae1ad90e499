// SPDX-License-Identifier: BSD-3-Clause
// net_af_xdp port: device keys, loading and attaching our XDP program (native mode, falling back
// to skb mode with a log line), one UMEM (in the port's Arena) and one AF_XDP socket per queue,
// the program's counters and the sockets' XDP_STATISTICS in stats and xstats; flow rules the
// program can do (drop, and queue through sockets sharing each queue's UMEM) written into its maps.
#include "ws/drivers/af_xdp/af_xdp_port.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstring>
#include <vector>

#include "ws/core/log.hpp"
#include "ws/drivers/af_xdp/af_xdp_rxtx.hpp"
#include "ws/drivers/af_xdp/xdp_fast_drop_obj.hpp"
#include "ws/drivers/kernel_iface.hpp"

namespace ws {
namespace {

// Keys named as DPDK's af_xdp PMD where the meaning is the same (iface, start_queue,
// queue_count, busy_budget, force_copy); xdp_mode and xdp_prog are ours (DPDK's xdp_prog takes
// only a file).
constexpr std::array af_xdp_params = {
    ParamSpec{"iface", "string", "", "the interface (required)"},
    ParamSpec{"start_queue", "uint", "0", "first interface queue to bind"},
    ParamSpec{"queue_count", "uint", "1", "queues (one AF_XDP socket each)"},
    ParamSpec{"xdp_mode", "string", "native", "native (driver XDP; falls back to skb with a log line) or skb"},
    ParamSpec{"xdp_prog", "string", "redirect_all",
              "redirect_all | drop_all | drop_udp_dport:N (our program) or the path of a BPF object file "
              "with an XSKMAP called xsks_map"},
    ParamSpec{"busy_budget", "uint", "64",
              "preferred busy polling (SO_PREFER_BUSY_POLL, SO_BUSY_POLL_BUDGET): packets per busy poll, 0 = off; "
              "if the kernel refuses, a log line and interrupt-driven mode"},
    ParamSpec{"flow_offload", "bool", "1",
              "flow rules the XDP program can do (drop; queue with several queues; with count) run in it, a "
              "prefix of group 0 in matching order; 0: every rule in software"},
    ParamSpec{"force_copy", "bool", "0",
              "bind in copy mode; otherwise zero-copy is tried in native mode and copy mode used, with a log "
              "line, when the driver offers none (veth offers none)"},
};

constexpr std::uint32_t max_busy_budget = 65535;  // the kernel's bound for SO_BUSY_POLL_BUDGET, as DPDK
constexpr int busy_poll_timeout_us = 20;          // SO_BUSY_POLL, DPDK's ETH_AF_XDP_DFLT_BUSY_TIMEOUT

constexpr std::uint32_t frame_bytes = 2048;                 // UMEM chunk (XSK_UMEM__MIN... aligned mode allows 2048)
constexpr std::uint32_t ring_slots = 2048;                  // RX, TX, fill and completion rings
constexpr std::uint32_t frames_per_queue = 2 * ring_slots;  // half for RX (fill), half for TX
enum ProgMode : std::uint32_t { mode_drop_all = 0, mode_drop_udp_dport = 1, mode_redirect_all = 2 };

// One offloaded flow rule, as ws_rules holds it (struct ws_rule of xdp_fast_drop.bpf.c): the
// FlowExactMatch's bytes in the FlowKey layout both sides read packets into.
struct XdpRule {
  std::array<std::uint64_t, 8> mask;
  std::array<std::uint64_t, 8> value;
  std::uint32_t layers;
  std::uint32_t action;  // xdp_rule_drop or xdp_rule_queue
  std::uint32_t queue;   // xdp_rule_queue: the port RX queue
  std::uint32_t pad;
};
static_assert(sizeof(XdpRule) == 144 && sizeof(FlowBytes) == sizeof(XdpRule::mask));
constexpr std::uint32_t xdp_rule_drop = 0;
constexpr std::uint32_t xdp_rule_queue = 1;
struct XdpRuleCount {  // struct ws_rule_count, per CPU
  std::uint64_t packets;
  std::uint64_t bytes;
};
constexpr std::uint32_t xdp_max_rules = 64;  // ws_rules' max_entries
constexpr std::uint32_t config_rules = 2;    // ws_config's key for the number of rules
constexpr std::uint32_t config_start = 3;    // ... the port's first interface queue
constexpr std::uint32_t config_queues = 4;   // ... its queues, once ws_queue_xsks is filled
// Queue rules: ws_queue_xsks holds max_moving_queues squared sockets; ws_counters has the
// program's three counters, a spare slot, then frames moved to each port queue.
constexpr std::uint32_t max_moving_queues = 16;
constexpr std::uint32_t counter_moved = 4;
constexpr std::uint32_t counter_slots = counter_moved + max_moving_queues;

struct ProgChoice {
  ProgMode mode = mode_redirect_all;
  std::uint32_t udp_port = 0;
  std::string object_path;  // non-empty: a user's object file
};

struct Options {
  bool skb_mode = false;
  bool force_copy = false;
  std::uint32_t busy_budget = 64;
  bool flow_offload = true;
};

struct QueueSocket {
  xsk_umem* umem = nullptr;
  xsk_socket* xsk = nullptr;
  std::uint8_t* area = nullptr;
  std::vector<std::uint64_t> tx_free;
  std::vector<std::uint64_t> rx_stash;
};

// Port queue N's sockets on the other interface queues, for queue rules (af_xdp_rxtx.hpp): the
// RX rings, the sockets, and queue N's entries in the owners' lists of rings coming back.
struct MovedSockets {
  std::vector<af_xdp_pmd::MovedRx> rx;
  std::vector<xsk_socket*> xsk;
  std::vector<std::unique_ptr<Ring<std::uint64_t>>> back;
};

class AfXdpPort final : public Port {
 public:
  AfXdpPort(std::string name, std::string iface, int ifindex, std::uint32_t start, std::uint16_t count, Options opt,
            ProgChoice prog)
      : Port(std::move(name), "net_af_xdp"),
        iface_(std::move(iface)),
        ifindex_(ifindex),
        start_queue_(start),
        queue_count_(count),
        skb_mode_(opt.skb_mode),
        force_copy_(opt.force_copy),
        busy_budget_(opt.busy_budget),
        flow_offload_(opt.flow_offload),
        prog_(std::move(prog)) {
    if (auto mac = kernel_interface_mac(iface_)) mac_ = *mac;  // as DPDK's PMD: the interface's address
  }
  ~AfXdpPort() override { close_all(); }

  PortInfo info() const override { return {"net_af_xdp", queue_count_, queue_count_, 0, 65535}; }

  Result<void> do_configure(const PortConfig& c) override {
    close_all();
    if (c.rx_queues != c.tx_queues)
      return fail("device '{}': AF_XDP sockets are RX/TX pairs: {} RX and {} TX queues requested", name(), c.rx_queues,
                  c.tx_queues);
    if (auto ok = load_program(); !ok) return ok;
    auto arena = Arena::create(
        {name() + "_umem", std::size_t{c.rx_queues} * frames_per_queue * frame_bytes, HugePolicy::automatic});
    if (!arena) return std::unexpected(arena.error());
    arena_ = std::move(*arena);
    rxq_.clear();
    txq_.clear();
    socks_.assign(c.rx_queues, {});
    for (std::uint16_t q = 0; q < c.rx_queues; ++q) {
      rxq_.push_back(std::make_unique<af_xdp_pmd::RxQueue>());
      txq_.push_back(std::make_unique<af_xdp_pmd::TxQueue>());
      if (auto ok = open_socket(q); !ok) {
        close_all();
        return ok;
      }
    }
    if (auto ok = open_moved_sockets(); !ok) {
      // The port works without them: queue rules stay in software.
      log(LogLevel::warning, "{}: queue rules stay in software: {}", name(), ok.error().message);
      close_moved();
    }
    return {};
  }

  Result<void> setup_rx_queue(std::uint16_t queue, const RxQueueConfig& c) override {
    if (queue >= rxq_.size()) return fail("RX queue {} does not exist ({} configured)", queue, rxq_.size());
    if (!c.pool) return fail("RX queue {} needs an mbuf pool", queue);
    rxq_[queue]->pool = c.pool;
    rxq_[queue]->port = id();
    return {};
  }
  Result<void> setup_tx_queue(std::uint16_t queue, const TxQueueConfig&) override {
    if (queue >= txq_.size()) return fail("TX queue {} does not exist ({} configured)", queue, txq_.size());
    return {};
  }

  Result<void> do_start() override {
    for (std::uint16_t q = 0; q < rxq_.size(); ++q) {
      if (!rxq_[q]->pool) return fail("RX queue {} was not set up", q);
      publish_rx(q, rxq_[q].get());
      publish_tx(q, txq_[q].get());
    }
    return {};
  }

 protected:
  // RX interrupts: the queue's XSK socket, readable while its RX ring holds frames. Polling it
  // wakes the kernel when the fill ring needs a wakeup (need_wakeup), and rx_burst refills the
  // fill ring as it takes frames, so a sleeping lcore misses nothing. Level-triggered and ours
  // alone: nothing to arm, disarm or drain.
  Result<int> do_rx_intr_fd(std::uint16_t queue) override {
    if (queue >= rxq_.size() || rxq_[queue]->fd < 0)
      return fail("device '{}': RX queue {} was not set up", name(), queue);
    return rxq_[queue]->fd;
  }
  Result<void> do_rx_intr_enable(std::uint16_t queue) override {
    if (auto fd = do_rx_intr_fd(queue); !fd) return std::unexpected(fd.error());
    return {};
  }
  Result<void> do_rx_intr_disable(std::uint16_t queue) override { return do_rx_intr_enable(queue); }

 public:
  PortStats read_stats() const override {
    PortStats s = sum_queues(rxq_, txq_);
    for (const auto& k : socks_) s.imissed += socket_stats(k.xsk).rx_dropped;
    for (const auto& m : moved_)
      for (auto* x : m.xsk) s.imissed += socket_stats(x).rx_dropped;
    return s;
  }

  std::vector<XStat> xstats() const override {
    auto out = Port::xstats();
    const auto c = program_counters();
    out.push_back({"xdp_prog_dropped", c[0]});
    out.push_back({"xdp_prog_redirected", c[1]});
    out.push_back({"xdp_prog_passed", c[2]});
    for (std::size_t q = 0; q < socks_.size(); ++q) {
      const xdp_statistics st = socket_stats(socks_[q].xsk);
      std::uint64_t moved_full = 0;  // the fill ring is the owner's: its empty count is there
      if (q < moved_.size())
        for (auto* x : moved_[q].xsk) moved_full += socket_stats(x).rx_ring_full;
      out.push_back({fmt::format("rx_q{}_ring_full", q), st.rx_ring_full + moved_full});
      out.push_back({fmt::format("rx_q{}_fill_ring_empty", q), st.rx_fill_ring_empty_descs});
      out.push_back({fmt::format("rx_q{}_invalid_descs", q), st.rx_invalid_descs});
      out.push_back({fmt::format("tx_q{}_invalid_descs", q), st.tx_invalid_descs});
      out.push_back({fmt::format("tx_q{}_ring_full", q), txq_[q]->counters.full.read()});
      if (q < max_moving_queues) out.push_back({fmt::format("rx_q{}_xdp_moved", q), c[counter_moved + q]});
    }
    return out;
  }

 protected:
  FlowOffloadResult do_flow_offload(const FlowRule& rule, std::uint32_t slot) override;
  void do_flow_unoffload(const FlowOffload& offload) override;
  FlowCounts do_flow_offload_counts(const FlowOffload& offload) const override;

 private:
  Result<void> load_program();
  Result<void> open_socket(std::uint16_t q);
  Result<void> bind_socket(std::uint16_t q);
  void configure_busy_poll(std::uint16_t q);
  Result<void> open_moved_sockets();
  void close_moved();
  Result<void> open_moved_socket(std::uint16_t from, std::uint16_t to);
  Result<XdpRule> xdp_rule(const FlowRule& rule) const;
  std::array<std::uint64_t, counter_slots> program_counters() const;
  static xdp_statistics socket_stats(const xsk_socket* xsk) {
    xdp_statistics st{};
    socklen_t len = sizeof st;
    if (xsk) ::getsockopt(xsk_socket__fd(xsk), SOL_XDP, XDP_STATISTICS, &st, &len);
    return st;
  }
  void close_all();

  std::string iface_;
  int ifindex_;
  std::uint32_t start_queue_;
  std::uint16_t queue_count_;
  bool skb_mode_;
  bool zero_copy_ = false;
  bool force_copy_;
  std::uint32_t busy_budget_;
  bool flow_offload_;
  ProgChoice prog_;
  bpf_object* obj_ = nullptr;
  std::uint32_t attach_flags_ = 0;
  int xsks_map_fd_ = -1;
  int counters_fd_ = -1;
  int config_fd_ = -1;
  int rules_fd_ = -1;                                       // ws_rules, or -1: the program takes no rules
  int rule_counts_fd_ = -1;                                 // ws_rule_counts
  int queue_xsks_fd_ = -1;                                  // ws_queue_xsks, or -1: queue rules stay in software
  std::atomic<bool> moving_{false};                         // a queue rule is in the program: RX reads moved_
  std::vector<MovedSockets> moved_;                         // per port queue, when the program can take queue rules
  std::vector<std::vector<Ring<std::uint64_t>*>> returns_;  // per port queue: rings of its frames
  std::unique_ptr<Arena> arena_;
  std::vector<QueueSocket> socks_;
  std::vector<std::unique_ptr<af_xdp_pmd::RxQueue>> rxq_;
  std::vector<std::unique_ptr<af_xdp_pmd::TxQueue>> txq_;
};

Result<void> AfXdpPort::load_program() {
  obj_ = prog_.object_path.empty() ? bpf_object__open_mem(xdp_fast_drop_obj, xdp_fast_drop_obj_bytes, nullptr)
                                   : bpf_object__open_file(prog_.object_path.c_str(), nullptr);
  if (!obj_ || libbpf_get_error(obj_)) {
    obj_ = nullptr;
    return fail("device '{}': key 'xdp_prog': cannot open the BPF object{}", name(),
                prog_.object_path.empty() ? "" : " '" + prog_.object_path + "'");
  }
  if (int e = bpf_object__load(obj_); e != 0)
    return fail("device '{}': key 'xdp_prog': the kernel refused the XDP program: {}", name(), std::strerror(-e));
  bpf_program* prog = bpf_object__next_program(obj_, nullptr);
  if (!prog) return fail("device '{}': key 'xdp_prog': the object holds no program", name());
  xsks_map_fd_ = bpf_object__find_map_fd_by_name(obj_, "xsks_map");
  if (xsks_map_fd_ < 0) return fail("device '{}': key 'xdp_prog': the object has no map called xsks_map", name());
  counters_fd_ = bpf_object__find_map_fd_by_name(obj_, "ws_counters");
  rules_fd_ = bpf_object__find_map_fd_by_name(obj_, "ws_rules");
  rule_counts_fd_ = bpf_object__find_map_fd_by_name(obj_, "ws_rule_counts");
  config_fd_ = bpf_object__find_map_fd_by_name(obj_, "ws_config");
  queue_xsks_fd_ = bpf_object__find_map_fd_by_name(obj_, "ws_queue_xsks");
  if (const int cfg = config_fd_; cfg >= 0) {
    const std::uint32_t k0 = 0, k1 = 1;
    const std::uint32_t mode = prog_.mode, port = prog_.udp_port;
    bpf_map_update_elem(cfg, &k0, &mode, BPF_ANY);
    bpf_map_update_elem(cfg, &k1, &port, BPF_ANY);
    bpf_map_update_elem(cfg, &config_start, &start_queue_, BPF_ANY);
  }
  const int fd = bpf_program__fd(prog);
  if (!skb_mode_) {
    attach_flags_ = XDP_FLAGS_DRV_MODE;
    if (bpf_xdp_attach(ifindex_, fd, attach_flags_, nullptr) == 0) return {};
    log(LogLevel::warning, "{}: native XDP is not available on {}; falling back to skb (generic) mode", name(), iface_);
  }
  attach_flags_ = XDP_FLAGS_SKB_MODE;
  if (int e = bpf_xdp_attach(ifindex_, fd, attach_flags_, nullptr); e != 0) {
    attach_flags_ = 0;
    return fail("device '{}': key 'iface' value '{}': cannot attach the XDP program: {}", name(), iface_,
                std::strerror(-e));
  }
  skb_mode_ = true;
  return {};
}

Result<void> AfXdpPort::open_socket(std::uint16_t q) {
  QueueSocket& k = socks_[q];
  auto area = arena_->allocate(std::size_t{frames_per_queue} * frame_bytes, arena_->page_bytes(), "umem");
  if (!area) return std::unexpected(area.error());
  k.area = static_cast<std::uint8_t*>(*area);
  auto& rx = *rxq_[q];
  auto& tx = *txq_[q];
  if (auto ok = bind_socket(q); !ok) return ok;
  configure_busy_poll(q);
  if (int e = xsk_socket__update_xskmap(k.xsk, xsks_map_fd_); e != 0)
    return fail("device '{}': queue {}: cannot insert the socket in xsks_map: {}", name(), q, std::strerror(-e));
  // Frames [0, ring_slots) feed RX through the fill ring; the rest are TX's free list.
  std::uint32_t idx = 0;
  if (xsk_ring_prod__reserve(&rx.fill, ring_slots, &idx) != ring_slots)
    return fail("device '{}': queue {}: the fill ring is smaller than expected", name(), q);
  for (std::uint32_t i = 0; i < ring_slots; ++i)
    *xsk_ring_prod__fill_addr(&rx.fill, idx + i) = std::uint64_t{i} * frame_bytes;
  xsk_ring_prod__submit(&rx.fill, ring_slots);
  k.tx_free.resize(ring_slots);
  for (std::uint32_t i = 0; i < ring_slots; ++i) k.tx_free[i] = std::uint64_t{ring_slots + i} * frame_bytes;
  k.rx_stash.resize(ring_slots);
  rx.stash = k.rx_stash.data();
  rx.stashed = 0;
  rx.umem = tx.umem = k.area;
  rx.fd = tx.fd = xsk_socket__fd(k.xsk);
  tx.frame_bytes = frame_bytes;
  tx.free_frames = k.tx_free.data();
  tx.free_count = ring_slots;
  rx.busy_poll = busy_budget_ != 0;
  return {};
}

// Registers the queue's UMEM and binds its socket: zero-copy first in native mode (unless
// force_copy), copy mode after a log line when the driver has no zero-copy support.
Result<void> AfXdpPort::bind_socket(std::uint16_t q) {
  QueueSocket& k = socks_[q];
  auto& rx = *rxq_[q];
  auto& tx = *txq_[q];
  const bool try_zero_copy = !skb_mode_ && !force_copy_;
  for (const bool zero_copy : {true, false}) {
    if (zero_copy && !try_zero_copy) continue;
    xsk_umem_config ucfg{ring_slots, ring_slots, frame_bytes, 0, 0};
    if (int e =
            xsk_umem__create(&k.umem, k.area, std::size_t{frames_per_queue} * frame_bytes, &rx.fill, &tx.comp, &ucfg);
        e != 0)
      return fail("device '{}': queue {}: cannot register the UMEM: {}", name(), q, std::strerror(-e));
    xsk_socket_config scfg{};
    scfg.rx_size = ring_slots;
    scfg.tx_size = ring_slots;
    scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;  // our program is attached already
    scfg.xdp_flags = attach_flags_;
    scfg.bind_flags = XDP_USE_NEED_WAKEUP | (zero_copy ? XDP_ZEROCOPY : XDP_COPY);
    const int e = xsk_socket__create(&k.xsk, iface_.c_str(), start_queue_ + q, k.umem, &rx.rx, &tx.tx, &scfg);
    if (e == 0) {
      zero_copy_ = zero_copy;
      if (q == 0)
        log(LogLevel::info, "{}: AF_XDP sockets on {} in {} mode ({} XDP)", name(), iface_,
            zero_copy ? "zero-copy" : "copy", skb_mode_ ? "skb" : "native");
      return {};
    }
    // Older libbpf/libxdp releases unmapped the UMEM's rings on a failed bind; a fresh UMEM
    // for the retry does not depend on which release is installed.
    k.xsk = nullptr;
    xsk_umem__delete(k.umem);
    k.umem = nullptr;
    if (!zero_copy)
      return fail("device '{}': key 'iface' value '{}': cannot bind an AF_XDP socket to queue {}: {}", name(), iface_,
                  start_queue_ + q, std::strerror(-e));
    if (q == 0)
      log(LogLevel::warning,
          "{}: the driver of {} offers no AF_XDP zero-copy ({}; veth and generic XDP never do): copy mode", name(),
          iface_, std::strerror(-e));
  }
  return {};
}

// Preferred busy polling (kernel 5.11+, DPDK's busy_budget): the socket's NAPI context is run
// by our recvfrom/sendto calls instead of softirq. A kernel that refuses leaves the queue
// interrupt-driven, with a log line.
void AfXdpPort::configure_busy_poll(std::uint16_t q) {
  if (busy_budget_ == 0) return;
  const int fd = xsk_socket__fd(socks_[q].xsk);
  const int one = 1, timeout = busy_poll_timeout_us, budget = static_cast<int>(busy_budget_);
  const char* refused = nullptr;
  if (::setsockopt(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof one) != 0)
    refused = "SO_PREFER_BUSY_POLL";
  else if (::setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &timeout, sizeof timeout) != 0)
    refused = "SO_BUSY_POLL";
  else if (::setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget, sizeof budget) != 0)
    refused = "SO_BUSY_POLL_BUDGET";
  if (!refused) {
    if (q == 0) log(LogLevel::info, "{}: preferred busy polling, budget {}", name(), busy_budget_);
    return;
  }
  const int e = errno;
  const int zero = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &zero, sizeof zero);
  ::setsockopt(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &zero, sizeof zero);
  log(LogLevel::warning, "{}: queue {}: the kernel refused {} ({}): busy polling off (busy_budget=0)", name(), q,
      refused, std::strerror(e));
  busy_budget_ = 0;
}

std::array<std::uint64_t, counter_slots> AfXdpPort::program_counters() const {
  std::array<std::uint64_t, counter_slots> out{};
  if (counters_fd_ < 0) return out;
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return out;
  std::vector<std::uint64_t> per_cpu(static_cast<std::size_t>(cpus));
  for (std::uint32_t k = 0; k < out.size(); ++k)
    if (bpf_map_lookup_elem(counters_fd_, &k, per_cpu.data()) == 0)
      for (auto v : per_cpu) out[k] += v;
  return out;
}

// Queue rules need, for each interface queue i and each other port queue N, a socket bound to
// queue i that port queue N reads (af_xdp_rxtx.hpp). Made when the program has ws_queue_xsks,
// with flow_offload and 2 to max_moving_queues queues; the queue count goes into ws_config
// last, once every socket is in ws_queue_xsks.
Result<void> AfXdpPort::open_moved_sockets() {
  const auto n = static_cast<std::uint16_t>(socks_.size());
  moved_.clear();
  returns_.clear();
  if (!flow_offload_ || queue_xsks_fd_ < 0 || config_fd_ < 0 || n < 2 || n > max_moving_queues) return {};
  moved_.resize(n);
  returns_.resize(n);
  for (auto& m : moved_) m.rx.resize(n - 1u);  // never resized again: RX queues point into it
  for (std::uint16_t to = 0; to < n; ++to)
    for (std::uint16_t from = 0; from < n; ++from)
      if (from != to)
        if (auto ok = open_moved_socket(from, to); !ok) return ok;
  for (std::uint16_t q = 0; q < n; ++q) {
    const std::uint32_t key = std::uint32_t{q} * n + q;
    const int fd = xsk_socket__fd(socks_[q].xsk);
    if (int e = bpf_map_update_elem(queue_xsks_fd_, &key, &fd, BPF_ANY); e != 0)
      return fail("device '{}': queue {}: cannot insert the socket in ws_queue_xsks: {}", name(), q, std::strerror(-e));
    auto& rx = *rxq_[q];
    rx.moving = &moving_;
    rx.moved = moved_[q].rx.data();
    rx.moved_count = n - 1u;
    rx.returns = returns_[q].data();
    rx.return_count = static_cast<std::uint32_t>(returns_[q].size());
  }
  const std::uint32_t queues = n;
  if (int e = bpf_map_update_elem(config_fd_, &config_queues, &queues, BPF_ANY); e != 0)
    return fail("device '{}': cannot write the queue count into ws_config: {}", name(), std::strerror(-e));
  return {};
}

// A socket bound to interface queue `from`, sharing its UMEM, fill and completion rings
// (XDP_SHARED_UMEM on the same queue), whose RX ring port queue `to` reads; frames go back to
// `from` through a ring of their own.
Result<void> AfXdpPort::open_moved_socket(std::uint16_t from, std::uint16_t to) {
  MovedSockets& m = moved_[to];
  af_xdp_pmd::MovedRx& rx = m.rx[m.xsk.size()];
  xsk_socket_config cfg{};
  cfg.rx_size = ring_slots;  // no TX ring: port queue `to` sends on its own socket
  cfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
  cfg.xdp_flags = attach_flags_;
  cfg.bind_flags = 0;  // the kernel takes none with XDP_SHARED_UMEM: the mode is the owner's
  xsk_socket* xsk = nullptr;
  if (int e = xsk_socket__create_shared(&xsk, iface_.c_str(), start_queue_ + from, socks_[from].umem, &rx.rx, nullptr,
                                        &rxq_[from]->fill, &txq_[from]->comp, &cfg);
      e != 0)
    return fail("device '{}': cannot bind a socket sharing queue {}'s UMEM for queue rules to queue {}: {}", name(),
                start_queue_ + from, to, std::strerror(-e));
  m.xsk.push_back(xsk);
  auto back = Ring<std::uint64_t>::create(name() + "_xdp_back",
                                          {.size = ring_slots, .producer = Sync::single, .consumer = Sync::single});
  if (!back) return std::unexpected(back.error());
  rx.umem = socks_[from].area;
  rx.back = back->get();
  returns_[from].push_back(back->get());
  m.back.push_back(std::move(*back));
  const std::uint32_t key = std::uint32_t{from} * static_cast<std::uint32_t>(socks_.size()) + to;
  const int fd = xsk_socket__fd(xsk);
  if (int e = bpf_map_update_elem(queue_xsks_fd_, &key, &fd, BPF_ANY); e != 0)
    return fail("device '{}': cannot insert a socket in ws_queue_xsks: {}", name(), std::strerror(-e));
  return {};
}

void AfXdpPort::close_moved() {
  for (auto& rx : rxq_) {
    rx->moving = nullptr;
    rx->moved_count = rx->return_count = 0;
  }
  const std::uint32_t none = 0;
  if (config_fd_ >= 0) bpf_map_update_elem(config_fd_, &config_queues, &none, BPF_ANY);
  for (auto& m : moved_)
    for (auto* x : m.xsk) xsk_socket__delete(x);
  moved_.clear();
  returns_.clear();
  moving_.store(false, std::memory_order_relaxed);
}

// The rule as ws_rules holds it, or why the program cannot do it.
Result<XdpRule> AfXdpPort::xdp_rule(const FlowRule& rule) const {
  XdpRule r{};
  for (const FlowAction& a : rule.actions) {
    if (a.type == FlowActionType::count) continue;
    if (a.type == FlowActionType::drop) {
      r.action = xdp_rule_drop;
    } else if (a.type == FlowActionType::queue && a.queue < moved_.size()) {
      r.action = xdp_rule_queue;
      r.queue = a.queue;
    } else if (a.type == FlowActionType::queue) {
      return fail("queue rules run in the XDP program with 2 to {} queues and its ws_queue_xsks map",
                  max_moving_queues);
    } else {
      return fail("the XDP program offloads only drop and queue");
    }
  }
  const auto match = flow_exact_match(rule);
  if (!match) return fail("ranges (last) stay in software");
  std::memcpy(r.mask.data(), match->mask.data(), sizeof r.mask);
  std::memcpy(r.value.data(), match->value.data(), sizeof r.value);
  r.layers = match->layers;
  return r;
}

FlowOffloadResult AfXdpPort::do_flow_offload(const FlowRule& rule, std::uint32_t slot) {
  const auto refuse = [](std::string why) { return std::unexpected(FlowOffloadRefusal{false, std::move(why)}); };
  if (!flow_offload_) return refuse("flow_offload=0");
  if (rules_fd_ < 0 || rule_counts_fd_ < 0 || config_fd_ < 0) return refuse("the XDP program takes no rules");
  if (slot >= xdp_max_rules) return refuse(fmt::format("the XDP program holds {} rules", xdp_max_rules));
  const auto r = xdp_rule(rule);
  if (!r) return refuse(r.error().message);
  // RX reads the moved rings from now on; the program moves nothing before the rule is whole.
  if (r->action == xdp_rule_queue) moving_.store(true, std::memory_order_relaxed);
  const int cpus = libbpf_num_possible_cpus();
  const std::vector<XdpRuleCount> zero(static_cast<std::size_t>(std::max(cpus, 1)));
  const std::uint32_t n = slot + 1;
  int e = bpf_map_update_elem(rules_fd_, &slot, &*r, BPF_ANY);
  if (e == 0) e = bpf_map_update_elem(rule_counts_fd_, &slot, zero.data(), BPF_ANY);
  if (e == 0) e = bpf_map_update_elem(config_fd_, &config_rules, &n, BPF_ANY);  // last: the rule is whole
  if (e != 0)
    return std::unexpected(FlowOffloadRefusal{
        true,
        fmt::format("device '{}': cannot write the rule into the XDP program's maps: {}", name(), std::strerror(-e))});
  return FlowOffload{FlowPlace::kernel_xdp, slot};
}

void AfXdpPort::do_flow_unoffload(const FlowOffload& offload) {
  // The FlowTable takes rules back from the last slot: the program stops at this one.
  const auto n = static_cast<std::uint32_t>(offload.handle);
  if (config_fd_ >= 0) bpf_map_update_elem(config_fd_, &config_rules, &n, BPF_ANY);
}

FlowCounts AfXdpPort::do_flow_offload_counts(const FlowOffload& offload) const {
  FlowCounts out;
  const int cpus = libbpf_num_possible_cpus();
  if (rule_counts_fd_ < 0 || cpus <= 0) return out;
  std::vector<XdpRuleCount> per_cpu(static_cast<std::size_t>(cpus));
  const auto slot = static_cast<std::uint32_t>(offload.handle);
  if (bpf_map_lookup_elem(rule_counts_fd_, &slot, per_cpu.data()) != 0) return out;
  for (const auto& c : per_cpu) {
    out.hits += c.packets;
    out.bytes += c.bytes;
  }
  return out;
}

void AfXdpPort::close_all() {
  close_moved();  // before the owners: the moved sockets hold references on their UMEMs
  for (auto& k : socks_) {
    if (k.xsk) xsk_socket__delete(k.xsk);
    if (k.umem) xsk_umem__delete(k.umem);
  }
  socks_.clear();
  rxq_.clear();
  txq_.clear();
  if (attach_flags_) bpf_xdp_detach(ifindex_, attach_flags_, nullptr);
  attach_flags_ = 0;
  if (obj_) bpf_object__close(obj_);
  obj_ = nullptr;
  xsks_map_fd_ = counters_fd_ = config_fd_ = rules_fd_ = rule_counts_fd_ = queue_xsks_fd_ = -1;
  arena_.reset();
}

Result<ProgChoice> parse_prog(const DevArgs& args) {
  ProgChoice p;
  const std::string v = args.get_string("xdp_prog", "redirect_all");
  if (v == "redirect_all") return p;
  if (v == "drop_all") {
    p.mode = mode_drop_all;
    return p;
  }
  if (v.starts_with("drop_udp_dport:")) {
    const std::string_view n = std::string_view(v).substr(15);
    std::uint32_t port = 0;
    auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), port);
    if (ec != std::errc() || end != n.data() + n.size() || port == 0 || port > 65535)
      return fail("device '{}': key 'xdp_prog' value '{}': expected drop_udp_dport:N with N in [1, 65535]", args.name(),
                  v);
    p.mode = mode_drop_udp_dport;
    p.udp_port = port;
    return p;
  }
  if (v.find('/') != std::string::npos || v.ends_with(".o")) {
    if (::access(v.c_str(), R_OK) != 0)
      return fail("device '{}': key 'xdp_prog' value '{}': cannot read the file", args.name(), v);
    p.object_path = v;
    return p;
  }
  return fail(
      "device '{}': key 'xdp_prog' value '{}': expected redirect_all, drop_all, drop_udp_dport:N or an "
      "object file path",
      args.name(), v);
}

class AfXdpDriver final : public Driver {
 public:
  std::string_view name() const override { return "net_af_xdp"; }
  std::span<const ParamSpec> params() const override { return af_xdp_params; }

  Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv&) override {
    const std::string iface = args.get_string("iface", "");
    if (iface.empty()) return fail("device '{}': key 'iface' is required (the kernel interface to use)", args.name());
    const unsigned ifindex = ::if_nametoindex(iface.c_str());
    if (ifindex == 0)
      return fail("device '{}': key 'iface' value '{}': no such interface ({})", args.name(), iface,
                  std::strerror(errno));
    auto start = args.get_uint("start_queue", 0, 0, 1023);
    if (!start) return std::unexpected(start.error());
    auto count = args.get_uint("queue_count", 1, 1, port_max_queues);
    if (!count) return std::unexpected(count.error());
    const std::string mode = args.get_string("xdp_mode", "native");
    if (mode != "native" && mode != "skb")
      return fail("device '{}': key 'xdp_mode' value '{}': expected native or skb", args.name(), mode);
    auto prog = parse_prog(args);
    if (!prog) return std::unexpected(prog.error());
    auto budget = args.get_uint("busy_budget", 64, 0, max_busy_budget);
    if (!budget) return std::unexpected(budget.error());
    auto force_copy = args.get_bool("force_copy", false);
    if (!force_copy) return std::unexpected(force_copy.error());
    auto offload = args.get_bool("flow_offload", true);
    if (!offload) return std::unexpected(offload.error());
    const Options opt{mode == "skb", *force_copy, static_cast<std::uint32_t>(*budget), *offload};
    return std::make_unique<AfXdpPort>(args.name(), iface, static_cast<int>(ifindex),
                                       static_cast<std::uint32_t>(*start), static_cast<std::uint16_t>(*count), opt,
                                       std::move(*prog));
  }
};

}  // namespace

std::unique_ptr<Driver> make_af_xdp_driver() { return std::make_unique<AfXdpDriver>(); }

}  // namespace ws
