// SPDX-License-Identifier: BSD-3-Clause
// IPv4 longest-prefix match, ours (ws::Lpm4) against Debian's DPDK (rte_lpm) in one process and
// one thread: the same routes in both tables, the same addresses, lookups one at a time and in
// bulks of 32 and 64, alternating the two sides over several rounds. Prints the median cycles per
// lookup of each side and their ratio (DPDK / ours: > 1 means ours is faster), after checking that
// both tables answer every address alike.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wvla"
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lpm.h>
#pragma GCC diagnostic pop

#include "ws/core/cpu.hpp"
#include "ws/lpm/lpm.hpp"

namespace {

constexpr std::size_t address_count = 1u << 20;  // per address set; 4 MiB

struct Options {
  unsigned rounds = 5;
  bool huge = false;
  std::vector<std::uint32_t> table_sizes = {1000, 100000, 1000000};
};

[[noreturn]] void die(std::string_view what) {
  fmt::print(stderr, "lpm_vs_dpdk: {}\n", what);
  std::exit(1);
}

struct Route {
  std::uint32_t addr;
  std::uint8_t length;
  std::uint32_t next_hop;
};

std::uint32_t mask(unsigned len) { return len == 0 ? 0 : ~0u << (32 - len); }

// A BGP-like mix (as ws/lpm/lpm_test.cpp): mostly /24 and /17-/23, few short prefixes, 2% longer
// than /24; distinct prefixes, next hops below 2^16.
std::vector<Route> make_routes(std::uint32_t n, std::mt19937& rng) {
  std::vector<Route> routes;
  std::unordered_set<std::uint64_t> seen;
  while (routes.size() < n) {
    const std::uint32_t r = rng() % 1000;
    unsigned len = r < 560   ? 24
                   : r < 930 ? 17 + rng() % 7
                   : r < 950 ? 25 + rng() % 8
                             : 16 - std::min(8, std::countr_zero(static_cast<std::uint32_t>(rng()) | 0x100u));
    const std::uint32_t addr = static_cast<std::uint32_t>(rng()) & mask(len);
    if (seen.insert(std::uint64_t{addr} << 8 | len).second)
      routes.push_back({addr, static_cast<std::uint8_t>(len), static_cast<std::uint32_t>(rng() % 65536)});
  }
  return routes;
}

// Runs `body` once; returns the TSC cycles taken.
template <class Body>
[[gnu::noinline]] std::uint64_t timed(Body body) {
  const std::uint64_t start = ws::rdtsc();
  body();
  return ws::rdtsc() - start;
}

struct Case {
  std::string name;
  std::function<std::uint64_t()> dpdk, ours;
};

std::uint64_t median(std::vector<std::uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Both sides' lookups for one table and one address set.
std::vector<Case> cases(const rte_lpm* dpdk, const ws::Lpm4& ours, const std::vector<std::uint32_t>& addrs,
                        std::vector<std::uint32_t>& out, std::string_view set) {
  std::vector<Case> list;
  const std::uint32_t* a = addrs.data();
  std::uint32_t* o = out.data();
  list.push_back({fmt::format("single, {}", set),
                  [=] {
                    return timed([&] {
                      for (std::size_t i = 0; i < address_count; ++i) {
                        std::uint32_t hop;
                        o[i] = rte_lpm_lookup(dpdk, a[i], &hop) == 0 ? hop : ws::lpm_no_route;
                      }
                    });
                  },
                  [=, &ours] {
                    return timed([&] {
                      for (std::size_t i = 0; i < address_count; ++i) o[i] = ours.lookup(a[i]);
                    });
                  }});
  for (unsigned bulk : {32u, 64u}) {
    // The bulk size is a compile-time constant on both sides, as DPDK's documentation asks.
    auto dpdk_bulk = bulk == 32 ? +[](const rte_lpm* t, const std::uint32_t* x, std::uint32_t* y) {
      for (std::size_t i = 0; i < address_count; i += 32) rte_lpm_lookup_bulk(t, x + i, y + i, 32);
    } : +[](const rte_lpm* t, const std::uint32_t* x, std::uint32_t* y) {
      for (std::size_t i = 0; i < address_count; i += 64) rte_lpm_lookup_bulk(t, x + i, y + i, 64);
    };
    list.push_back({fmt::format("bulk {}, {}", bulk, set), [=] { return timed([&] { dpdk_bulk(dpdk, a, o); }); },
                    [=, &ours] {
                      return timed([&] {
                        for (std::size_t i = 0; i < address_count; i += bulk) ours.lookup_bulk(a + i, o + i, bulk);
                      });
                    }});
  }
  return list;
}

void check_same_answers(const rte_lpm* dpdk, const ws::Lpm4& ours, const std::vector<std::uint32_t>& addrs) {
  std::vector<std::uint32_t> bulk(64);
  for (std::size_t i = 0; i < addrs.size(); ++i) {
    std::uint32_t hop = 0;
    const std::uint32_t want = rte_lpm_lookup(dpdk, addrs[i], &hop) == 0 ? hop : ws::lpm_no_route;
    if (ours.lookup(addrs[i]) != want)
      die(fmt::format("{}: DPDK says {}, ours {}", ws::ipv4_to_string(addrs[i]), want, ours.lookup(addrs[i])));
    if (i % 64 == 0) {
      ours.lookup_bulk(&addrs[i], bulk.data(), 64);
      for (unsigned k = 0; k < 64; ++k)
        if (bulk[k] != ours.lookup(addrs[i + k])) die("bulk and single lookups disagree");
    }
  }
}

void init_eal(const Options& o) {
  std::vector<std::string> args = {"lpm_vs_dpdk",      "-l", "0", "--no-pci", "--file-prefix=wslpmbench",
                                   "--log-level=error"};
  if (o.huge) {
    args.push_back("--in-memory");
  } else {
    args.insert(args.end(), {"--no-huge", "-m", "1536"});
  }
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0)
    die(fmt::format("rte_eal_init: {}", rte_strerror(rte_errno)));
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--rounds" && i + 1 < argc)
      o.rounds = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--huge")
      o.huge = true;
    else if (a == "--routes" && i + 1 < argc) {
      o.table_sizes.clear();
      for (std::string_view s = argv[++i]; !s.empty();) {
        const auto comma = s.find(',');
        o.table_sizes.push_back(static_cast<std::uint32_t>(std::stoul(std::string(s.substr(0, comma)))));
        s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
      }
    } else {
      die("usage: lpm_vs_dpdk [--rounds N] [--routes 1000,100000,1000000] [--huge]  (--huge: 2 MiB pages on both "
          "sides; needs them reserved)");
    }
  }
  if (o.rounds == 0) die("--rounds must be at least 1");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  init_eal(opt);
  std::mt19937 rng(42);
  std::vector<std::uint32_t> random(address_count), sequential(address_count), out(address_count);
  for (auto& a : random) a = static_cast<std::uint32_t>(rng());
  const std::uint32_t base = static_cast<std::uint32_t>(rng());
  for (std::size_t i = 0; i < address_count; ++i) sequential[i] = base + static_cast<std::uint32_t>(i);
  fmt::print("# {} rounds, {} pages on both sides, {} addresses per set, TSC {:.2f} GHz\n", opt.rounds,
             opt.huge ? "2 MiB" : "4 KiB", address_count, static_cast<double>(ws::tsc_hz()) / 1e9);
  fmt::print("{:>8} {:<28} {:>12} {:>12} {:>8}\n", "routes", "lookup", "DPDK cyc", "ours cyc", "ratio");
  for (std::uint32_t n : opt.table_sizes) {
    const std::vector<Route> routes = make_routes(n, rng);
    std::uint32_t long_routes = 0;
    for (const auto& r : routes) long_routes += r.length > 24;
    const std::uint32_t groups = std::max(256u, long_routes + 256);
    rte_lpm_config config{n, groups, 0};
    rte_lpm* dpdk = rte_lpm_create(fmt::format("wsbench{}", n).c_str(), SOCKET_ID_ANY, &config);
    if (dpdk == nullptr) die(fmt::format("rte_lpm_create: {}", rte_strerror(rte_errno)));
    auto ours = ws::Lpm4::create({"bench", n, groups, opt.huge ? ws::HugePolicy::required : ws::HugePolicy::never});
    if (!ours) die(ours.error().message);
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& r : routes)
      if (rte_lpm_add(dpdk, r.addr, r.length, r.next_hop) != 0) die("rte_lpm_add failed");
    const auto t1 = std::chrono::steady_clock::now();
    for (const auto& r : routes)
      if (auto ok = (*ours)->add({r.addr, r.length}, r.next_hop); !ok) die(ok.error().message);
    const auto t2 = std::chrono::steady_clock::now();
    fmt::print("# {} routes ({} longer than /24): built in {:.3f} s by DPDK, {:.3f} s by ours\n", n, long_routes,
               std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count());
    check_same_answers(dpdk, **ours, random);
    check_same_answers(dpdk, **ours, sequential);
    for (const auto* set : {&random, &sequential}) {
      for (const Case& c : cases(dpdk, **ours, *set, out, set == &random ? "random" : "sequential")) {
        std::vector<std::uint64_t> d, w;
        (void)c.dpdk(), (void)c.ours();  // warm both
        for (unsigned r = 0; r < opt.rounds; ++r) {
          if (r % 2) {
            w.push_back(c.ours());
            d.push_back(c.dpdk());
          } else {
            d.push_back(c.dpdk());
            w.push_back(c.ours());
          }
        }
        const double dc = static_cast<double>(median(d)) / address_count,
                     oc = static_cast<double>(median(w)) / address_count;
        fmt::print("{:>8} {:<28} {:>12.2f} {:>12.2f} {:>8.2f}\n", n, c.name, dc, oc, dc / oc);
        std::fflush(stdout);
      }
    }
    rte_lpm_free(dpdk);
  }
  const std::string runtime_dir = rte_eal_get_runtime_dir();
  rte_eal_cleanup();
  std::filesystem::remove_all(runtime_dir);  // DPDK leaves its sockets' directory behind
  return 0;
}
