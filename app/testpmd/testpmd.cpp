// SPDX-License-Identifier: BSD-3-Clause
// Testpmd set-up, forwarding start/stop and teardown, mirroring dpdk-testpmd's sequence.
#include "app/testpmd/testpmd.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <thread>

#include "app/testpmd/prompt/verbose_port.hpp"
#include "ws/core/log.hpp"
#include "ws/drivers/builtin.hpp"

namespace ws::testpmd {
namespace {

// dpdk-testpmd's default pool size: RX and TX descriptor maxima, per-lcore caches and a burst,
// for each of RTE_MAX_ETHPORTS ports.
std::uint32_t default_mbuf_count(const AppOptions& app) {
  return (2048 + app.nb_cores * app.mbcache + 2048 + max_burst_slots) * 32;
}

std::uint16_t tx_port_for(Topology t, std::size_t rxp, std::size_t n) {
  switch (t) {
    case Topology::loop:
      return static_cast<std::uint16_t>(rxp);
    case Topology::chained:
      return static_cast<std::uint16_t>((rxp + 1) % n);
    case Topology::paired:
      break;
  }
  if (rxp & 1) return static_cast<std::uint16_t>(rxp - 1);
  return static_cast<std::uint16_t>(rxp + 1 < n ? rxp + 1 : rxp);
}

// flowgen builds one segment of the --txpkts total (less the 4-byte FCS, as dpdk-testpmd).
Result<void> check_mode_fits(const Engine& engine, const AppOptions& app) {
  std::uint32_t length = 0;
  for (auto l : app.txpkts) length += l;
  const std::uint32_t room = app.mbuf_size - mbuf_default_headroom;
  if (engine.name == "flowgen" && length - 4 > room)
    return fail(
        "flowgen: --txpkts total {} bytes does not fit one mbuf ({} bytes of data room); lower --txpkts or "
        "raise --mbuf-size",
        length, room);
  return {};
}

}  // namespace

Result<std::unique_ptr<Testpmd>> Testpmd::create(EalOptions eal, AppOptions app) {
  // What the options alone decide is checked before the Eal probes devices or maps memory.
  auto fwd_lcores = choose_fwd_lcores(eal, app);
  if (!fwd_lcores) return std::unexpected(fwd_lcores.error());
  const Engine* engine = find_engine(app.forward_mode);
  if (!engine) return fail("--forward-mode={}: unknown mode", app.forward_mode);
  if (auto ok = check_mode_fits(*engine, app); !ok) return std::unexpected(ok.error());
  const PktmbufPool::Options pool_options{
      "mb_pool_0", app.total_num_mbufs ? app.total_num_mbufs : default_mbuf_count(app), app.mbcache, app.mbuf_size, 0};
  // The pool before the ports: a vhost-user frontend may connect as soon as its port exists, and
  // link events count from each port's start, so the time between the two is kept short.
  PktmbufPool* pool = nullptr;
  auto env = Eal::create(eal, PktmbufPool::memory_bytes(pool_options),
                         fmt::format("{} mbufs of {} bytes; raise -m or lower --total-num-mbufs", pool_options.count,
                                     pool_options.data_room_bytes),
                         [&](Eal& e) -> Result<void> {
                           std::printf(
                               "testpmd: create a new mbuf pool <mb_pool_0>: n=%u, size=%u, socket=0 (%s "
                               "pages)\n",
                               pool_options.count, app.mbuf_size, e.arena().huge() ? "2 MiB" : "4 KiB");
                           auto p = e.create_pktmbuf_pool(pool_options);
                           if (!p) return std::unexpected(p.error());
                           pool = *p;
                           return {};
                         });
  if (!env) return std::unexpected(env.error());
  auto tp = std::unique_ptr<Testpmd>(new Testpmd(std::move(eal), std::move(app), std::move(*env)));
  tp->fwd_lcore_ids_ = std::move(*fwd_lcores);
  tp->engine_ = engine;
  tp->pool_ = pool;
  if (auto ok = tp->configure_ports(); !ok) return std::unexpected(ok.error());
  if (auto ok = tp->choose_fwd_ports(); !ok) return std::unexpected(ok.error());
  if (auto ok = tp->setup_streams(); !ok) return std::unexpected(ok.error());
  tp->start_link_monitor();
  return tp;
}

Testpmd::~Testpmd() {
  if (!shut_down_) (void)shutdown();
}

// As dpdk-testpmd's set_fwd_lcores_mask: --coremask names forwarding lcores, which must be
// given to the EAL and cannot be the main one; without it, every lcore but the main one.
Result<std::vector<unsigned>> Testpmd::choose_fwd_lcores(const EalOptions& eal, AppOptions& app) {
  std::vector<unsigned> ids;
  for (const auto& l : eal.lcores) {
    if (app.coremask && (l.id >= 64 || (*app.coremask >> l.id & 1) == 0)) continue;
    if (l.id == eal.main_lcore) {
      if (app.coremask)
        return fail(
            "--coremask={:#x}: lcore {} cannot be masked on for running packet forwarding, which is the main "
            "lcore and reserved for command line parsing only",
            *app.coremask, l.id);
      continue;
    }
    ids.push_back(l.id);
  }
  if (app.coremask) {
    for (unsigned id = 0; id < 64; ++id)
      if ((*app.coremask >> id & 1) &&
          std::none_of(eal.lcores.begin(), eal.lcores.end(), [&](const LcoreConfig& l) { return l.id == id; }))
        return fail("--coremask={:#x}: lcore {} is not enabled (give it to the EAL with -l or --lcores)", *app.coremask,
                    id);
    // As dpdk-testpmd, the mask also sets the number of forwarding cores, unless --nb-cores does.
    if (!app.nb_cores_given) app.nb_cores = static_cast<unsigned>(ids.size());
  }
  if (app.nb_cores > ids.size())
    return fail(
        "--nb-cores={}: only {} forwarding lcore(s) available (the {} lcores given minus the main lcore{}); "
        "add lcores with -l or --lcores",
        app.nb_cores, ids.size(), eal.lcores.size(), app.coremask ? ", within --coremask" : "");
  return ids;
}

Result<void> Testpmd::choose_fwd_ports() {
  fwd_ports_.clear();
  if (app_.fwd_ports.empty()) {
    for (std::uint16_t p = 0; p < ports_.size(); ++p)
      if (!detached(p)) fwd_ports_.push_back(p);
  } else {
    for (std::uint16_t p : app_.fwd_ports) {
      if (p >= ports_.size() || detached(p))
        return fail("--portmask/--portlist: port {} does not exist ({} port(s): 0 to {})", p, ports_.size(),
                    ports_.size() - 1);
      fwd_ports_.push_back(p);
    }
  }
  if (app_.nb_ports) {
    if (*app_.nb_ports > fwd_ports_.size())
      return fail("--nb-ports={}: only {} forwarding ports exist", *app_.nb_ports, fwd_ports_.size());
    fwd_ports_.resize(*app_.nb_ports);
  }
  return {};
}

// A port just made (at start-up or by `port attach`) configured with the command line's
// settings: queues, offloads, MTU, and the csum engine's per-port settings.
Result<void> Testpmd::configure_new_port(Port& p) {
  std::printf("Configuring Port %u (socket 0)\n", p.id());
  const std::string where = fmt::format("port {} ({})", p.id(), p.name());
  // --tx-offloads seeds the csum engine's per-port settings, as `csum set ip|udp|tcp hw` would.
  CsumConfig& csum = fwd_config_.csum[p.id()];
  csum = {};
  csum.ip_hw = (app_.tx_offloads & tx_offload::ipv4_cksum) != 0;
  csum.udp_hw = (app_.tx_offloads & tx_offload::udp_cksum) != 0;
  csum.tcp_hw = (app_.tx_offloads & tx_offload::tcp_cksum) != 0;
  PortConfig config = port_config(p);
  config.tx_offloads |= app_.tx_offloads;
  config.rx_offloads |= app_.rx_offloads;
  if (app_.max_pkt_len) config.mtu = static_cast<std::uint16_t>(std::min<std::uint32_t>(app_.max_pkt_len - 18, 65535));
  if (auto ok = p.configure(config); !ok) {
    // dpdk-testpmd's lines, which scripts match, then the reason it exits.
    std::fprintf(stderr, "%s\nFail to configure port %u\n", ok.error().message.c_str(), p.id());
    return fail("Start ports failed: port {} ({}): {}", p.id(), p.name(), ok.error().message);
  }
  for (std::uint16_t q = 0; q < app_.rxq; ++q)
    if (auto ok = p.setup_rx_queue(q, {app_.rxd, pool_}); !ok) return with_context(ok.error(), where);
  for (std::uint16_t q = 0; q < app_.txq; ++q)
    if (auto ok = p.setup_tx_queue(q, {app_.txd}); !ok) return with_context(ok.error(), where);
  fwd_config_.port_mac[p.id()] = p.mac();
  return {};
}

Result<void> Testpmd::configure_ports() {
  if (ports_.empty())
    return fail(
        "no ports: give at least one device with --vdev (e.g. --vdev net_null0 --vdev net_null1) or -a "
        "(a PCI device bound to uio_pci_generic, e.g. -a 0000:00:04.0)");
  if (ports_.size() > max_ports) return fail("{} ports given; at most {} are supported", ports_.size(), max_ports);
  for (auto& p : ports_)
    if (auto ok = configure_new_port(*p); !ok) return ok;
  for (auto& p : ports_) {
    if (!app_.start_devices) break;  // --disable-device-start: "port start" does it
    if (auto ok = p->start(); !ok) {
      for (auto& started : ports_) started->stop();
      return std::unexpected(ok.error());
    }
    std::printf("Port %u: %s\n", p->id(), p->mac().to_string().c_str());
    link_at_start_.resize(p->id() + 1u, false);
    link_at_start_[p->id()] = p->link().up;
  }
  // --display-xstats: as dpdk-testpmd, names a port lacks are reported once and then skipped.
  for (auto& p : ports_) {
    const std::vector<XStat> all = p->xstats();
    for (const std::string& name : app_.display_xstats)
      if (std::none_of(all.begin(), all.end(), [&](const XStat& x) { return x.name == name; }))
        std::printf("No xstat '%s' on port %u - skip it\n", name.c_str(), p->id());
  }
  return {};
}

Result<void> Testpmd::setup_streams() {
  const std::size_t nports = fwd_ports_.size();
  fwd_config_.burst = app_.burst;
  fwd_config_.txpkts = app_.txpkts;
  fwd_config_.tx_pkt_length = 0;
  for (auto l : app_.txpkts) fwd_config_.tx_pkt_length += l;
  fwd_config_.flowgen_clones = app_.flowgen_clones;
  fwd_config_.flowgen_flows = app_.flowgen_flows;
  fwd_config_.rx_cksum = app_.enable_rx_cksum;
  for (std::size_t p = 0; p < max_ports; ++p) {
    // dpdk-testpmd's default peer: 02:00:00:00:00:<port>
    fwd_config_.peer_mac[p] = MacAddress{{0x02, 0, 0, 0, 0, static_cast<std::uint8_t>(p)}};
    if (p < ports_.size()) fwd_config_.port_mac[p] = ports_[p]->mac();
  }
  for (const auto& [port, mac] : app_.eth_peers) fwd_config_.peer_mac[port] = mac;
  fwd_config_.rx_ptype_counts = app_.rx_ptype_counts;
  fwd_config_.record_burst_stats = app_.record_burst_stats;
  fwd_config_.tx_ip_src = app_.tx_ip_src;
  fwd_config_.tx_ip_dst = app_.tx_ip_dst;
  fwd_config_.tx_udp_src = app_.tx_udp_src;
  fwd_config_.tx_udp_dst = app_.tx_udp_dst;
  fwd_config_.txonly_multi_flow = app_.txonly_multi_flow;
  for (const auto& [port, ip] : app_.icmpecho_ips) {  // port max_ports: every port
    for (std::size_t p = 0; p < max_ports; ++p)
      if (port == p || (port == max_ports && !app_.icmpecho_ips.contains(static_cast<std::uint16_t>(p))))
        fwd_config_.icmpecho_ip_be[p] = ip;
  }
  // As dpdk-testpmd's rss_fwd_config_setup: queue-major, port-minor, over min(rxq, txq)
  // queues with TX queue = RX queue, so that no two streams (and lcores) share a TX queue.
  const std::uint16_t queues = std::min(app_.rxq, app_.txq);
  for (std::uint16_t q = 0; q < queues; ++q) {
    for (std::size_t i = 0; i < nports; ++i) {
      auto s = std::make_unique<Stream>();
      const std::uint16_t rxp = fwd_ports_[i];
      const std::uint16_t txp = fwd_ports_[tx_port_for(app_.topology, i, nports)];
      s->rx_port = ports_[rxp].get();
      s->tx_port = ports_[txp].get();
      s->rx_port_id = rxp;
      s->tx_port_id = txp;
      s->rx_queue = q;
      s->tx_queue = q;
      s->pool = pool_;
      s->config = &fwd_config_;
      s->udp_header = udp_frame_header(fwd_config_, txp, fwd_config_.tx_pkt_length);
      streams_.push_back(std::move(s));
    }
  }
  fwd_core_count_ = std::min<unsigned>(app_.nb_cores, static_cast<unsigned>(streams_.size()));
  if (fwd_core_count_ < app_.nb_cores)
    std::printf("Warning: nb_fwd_lcores is %u, only %zu streams to poll: using %u forwarding cores\n", app_.nb_cores,
                streams_.size(), fwd_core_count_);
  return {};
}

// As dpdk-testpmd's flush_fwd_rx_queues: what the forwarding ports received while no one
// polled (before start, or between stop and start) is freed, twice 10 ms apart, so that the
// run's counts start from an empty pipe. --no-flush-rx keeps it (pcap replays use that).
void Testpmd::flush_rx_queues() {
  Mbuf* pkts[max_burst_slots];
  for (int pass = 0; pass < 2; ++pass) {
    for (std::uint16_t p : fwd_ports_) {
      for (std::uint16_t q = 0; q < ports_[p]->config().rx_queues; ++q) {
        // Bounded, as dpdk-testpmd's one-second timer: a port that keeps receiving stops the flush.
        for (int burst = 0; burst < 1024; ++burst) {
          const std::uint16_t n = ports_[p]->rx_burst(q, pkts, max_burst_slots);
          if (n == 0) break;
          mbuf_free_bulk(std::span<Mbuf* const>(pkts, n));
        }
      }
    }
    if (pass == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Result<void> Testpmd::set_forward_mode(std::string_view mode) {
  if (forwarding()) return fail("stop forwarding before changing the mode");
  const Engine* e = find_engine(mode);
  if (!e) return fail("forward mode '{}' does not exist (accepted: {})", mode, engine_names());
  engine_ = e;
  app_.forward_mode = std::string(mode);
  return {};
}

Result<void> Testpmd::start_forwarding(unsigned tx_first_bursts) {
  if (forwarding()) return fail("packet forwarding already started");
  if (auto ok = check_mode_fits(*engine_, app_); !ok) return ok;
  if (reconfig_pending()) return fail("a port configuration is pending: run 'port start all' first");
  for (std::uint16_t p : fwd_ports_)
    if (!ports_[p]->started()) return fail("Not all ports were started (port {} is stopped: 'port start all')", p);
  if (app_.flush_rx) flush_rx_queues();
  // verbose > 0: streams receive and/or send through proxies that print each burst; otherwise
  // straight through the port, so the plain loop carries no verbose check.
  make_verbose_proxies();
  for (auto& s : streams_) {
    s->rx_port = rx_source(s->rx_port_id);
    s->tx_port = tx_target(s->tx_port_id);
    for (Counter* c : {&s->rx_packets, &s->tx_packets, &s->fwd_dropped, &s->generated, &s->consumed, &s->busy_cycles,
                       &s->busy_bursts, &s->rx_bad_ip_csum, &s->rx_bad_l4_csum})
      c->reset();
    for (Counter& c : s->ptypes) c.reset();
    s->rx_bursts.reset();
    s->tx_bursts.reset();
  }
  start_.clear();
  for (auto& p : ports_) start_.push_back({p->stats(), rdtsc()});
  last_show_ = start_;
  // --tx-first: each stream sends bursts built by txonly before the engine takes over.
  const Engine tx = txonly_engine();
  for (unsigned b = 0; b < tx_first_bursts; ++b)
    for (auto& s : streams_) tx.forward_once(*s);
  fwd_lcores_.clear();
  for (const CorePlan& plan : core_plan()) {
    auto lc = std::make_unique<FwdLcore>();
    lc->lcore_id = plan.lcore_id;
    lc->record_cycles = app_.record_core_cycles;
    lc->streams = plan.streams;
    for (Stream* st : plan.streams) st->lcore_id = static_cast<std::uint16_t>(plan.lcore_id);
    fwd_lcores_.push_back(std::move(lc));
  }
  start_tsc_ = rdtsc();
  stop_tsc_ = 0;
  launch_lcores();
  std::printf(
      "%s packet forwarding - ports=%zu - cores=%u - streams=%zu - NUMA support %s, MP allocation mode: native\n",
      std::string(engine_->name).c_str(), fwd_ports_.size(), fwd_core_count_, streams_.size(),
      app_.numa ? "enabled" : "disabled");
  std::fflush(stdout);
  return {};
}

void Testpmd::stop_forwarding() {
  if (!forwarding()) return;
  std::printf("Telling cores to stop...\n");
  for (auto& lc : fwd_lcores_) lc->stop.store(true, std::memory_order_relaxed);
  std::printf("Waiting for lcores to finish...\n");
  lcores_.clear();  // joins
  stop_tsc_ = rdtsc();
  print_forward_stats();
  std::printf("\nDone.\n");
  std::fflush(stdout);
}

std::array<std::uint64_t, ptype_class_names.size()> Testpmd::ptype_counts(std::size_t port) const {
  std::array<std::uint64_t, ptype_class_names.size()> out{};
  for (const auto& s : streams_)
    if (s->rx_port_id == port)
      for (std::size_t k = 0; k < out.size(); ++k) out[k] += s->ptypes[k].read();
  return out;
}

FwdTotals Testpmd::totals() const {
  FwdTotals t;
  for (const auto& s : streams_) {
    t.rx += s->rx_packets.read();
    t.tx += s->tx_packets.read();
    t.dropped += s->fwd_dropped.read();
    t.generated += s->generated.read();
    t.consumed += s->consumed.read();
    t.bad_ip_csum += s->rx_bad_ip_csum.read();
    t.bad_l4_csum += s->rx_bad_l4_csum.read();
    t.busy_cycles += s->busy_cycles.read();
  }
  return t;
}

double Testpmd::forwarding_seconds() const {
  if (start_tsc_ == 0) return 0;
  const std::uint64_t end = stop_tsc_ ? stop_tsc_ : rdtsc();
  return static_cast<double>(end - start_tsc_) / static_cast<double>(tsc_hz());
}

std::uint64_t Testpmd::forwarded_packets() const {
  const FwdTotals t = totals();
  const bool generator = app_.forward_mode == "txonly" || app_.forward_mode == "flowgen";
  return generator ? t.tx : t.rx;
}

void Testpmd::start_link_monitor() {
  if (!app_.lsc_interrupt || (app_.event_print_mask & event_type::intr_lsc) == 0 || link_monitor_.joinable()) return;
  link_monitor_stop_.store(false, std::memory_order_relaxed);
  // As DPDK's control threads: on the CPUs no lcore of ours runs on, when there are some, so that
  // polling links never takes time from an lcore or from a driver's control thread sharing its CPU.
  std::vector<unsigned> spare = available_cpus();
  for (const auto& l : eal_.lcores)
    for (unsigned cpu : l.cpus) spare.erase(std::remove(spare.begin(), spare.end(), cpu), spare.end());
  // Ports that have a link event fd (PCI devices' link interrupts) wake the thread at once; the
  // others' links are looked at every 100 ms.
  std::vector<pollfd> fds;
  for (const auto& p : ports_)
    if (auto fd = p->link_event_fd()) fds.push_back({*fd, POLLIN, 0});
  link_monitor_ = std::thread([this, spare, fds]() mutable {
    if (!spare.empty()) (void)pin_current_thread(spare);
    // From the links as each port started, not as they are now: a peer that brought a link up
    // before this thread ran (a vhost-user frontend connecting at once) is an event, as DPDK's
    // interrupt reports it.
    std::vector<bool> up = link_at_start_;
    while (!link_monitor_stop_.load(std::memory_order_relaxed)) {
      wait_link_events(fds);
      std::vector<std::size_t> changed;
      {
        // A command holding the mutex may be reconfiguring a port: look again next time.
        std::unique_lock lock(control_mutex_, std::try_to_lock);
        if (!lock.owns_lock()) continue;
        up.resize(ports_.size(), false);  // `port attach` may add ports
        for (std::size_t i = 0; i < ports_.size(); ++i) {
          const bool now = ports_[i]->link().up;
          if (now == up[i]) continue;
          up[i] = now;
          changed.push_back(i);
        }
      }
      // Printed without the mutex: stdout may be a pipe nobody reads for a while.
      for (std::size_t i : changed) std::printf("\nPort %zu: link state change event\n", i);
      if (!changed.empty()) std::fflush(stdout);
    }
  });
}

// Up to 100 ms: until one of `fds` fires (an eventfd's count is read here; the port's link()
// consumes the rest of the event), or the time is up.
void Testpmd::wait_link_events(std::vector<pollfd>& fds) {
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return;
  }
  if (::poll(fds.data(), fds.size(), 100) <= 0) return;
  for (pollfd& f : fds) {
    std::uint64_t count = 0;
    if ((f.revents & POLLIN) != 0) (void)!::read(f.fd, &count, sizeof count);
    f.revents = 0;
  }
}

void Testpmd::stop_link_monitor() {
  link_monitor_stop_.store(true, std::memory_order_relaxed);
  if (link_monitor_.joinable()) link_monitor_.join();
}

Result<void> Testpmd::shutdown() {
  stop_link_monitor();
  if (shut_down_) return {};
  shut_down_ = true;
  if (!pool_) return {};  // create() failed before the pool (and so any port) existed
  stop_forwarding();
  rx_taps_.clear();  // closes capture files
  for (auto& p : ports_) {
    std::printf("\nStopping port %u...\n", p->id());
    p->stop();
  }
  for (auto& p : ports_) p->release_mbufs();
  pool_->mempool().flush_caches();
  leaked_ = pool_->in_use();
  std::printf("\nBye...\n");
  std::fflush(stdout);
  if (leaked_ != 0)
    return fail("mbuf pool audit: {} of {} mbufs were not returned to pool mb_pool_0", leaked_,
                pool_->mempool().count());
  return {};
}

}  // namespace ws::testpmd

namespace ws::testpmd {

std::vector<CorePlan> Testpmd::core_plan() const {
  const std::vector<unsigned>& fwd_ids = fwd_lcore_ids_;
  std::vector<CorePlan> plan;
  if (fwd_core_count_ == 0) return plan;
  // Spread streams over lcores as dpdk-testpmd: the last lcores take one extra when uneven.
  const std::size_t per = streams_.size() / fwd_core_count_;
  const std::size_t extra = streams_.size() % fwd_core_count_;
  std::size_t sm = 0;
  for (unsigned i = 0; i < fwd_core_count_; ++i) {
    CorePlan c{fwd_ids[i], {}};
    const std::size_t take = per + (i >= fwd_core_count_ - extra ? 1 : 0);
    for (std::size_t k = 0; k < take; ++k) c.streams.push_back(streams_[sm++].get());
    plan.push_back(std::move(c));
  }
  return plan;
}

// dpdk-testpmd's message for settings the lcores read while they run.
static Result<void> refuse_while_forwarding(bool forwarding) {
  if (forwarding) return fail("Please stop forwarding first");
  return {};
}

Result<void> Testpmd::set_burst(std::uint16_t n) {
  if (auto ok = refuse_while_forwarding(forwarding()); !ok) return ok;
  if (n == 0 || n > max_burst) return fail("burst {} out of range, accepted [1, {}]", n, max_burst);
  app_.burst = fwd_config_.burst = n;
  return {};
}

Result<void> Testpmd::set_nb_cores(unsigned n) {
  if (auto ok = refuse_while_forwarding(forwarding()); !ok) return ok;
  const auto available = static_cast<unsigned>(fwd_lcore_ids_.size());
  if (n == 0 || n > available)
    return fail("nbcore {}: accepted [1, {}] (the forwarding lcores given with -l/--lcores)", n, available);
  app_.nb_cores = n;
  fwd_core_count_ = std::min<unsigned>(n, static_cast<unsigned>(streams_.size()));
  if (fwd_core_count_ < n)
    std::printf("Warning: only %zu streams to poll: using %u forwarding cores\n", streams_.size(), fwd_core_count_);
  return {};
}

Result<void> Testpmd::set_txpkts(std::string_view lengths) {
  if (auto ok = refuse_while_forwarding(forwarding()); !ok) return ok;
  // The command-line parser holds the rules (segment count, header room, mbuf fit).
  const std::vector<std::string> args = {"--txpkts=" + std::string(lengths),
                                         fmt::format("--mbuf-size={}", app_.mbuf_size)};
  auto parsed = parse_app_args(args);
  if (!parsed) return std::unexpected(parsed.error());
  AppOptions next = app_;
  next.txpkts = parsed->txpkts;
  if (auto ok = check_mode_fits(*engine_, next); !ok) return ok;
  app_.txpkts = fwd_config_.txpkts = next.txpkts;
  fwd_config_.tx_pkt_length = 0;
  for (auto l : app_.txpkts) fwd_config_.tx_pkt_length += l;
  for (auto& s : streams_) s->udp_header = udp_frame_header(fwd_config_, s->tx_port_id, fwd_config_.tx_pkt_length);
  return {};
}

Result<void> Testpmd::set_flowgen_clones(std::uint16_t n) {
  if (auto ok = refuse_while_forwarding(forwarding()); !ok) return ok;
  if (n > max_burst) return fail("flowgen clones {} out of range, accepted [0, {}]", n, max_burst);
  app_.flowgen_clones = fwd_config_.flowgen_clones = n;
  return {};
}

Result<void> Testpmd::set_promiscuous(std::optional<std::uint16_t> port, bool on) {
  for (auto& p : ports_)
    if (!port || p->id() == *port)
      if (auto ok = p->set_promiscuous(on); !ok) return ok;
  return {};
}

Result<void> Testpmd::set_nb_ports(unsigned n) {
  if (auto ok = refuse_while_forwarding(forwarding()); !ok) return ok;
  const std::size_t configured = app_.fwd_ports.empty() ? ports_.size() : app_.fwd_ports.size();
  if (n == 0 || n > configured)
    return fail("nbport {}: accepted [1, {}] (the forwarding ports configured)", n, configured);
  const auto before = app_.nb_ports;
  app_.nb_ports = n;
  if (auto ok = choose_fwd_ports(); !ok) {
    app_.nb_ports = before;
    return ok;
  }
  streams_.clear();
  return setup_streams();
}

Result<void> Testpmd::set_fwd_port_list(std::vector<std::uint16_t> ports) {
  if (auto ok = refuse_while_forwarding(forwarding()); !ok) return ok;
  for (std::uint16_t p : ports)
    if (p >= ports_.size()) return fail("portlist: port {} does not exist ({} port(s))", p, ports_.size());
  const std::size_t previous = fwd_ports_.size();
  app_.fwd_ports = std::move(ports);
  app_.nb_ports.reset();
  if (auto ok = choose_fwd_ports(); !ok) return ok;
  // As dpdk-testpmd's set_fwd_ports_list: the new list also sets the forwarding port count.
  if (previous != fwd_ports_.size())
    std::printf("previous number of forwarding ports %zu - changed to number of configured ports %zu\n", previous,
                fwd_ports_.size());
  streams_.clear();
  return setup_streams();
}

Result<void> Testpmd::set_eth_peer(std::uint16_t port, const MacAddress& mac) {
  if (auto ok = refuse_while_forwarding(forwarding()); !ok) return ok;
  if (port >= max_ports) return fail("eth-peer: port {} is not below {}", port, max_ports);
  app_.eth_peers[port] = mac;
  fwd_config_.peer_mac[port] = mac;
  for (auto& s : streams_) s->udp_header = udp_frame_header(fwd_config_, s->tx_port_id, fwd_config_.tx_pkt_length);
  return {};
}

Result<void> Testpmd::set_port_mac(std::uint16_t port, const MacAddress& mac) {
  if (auto ok = refuse_while_forwarding(forwarding()); !ok) return ok;
  if (auto ok = ports_[port]->set_mac(mac); !ok) return ok;
  fwd_config_.port_mac[port] = ports_[port]->mac();  // the source mac and txonly put in frames
  for (auto& s : streams_) s->udp_header = udp_frame_header(fwd_config_, s->tx_port_id, fwd_config_.tx_pkt_length);
  return {};
}

Result<void> Testpmd::stop_ports(std::optional<std::uint16_t> port) {
  // As dpdk-testpmd: a port in the forwarding configuration is not pulled from under the lcores.
  if (forwarding()) return fail("Please stop forwarding first");
  std::printf("Stopping ports...\n");
  for (auto& p : ports_)
    if (!port || p->id() == *port) p->stop();
  std::printf("Done\n");
  return {};
}

Result<void> Testpmd::reconfigure_port(Port& p) {
  const std::string where = fmt::format("port {} ({})", p.id(), p.name());
  p.release_mbufs();
  if (auto ok = p.configure(port_config(p)); !ok) return ok;
  for (std::uint16_t q = 0; q < app_.rxq; ++q)
    if (auto ok = p.setup_rx_queue(q, {app_.rxd, pool_}); !ok) return with_context(ok.error(), where);
  for (std::uint16_t q = 0; q < app_.txq; ++q)
    if (auto ok = p.setup_tx_queue(q, {app_.txd}); !ok) return with_context(ok.error(), where);
  return {};
}

Result<void> Testpmd::start_ports(std::optional<std::uint16_t> port) {
  if (forwarding()) return fail("Please stop forwarding first");
  reconfig_.resize(ports_.size(), false);
  bool rebuilt = false;
  for (auto& p : ports_) {
    if (port && p->id() != *port) continue;
    if (closed(p->id())) return fail("Port {} is closed: 'port reset {}' configures it again", p->id(), p->id());
    if (reconfig_[p->id()]) {
      std::printf("Configuring Port %u (socket 0)\n", p->id());
      if (auto ok = reconfigure_port(*p); !ok) return ok;
      reconfig_[p->id()] = false;
      rebuilt = true;
    }
    if (auto ok = p->start(); !ok) return ok;
    std::printf("Port %u: %s\n", p->id(), p->mac().to_string().c_str());
  }
  // Streams name queues: rebuild them once every port carries the new queue counts.
  if (rebuilt && !reconfig_pending()) {
    streams_.clear();
    if (auto ok = setup_streams(); !ok) return ok;
  }
  std::printf("Done\n");
  return {};
}

Result<void> Testpmd::close_ports(std::optional<std::uint16_t> port) {
  if (forwarding()) return fail("Please stop forwarding first");
  for (auto& p : ports_)
    if ((!port || p->id() == *port) && p->started()) return fail("Cannot close started device (port {})", p->id());
  std::printf("Closing ports...\n");
  closed_.resize(ports_.size(), false);
  for (auto& p : ports_) {
    if ((port && p->id() != *port) || closed_[p->id()]) continue;
    p->release_mbufs();
    closed_[p->id()] = true;
    std::printf("Port %u is closed\n", p->id());
  }
  std::printf("Done\n");
  return {};
}

Result<void> Testpmd::reset_ports(std::optional<std::uint16_t> port) {
  if (forwarding()) return fail("Please stop forwarding first");
  for (auto& p : ports_)
    if ((!port || p->id() == *port) && p->started()) return fail("Please stop port {} first", p->id());
  std::printf("Resetting ports...\n");
  closed_.resize(ports_.size(), false);
  reconfig_.resize(ports_.size(), false);
  for (auto& p : ports_) {
    if (port && p->id() != *port) continue;
    if (auto ok = reconfigure_port(*p); !ok) return ok;
    closed_[p->id()] = false;
    reconfig_[p->id()] = false;
  }
  std::printf("Done\n");
  return {};
}

namespace {

// What stays in a detached port's slot: port ids never move (streams, captures and scripts name
// them), so the slot holds a port that has no queues, never starts and counts nothing until
// `port attach` reuses it.
class DetachedPort final : public Port {
 public:
  explicit DetachedPort(std::uint16_t id) : Port("", "") { set_id(id); }
  Result<void> setup_rx_queue(std::uint16_t, const RxQueueConfig&) override { return detached(); }
  Result<void> setup_tx_queue(std::uint16_t, const TxQueueConfig&) override { return detached(); }
  PortInfo info() const override { return {"", 1, 1, 0, 0}; }
  LinkStatus link() const override { return {}; }

 protected:
  Result<void> do_start() override { return detached(); }
  PortStats read_stats() const override { return {}; }

 private:
  Result<void> detached() const { return fail("port {} is detached", id()); }
};

}  // namespace

std::size_t Testpmd::attached_ports() const {
  return static_cast<std::size_t>(std::count(detached_.begin(), detached_.end(), false)) +
         (ports_.size() - std::min(ports_.size(), detached_.size()));
}

Result<void> Testpmd::rebuild_fwd_ports() {
  const auto gone = [&](std::uint16_t p) { return p >= ports_.size() || detached(p); };
  app_.fwd_ports.erase(std::remove_if(app_.fwd_ports.begin(), app_.fwd_ports.end(), gone), app_.fwd_ports.end());
  if (app_.nb_ports && *app_.nb_ports > attached_ports()) app_.nb_ports.reset();
  if (auto ok = choose_fwd_ports(); !ok) return ok;
  streams_.clear();
  return setup_streams();
}

Result<std::uint16_t> Testpmd::attach_port(std::string_view devargs) {
  if (forwarding()) return fail("Please stop forwarding first");
  if (!devargs.empty() && std::isdigit(static_cast<unsigned char>(devargs.front())))
    return fail(
        "port attach {}: PCI devices are probed at start-up (-a); attach takes virtual devices (--vdev "
        "strings such as net_null2)",
        devargs);
  std::printf("Attaching a new port...\n");
  // The lowest detached id, as DPDK hands out the lowest free port id; else a new one.
  const auto free_slot = std::find(detached_.begin(), detached_.end(), true);
  const auto slot =
      static_cast<std::uint16_t>(free_slot == detached_.end() ? ports_.size() : free_slot - detached_.begin());
  if (slot >= ports_.size() && ports_.size() >= max_ports) return fail("port attach: {} ports already", max_ports);
  for (const auto& p : ports_)
    if (p->name() == devargs.substr(0, devargs.find(',')))
      return fail("port attach {}: device {} exists already (port {})", devargs, p->name(), p->id());
  auto port = env_->drivers().create_port(devargs, env_->port_env());
  if (!port) return std::unexpected(port.error());
  (*port)->set_id(slot);
  if (auto ok = configure_new_port(**port); !ok) return std::unexpected(ok.error());
  detached_.resize(std::max<std::size_t>(detached_.size(), slot + 1u), false);
  closed_.resize(std::max<std::size_t>(closed_.size(), slot + 1u), false);
  reconfig_.resize(std::max<std::size_t>(reconfig_.size(), slot + 1u), false);
  env_->place_port(slot, std::move(*port));
  detached_[slot] = closed_[slot] = reconfig_[slot] = false;
  // As dpdk-testpmd's update_fwd_ports: a new port forwards too, in a --portlist as well.
  if (!app_.fwd_ports.empty()) {
    app_.fwd_ports.push_back(slot);
    std::sort(app_.fwd_ports.begin(), app_.fwd_ports.end());
  }
  std::printf("Port %u is attached. Now total ports is %zu\n", slot, attached_ports());
  if (auto ok = rebuild_fwd_ports(); !ok) return std::unexpected(ok.error());
  std::printf("Done\n");
  return slot;
}

Result<void> Testpmd::detach_port(std::uint16_t port) {
  if (forwarding()) return fail("Please stop forwarding first");
  if (detached(port)) return fail("Port {} is detached already", port);
  if (!closed(port)) return fail("Port was not closed");
  std::printf("Removing a device...\n");
  if (rx_tap(port)) swap_rx_tap(port, nullptr);  // a capture of this port ends with it
  detached_.resize(ports_.size(), false);
  env_->place_port(port, std::make_unique<DetachedPort>(port));
  detached_[port] = true;
  std::printf("Port %u is closed\nDevice is detached\nNow total ports is %zu\n", port, attached_ports());
  if (auto ok = rebuild_fwd_ports(); !ok) return ok;
  std::printf("Done\n");
  return {};
}

Result<void> Testpmd::set_port_queues(std::string_view what, std::uint16_t n) {
  for (auto& p : ports_)
    if (p->started()) return fail("Please stop all ports first (port {} is started)", p->id());
  std::uint16_t AppOptions::* field = nullptr;
  std::uint16_t max = 65535;
  if (what == "rxq")
    field = &AppOptions::rxq, max = port_max_queues;
  else if (what == "txq")
    field = &AppOptions::txq, max = port_max_queues;
  else if (what == "rxd")
    field = &AppOptions::rxd;
  else if (what == "txd")
    field = &AppOptions::txd;
  else
    return fail("port config all {}: accepted rxq, txq, rxd, txd", what);
  if (n == 0 || n > max) return fail("port config all {} {}: accepted [1, {}]", what, n, max);
  app_.*field = n;
  reconfig_.assign(ports_.size(), true);
  return {};
}

bool Testpmd::reconfig_pending() const {
  return std::find(reconfig_.begin(), reconfig_.end(), true) != reconfig_.end();
}

std::vector<XStat> Testpmd::port_xstats(std::uint16_t port) const {
  std::vector<XStat> all = ports_[port]->xstats();
  if (port >= xstats_base_.size()) return all;
  for (XStat& x : all)
    if (const auto it = xstats_base_[port].find(x.name); it != xstats_base_[port].end() && x.value >= it->second)
      x.value -= it->second;
  return all;
}

void Testpmd::clear_port_stats(std::uint16_t port) {
  ports_[port]->reset_stats();
  if (xstats_base_.size() < ports_.size()) xstats_base_.resize(ports_.size());
  xstats_base_[port].clear();
  for (const XStat& x : ports_[port]->xstats()) xstats_base_[port][x.name] = x.value;
  // Forward statistics and throughput are differences from these snapshots: restart them at 0.
  if (port < start_.size()) start_[port] = {};
  if (port < last_show_.size()) last_show_[port] = {};
}

}  // namespace ws::testpmd

namespace ws::testpmd {

void Testpmd::launch_lcores() {
  for (auto& lc : fwd_lcores_) {
    const auto cfg = *std::find_if(eal_.lcores.begin(), eal_.lcores.end(),
                                   [&](const LcoreConfig& l) { return l.id == lc->lcore_id; });
    FwdLcore* raw = lc.get();
    LcoreLoopFn loop = engine_->loop(simd_level());
    lcores_.emplace_back(cfg, [raw, loop] { loop(*raw); });
  }
}

Port* Testpmd::rx_source(std::uint16_t port) const {
  if (port < rx_taps_.size() && rx_taps_[port]) return rx_taps_[port].get();
  if (verbose_prints_rx(verbose_) && port < verbose_ports_.size()) return verbose_ports_[port].get();
  return ports_[port].get();
}

Port* Testpmd::tx_target(std::uint16_t port) const {
  if (verbose_prints_tx(verbose_) && port < verbose_ports_.size()) return verbose_ports_[port].get();
  return ports_[port].get();
}

void Testpmd::make_verbose_proxies() {
  verbose_ports_.clear();
  if (verbose_ == 0) return;
  for (auto& p : ports_) verbose_ports_.push_back(make_verbose_port(*p));
}

template <class F>
void Testpmd::with_lcores_paused(F change) {
  // Streams are read-only while lcores run: join them, change, relaunch. Counters and the
  // forwarding start time are kept, and packets wait in their queues meanwhile.
  const bool running = forwarding();
  if (running) {
    for (auto& lc : fwd_lcores_) lc->stop.store(true, std::memory_order_relaxed);
    lcores_.clear();  // joins
  }
  change();
  if (running) {
    for (auto& lc : fwd_lcores_) lc->stop.store(false, std::memory_order_relaxed);
    launch_lcores();
  }
}

void Testpmd::run_paused(const std::function<void()>& change) { with_lcores_paused(change); }

std::unique_ptr<Port> Testpmd::swap_rx_tap(std::uint16_t port, std::unique_ptr<Port> tap) {
  rx_taps_.resize(ports_.size());
  with_lcores_paused([&] {
    std::swap(rx_taps_[port], tap);
    for (auto& s : streams_) s->rx_port = rx_source(s->rx_port_id);
  });
  return tap;
}

void Testpmd::set_verbose(unsigned level) {
  if (!forwarding()) {
    verbose_ = level;  // start_forwarding builds the proxies
    return;
  }
  with_lcores_paused([&] {
    verbose_ = level;
    make_verbose_proxies();
    for (auto& s : streams_) {
      s->rx_port = rx_source(s->rx_port_id);
      s->tx_port = tx_target(s->tx_port_id);
    }
  });
}

}  // namespace ws::testpmd
