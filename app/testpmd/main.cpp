// SPDX-License-Identifier: BSD-3-Clause
// wirespeed-testpmd: dpdk-testpmd's command line ([EAL options] -- [app options]) on wirespeed.
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app/testpmd/prompt.hpp"
#include "app/testpmd/summary.hpp"
#include "app/testpmd/telemetry.hpp"
#include "app/testpmd/telemetry_metrics.hpp"
#include "app/testpmd/testpmd.hpp"
#include "ws/eal/eal.hpp"

namespace {

using namespace ws;
using namespace ws::testpmd;

std::atomic<bool> stop_requested{false};

extern "C" void on_signal(int) { stop_requested.store(true, std::memory_order_relaxed); }

int usage_error(const std::string& message) {
  std::fprintf(stderr, "wirespeed-testpmd: error: %s\n", message.c_str());
  std::fprintf(stderr, "usage: wirespeed-testpmd [EAL options] -- [application options]\n");
  return 2;
}

// Non-interactive run: periodic stats until --duration, a signal, or (without a stats period
// and duration, as dpdk-testpmd) Enter on stdin.
void wait_for_end(Testpmd& tp) {
  const auto& app = tp.app();
  const auto t0 = std::chrono::steady_clock::now();
  auto next_stats = t0 + std::chrono::seconds(app.stats_period_s);
  const bool wait_enter = app.stats_period_s == 0 && app.duration_s == 0;
  if (wait_enter) std::printf("Press enter to exit\n");
  std::fflush(stdout);
  while (!stop_requested.load(std::memory_order_relaxed)) {
    if (wait_enter) {
      pollfd p{STDIN_FILENO, POLLIN, 0};
      if (poll(&p, 1, 100) != 0) return;  // a line, EOF or an error on stdin
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const auto now = std::chrono::steady_clock::now();
    if (app.stats_period_s && now >= next_stats) {
      tp.print_nic_stats(true);
      next_stats += std::chrono::seconds(app.stats_period_s);
    }
    if (app.duration_s > 0 && now - t0 >= std::chrono::duration<double>(app.duration_s)) return;
  }
}

int run(Testpmd& tp) {
  const AppOptions& app = tp.app();
  if (!app.cmdline_file.empty()) {
    std::ifstream in(app.cmdline_file);
    if (!in) return usage_error("--cmdline-file " + app.cmdline_file + ": cannot open");
    std::printf("Read CLI commands from %s\n", app.cmdline_file.c_str());
    if (run_prompt(tp, in, false, stop_requested) == PromptResult::quit) return 0;
  }
  if (app.interactive) {
    if (app.auto_start) {
      if (auto ok = tp.start_forwarding(app.tx_first); !ok) return usage_error(ok.error().message);
    }
    run_prompt(tp, std::cin, true, stop_requested);
    return 0;
  }
  if (!tp.forwarding()) {
    if (auto ok = tp.start_forwarding(app.tx_first); !ok) return usage_error(ok.error().message);
  }
  wait_for_end(tp);
  return 0;
}

// The command line split at "--": EAL options before, testpmd's own after.
using Args = SplitArgs;

bool asks_help(const Args& args) {
  const auto has = [](const std::vector<std::string>& v, bool short_too) {
    return std::any_of(v.begin(), v.end(),
                       [&](const std::string& a) { return a == "--help" || (short_too && a == "-h"); });
  };
  return has(args.eal, true) || has(args.app, false);
}

// Without SA_RESTART (which std::signal implies on glibc): the signal must interrupt the
// prompt's blocking read of stdin, or -i would ignore Ctrl-C until the next line.
void catch_stop_signals() {
  struct sigaction on_stop{};
  on_stop.sa_handler = on_signal;
  sigemptyset(&on_stop.sa_mask);
  sigaction(SIGINT, &on_stop, nullptr);
  sigaction(SIGTERM, &on_stop, nullptr);
}

// What serves the running testpmd besides the prompt: telemetry, Prometheus metrics and the
// captures asked for on the command line. Destroyed before the ports stop: they read them.
struct Servers {
  std::unique_ptr<TelemetryServer> telemetry;
  std::unique_ptr<MetricsServer> metrics;
};

Result<Servers> start_servers(Testpmd& tp, const char* argv0, const Args& args) {
  Servers s;
  if (tp.eal().telemetry) {
    // As DPDK's /eal/params: argv[0] and the EAL options; /eal/app_params: what follows "--".
    std::vector<std::string> eal_params = {argv0};
    eal_params.insert(eal_params.end(), args.eal.begin(), args.eal.end());
    auto t = TelemetryServer::start(tp, std::move(eal_params), args.app);
    if (t)
      s.telemetry = std::move(*t);
    else
      log(LogLevel::warning, "{} (running without telemetry)", t.error().message);
  }
  for (const auto& spec : tp.app().captures)
    if (auto ok = start_capture_option(tp, spec); !ok) return std::unexpected(ok.error());
  const std::string& addr = tp.app().metrics_addr;
  if (!addr.empty()) {
    auto m = MetricsServer::start(tp, addr);
    if (!m) return std::unexpected(m.error());
    s.metrics = std::move(*m);
    std::printf("Prometheus metrics on http://%s:%u/metrics\n", addr.substr(0, addr.rfind(':')).c_str(),
                s.metrics->port());
  }
  return s;
}

// Stops forwarding and the ports, then reports what dpdk-testpmd cannot: the pool audit and the
// accounting identity. Returns the exit code.
int finish(Testpmd& tp, int rc) {
  tp.stop_forwarding();
  const auto audit = tp.shutdown();
  if (!audit) std::fprintf(stderr, "wirespeed-testpmd: error: %s\n", audit.error().message.c_str());
  const FwdTotals totals = tp.totals();
  if (!accounting_exact(totals))
    std::fprintf(stderr,
                 "wirespeed-testpmd: error: accounting mismatch: rx %llu + generated %llu != tx %llu + dropped %llu + "
                 "consumed %llu\n",
                 static_cast<unsigned long long>(totals.rx), static_cast<unsigned long long>(totals.generated),
                 static_cast<unsigned long long>(totals.tx), static_cast<unsigned long long>(totals.dropped),
                 static_cast<unsigned long long>(totals.consumed));
  if (!tp.app().summary_json.empty()) {
    if (auto ok = write_summary(tp, tp.app().summary_json, audit.has_value()); !ok)
      std::fprintf(stderr, "wirespeed-testpmd: error: %s\n", ok.error().message.c_str());
  }
  if (rc != 0) return rc;
  return audit && accounting_exact(totals) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = split_args(argc, argv);
  // -h/--help, before anything else is checked: a newcomer's first command must work.
  if (asks_help(args)) {
    std::printf("\nUsage: %s [EAL options] -- [testpmd options]\n\n%s\n%s", argv[0], eal_usage().c_str(),
                app_usage().c_str());
    return 0;
  }
  auto eal = parse_eal_args(args.eal);
  if (!eal) return usage_error(eal.error().message);
  auto app = parse_app_args(args.app);
  if (!app) return usage_error(app.error().message);
  // As dpdk-testpmd: --mlockall locks every page now and later, so that no page fault stalls an
  // lcore; a failure (RLIMIT_MEMLOCK) is only a warning.
  if (app->mlockall && mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
    std::fprintf(stderr, "Warning: mlockall() failed with error \"%s\"\n", std::strerror(errno));
  catch_stop_signals();
  std::printf("TSC frequency: %llu Hz\n", static_cast<unsigned long long>(tsc_hz()));
  auto tp = Testpmd::create(std::move(*eal), std::move(*app));
  if (!tp) return usage_error(tp.error().message);
  int rc = 0;
  {
    auto servers = start_servers(**tp, argv[0], args);
    if (!servers) return usage_error(servers.error().message);
    rc = run(**tp);
  }
  return finish(**tp, rc);
}
