// SPDX-License-Identifier: BSD-3-Clause
// Lcore list parsing (DPDK syntax), pinning and launch.
#include "ws/core/lcore.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "ws/core/hex.hpp"
#include "ws/core/log.hpp"

namespace ws {
namespace {

thread_local unsigned current_lcore = no_lcore;

std::string cpus_text(const std::vector<unsigned>& cpus) {
  std::string s;
  for (unsigned c : cpus) {
    if (!s.empty()) s += ',';
    s += std::to_string(c);
  }
  return s;
}

Result<unsigned> parse_number(std::string_view s, std::string_view option, std::string_view whole) {
  unsigned v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size())
    return fail("{} '{}': '{}' is not a number (expected e.g. 0-3,5)", option, whole, s);
  return v;
}

// "1-3,5" or "(1-3,5)" -> {1,2,3,5}
Result<std::vector<unsigned>> parse_set(std::string_view s, std::string_view option, std::string_view whole) {
  if (s.size() >= 2 && s.front() == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
  std::vector<unsigned> out;
  while (!s.empty()) {
    const auto comma = s.find(',');
    const std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    const auto dash = item.find('-');
    auto lo = parse_number(item.substr(0, dash), option, whole);
    if (!lo) return std::unexpected(lo.error());
    unsigned hi = *lo;
    if (dash != std::string_view::npos) {
      auto h = parse_number(item.substr(dash + 1), option, whole);
      if (!h) return std::unexpected(h.error());
      hi = *h;
    }
    if (hi < *lo) return fail("{} '{}': range '{}' runs backwards", option, whole, item);
    if (hi >= max_lcores)
      return fail("{} '{}': {} is beyond the maximum lcore id {}", option, whole, hi, max_lcores - 1);
    for (unsigned v = *lo; v <= hi; ++v) out.push_back(v);
  }
  if (out.empty()) return fail("{} '{}': empty list", option, whole);
  return out;
}

Result<void> check_cpus_exist(const std::vector<unsigned>& cpus, std::string_view option, std::string_view whole) {
  const auto avail = available_cpus();
  for (unsigned c : cpus) {
    if (std::find(avail.begin(), avail.end(), c) == avail.end())
      return fail(
          "{} '{}': CPU {} is not available on this machine (available: {}); map lcores to existing "
          "CPUs with --lcores, e.g. --lcores '0@0,1@0'",
          option, whole, c, cpus_text(avail));
  }
  return {};
}

Result<std::vector<LcoreConfig>> one_per_cpu(const std::vector<unsigned>& ids, std::string_view option,
                                             std::string_view whole) {
  if (auto ok = check_cpus_exist(ids, option, whole); !ok) return std::unexpected(ok.error());
  std::vector<LcoreConfig> out;
  for (unsigned id : ids) {
    if (std::any_of(out.begin(), out.end(), [&](const LcoreConfig& l) { return l.id == id; }))
      return fail("{} '{}': lcore {} is listed twice", option, whole, id);
    out.push_back({id, {id}});
  }
  return out;
}

}  // namespace

unsigned lcore_id() noexcept { return current_lcore; }
void set_lcore_id(unsigned id) noexcept { current_lcore = id; }

std::vector<unsigned> available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<unsigned> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

Result<std::vector<LcoreConfig>> parse_lcore_list(std::string_view text) {
  auto ids = parse_set(text, "-l", text);
  if (!ids) return std::unexpected(ids.error());
  return one_per_cpu(*ids, "-l", text);
}

Result<std::vector<LcoreConfig>> parse_core_mask(std::string_view text) {
  const std::uint64_t mask = parse_hex_mask(text).value_or(0);
  if (mask == 0) return fail("-c '{}': expected a non-zero hexadecimal core mask such as 0x3", text);
  std::vector<unsigned> ids;
  for (unsigned b = 0; b < 64; ++b)
    if (mask & (1ULL << b)) ids.push_back(b);
  return one_per_cpu(ids, "-c", text);
}

Result<std::vector<LcoreConfig>> parse_lcore_map(std::string_view text) {
  // Split on commas that are not inside parentheses.
  std::vector<std::string_view> groups;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      groups.push_back(text.substr(start, i - start));
      start = i + 1;
    } else if (text[i] == '(') {
      ++depth;
    } else if (text[i] == ')') {
      if (--depth < 0) return fail("--lcores '{}': unbalanced ')'", text);
    }
  }
  if (depth != 0) return fail("--lcores '{}': unbalanced '('", text);
  std::vector<LcoreConfig> out;
  for (std::string_view g : groups) {
    const auto at = g.find('@');
    auto ids = parse_set(g.substr(0, at), "--lcores", text);
    if (!ids) return std::unexpected(ids.error());
    std::vector<unsigned> cpus;
    if (at == std::string_view::npos) {
      cpus = *ids;
    } else {
      auto c = parse_set(g.substr(at + 1), "--lcores", text);
      if (!c) return std::unexpected(c.error());
      cpus = *c;
    }
    if (auto ok = check_cpus_exist(cpus, "--lcores", text); !ok) return std::unexpected(ok.error());
    for (unsigned id : *ids) {
      if (std::any_of(out.begin(), out.end(), [&](const LcoreConfig& l) { return l.id == id; }))
        return fail("--lcores '{}': lcore {} is listed twice", text, id);
      // As in DPDK: "7-8" runs each lcore on its own CPU, "(0,6)" runs both on CPUs {0,6}.
      const bool own_cpu = at == std::string_view::npos && !g.starts_with('(');
      out.push_back({id, own_cpu ? std::vector<unsigned>{id} : cpus});
    }
  }
  return out;
}

Result<void> pin_current_thread(const std::vector<unsigned>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned c : cpus) CPU_SET(c, &set);
  const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc != 0) return fail("cannot pin thread to CPUs {}: error {}", cpus_text(cpus), rc);
  return {};
}

LcoreThread::LcoreThread(const LcoreConfig& config, std::function<void()> body)
    : thread_([config, body = std::move(body)] {
        set_lcore_id(config.id);
        if (auto ok = pin_current_thread(config.cpus); !ok)
          log(LogLevel::warning, "lcore {}: {}", config.id, ok.error().message);
        body();
      }) {}

LcoreThread::~LcoreThread() { join(); }

void LcoreThread::join() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace ws
