// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target for the route parser and the table behind it: no crash and no UB on any text;
// a refusal always says why; what parses prints back to text that parses to the same routes;
// loaded into an Lpm4 (those of /12 or longer), every route's addresses resolve as a naive
// longest match says, and removing every route leaves the table empty, groups included.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ws/lpm/routes.hpp"

namespace {

constexpr unsigned min_loaded_length = 12;

std::uint32_t mask(unsigned len) { return len == 0 ? 0 : ~0u << (32 - len); }

// The longest route covering `a`, by scanning them all.
std::uint32_t naive(const std::vector<ws::Ipv4Route>& routes, std::uint32_t a) {
  int best = -1;
  std::uint32_t hop = ws::lpm_no_route;
  for (const auto& r : routes)
    if ((a & mask(r.prefix.length)) == r.prefix.addr && r.prefix.length > best)
      best = r.prefix.length, hop = r.next_hop;
  return hop;
}

ws::Lpm4& table() {
  // One table for every input (creating 64 MiB per input would dominate); emptied after each.
  static auto t = ws::Lpm4::create({"fuzz", 64, 64, ws::HugePolicy::never}).value();
  return *t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto routes = ws::parse_ipv4_routes(text, "fuzz", 1000);
  if (!routes) {
    if (routes.error().message.rfind("fuzz:", 0) != 0) std::abort();  // names the source and line
    return 0;
  }
  std::string printed;
  for (const auto& r : *routes) printed += r.prefix.to_string() + " " + std::to_string(r.next_hop) + "\n";
  auto again = ws::parse_ipv4_routes(printed, "printed", 1000);
  if (!again || *again != *routes) std::abort();

  // Routes shorter than /12 are parsed and printed but not loaded: a /0 writes all 16 M entries
  // of the first level, over a second per input under coverage instrumentation, and lpm_test
  // covers short prefixes. A /12 writes 4096.
  std::vector<ws::Ipv4Route> loadable;
  for (const auto& r : *routes)
    if (r.prefix.length >= min_loaded_length) loadable.push_back(r);
  ws::Lpm4& t = table();
  auto loaded = ws::add_ipv4_routes(t, loadable, "fuzz");
  // What parsed holds no duplicate, so only the 64-route limit may refuse (64 groups always
  // suffice for 64 routes).
  if (!loaded && loadable.size() <= 64) std::abort();
  std::vector<ws::Ipv4Route> in_table;
  for (const auto& r : loadable)
    if (t.find(r.prefix) == r.next_hop) in_table.push_back(r);
  for (const auto& r : in_table) {
    const std::uint32_t last = r.prefix.addr | ~mask(r.prefix.length);
    for (std::uint32_t a : {r.prefix.addr, last, r.prefix.addr - 1, last + 1}) {
      std::uint32_t bulk = 0;
      t.lookup_bulk(&a, &bulk, 1);
      if (t.lookup(a) != naive(in_table, a) || bulk != t.lookup(a)) std::abort();
    }
  }
  for (const auto& r : in_table)
    if (!t.remove(r.prefix)) std::abort();
  if (t.route_count() != 0 || t.tbl8_groups_used() != 0) std::abort();
  return 0;
}
