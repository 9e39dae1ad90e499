// SPDX-License-Identifier: BSD-3-Clause
// Lpm4: longest match, fallback on removal, group reuse, every refusal leaving the table as it
// was, and lookups (single, bulk, both bulk versions) against naive references on random tables
// of 1k routes (every length, with removals) and 1M routes (a BGP-like length mix).
#include "ws/lpm/lpm.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <unordered_map>
#include <vector>

#include "ws/lpm/lpm_bulk.hpp"
#include "ws/testing/simd_levels.hpp"

namespace ws {
namespace {

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "'" << (text) << "' lacks '" << (needle) << "'"

std::uint32_t mask(unsigned len) { return len == 0 ? 0 : ~0u << (32 - len); }

Ipv4Prefix pfx(const char* text) {
  auto p = parse_ipv4_prefix(text);
  EXPECT_TRUE(p.has_value()) << p.error().message;
  return p ? *p : Ipv4Prefix{};
}
std::uint32_t ip(const char* text) { return *parse_ipv4_address(text); }

std::unique_ptr<Lpm4> table(std::uint32_t max_routes = 1024, std::uint32_t groups = 16) {
  auto t = Lpm4::create({"test", max_routes, groups, HugePolicy::never});
  EXPECT_TRUE(t.has_value()) << t.error().message;
  return t ? std::move(*t) : nullptr;
}

// The naive reference: every route checked, the longest covering one wins.
struct Linear {
  std::vector<std::pair<Ipv4Prefix, std::uint32_t>> routes;
  std::uint32_t lookup(std::uint32_t a) const {
    int best = -1;
    std::uint32_t hop = lpm_no_route;
    for (const auto& [p, h] : routes)
      if ((a & mask(p.length)) == p.addr && p.length > best) best = p.length, hop = h;
    return hop;
  }
};

// A reference fast enough for 1M routes: one hash map per length, longest first.
struct PerLength {
  std::array<std::unordered_map<std::uint32_t, std::uint32_t>, 33> by_length;
  std::uint32_t lookup(std::uint32_t a) const {
    for (int len = 32; len >= 0; --len)
      if (auto it = by_length[len].find(a & mask(len)); it != by_length[len].end()) return it->second;
    return lpm_no_route;
  }
};

// Checks single lookups and the bulk version of every SIMD level this CPU has (odd length: the
// vector tails) against `ref`.
template <class Ref>
void check_lookups(const Lpm4& t, const Ref& ref, const std::vector<std::uint32_t>& addrs) {
  std::vector<std::pair<const char*, void (*)(const Lpm4&, const std::uint32_t*, std::uint32_t*, std::size_t) noexcept>>
      versions;
  for (SimdLevel level : testing::cpu_simd_levels())
    versions.emplace_back(simd_name(level).data(), LpmBulk::pick(level));
  std::vector<std::vector<std::uint32_t>> bulk(versions.size() + 1, std::vector<std::uint32_t>(addrs.size()));
  t.lookup_bulk(addrs.data(), bulk[0].data(), addrs.size());
  for (std::size_t v = 0; v < versions.size(); ++v)
    versions[v].second(t, addrs.data(), bulk[v + 1].data(), addrs.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < addrs.size() && bad < 5; ++i) {
    const std::uint32_t want = ref.lookup(addrs[i]);
    const std::uint32_t got = t.lookup(addrs[i]);
    if (got != want) ++bad, ADD_FAILURE() << ipv4_to_string(addrs[i]) << ": want " << want << ", single " << got;
    for (std::size_t v = 0; v <= versions.size(); ++v)
      if (bulk[v][i] != want)
        ++bad, ADD_FAILURE() << ipv4_to_string(addrs[i]) << ": want " << want << ", bulk "
                             << (v == 0 ? "lookup_bulk" : versions[v - 1].first) << " " << bulk[v][i];
  }
}

// Addresses that test a route's edges: its first and last address and their neighbours, then a
// run of consecutive addresses from its start (whole gathers in one /24, the bulk shortcut).
void add_edges(std::vector<std::uint32_t>& out, Ipv4Prefix p) {
  const std::uint32_t last = p.addr | ~mask(p.length);
  for (std::uint32_t a : {p.addr, last, p.addr - 1, last + 1, p.addr + (~mask(p.length) >> 1)}) out.push_back(a);
  for (std::uint32_t a = 0; a < 16; ++a) out.push_back(p.addr + a);
}

TEST(Lpm4, LongestPrefixWins) {
  auto t = table();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->lookup(ip("10.1.2.3")), lpm_no_route);
  ASSERT_TRUE(t->add(pfx("10.0.0.0/8"), 1).has_value());
  ASSERT_TRUE(t->add(pfx("10.1.0.0/16"), 2).has_value());
  ASSERT_TRUE(t->add(pfx("10.1.2.0/24"), 3).has_value());
  ASSERT_TRUE(t->add(pfx("10.1.2.128/25"), 4).has_value());
  ASSERT_TRUE(t->add(pfx("10.1.2.200/32"), 5).has_value());
  ASSERT_TRUE(t->add(pfx("0.0.0.0/0"), 0).has_value());
  EXPECT_EQ(t->lookup(ip("11.0.0.1")), 0u);
  EXPECT_EQ(t->lookup(ip("10.200.0.1")), 1u);
  EXPECT_EQ(t->lookup(ip("10.1.200.1")), 2u);
  EXPECT_EQ(t->lookup(ip("10.1.2.1")), 3u);
  EXPECT_EQ(t->lookup(ip("10.1.2.129")), 4u);
  EXPECT_EQ(t->lookup(ip("10.1.2.200")), 5u);
  EXPECT_EQ(t->lookup(ip("10.1.2.201")), 4u);
  EXPECT_EQ(t->route_count(), 6u);
  EXPECT_EQ(t->tbl8_groups_used(), 1u);
  EXPECT_EQ(t->find(pfx("10.1.0.0/16")), 2u);
  EXPECT_EQ(t->find(pfx("10.1.0.0/17")), lpm_no_route);
}

TEST(Lpm4, RemovalFallsBackToTheCoveringRouteAndFreesGroups) {
  auto t = table();
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->add(pfx("10.0.0.0/8"), 1).has_value());
  ASSERT_TRUE(t->add(pfx("10.1.2.0/24"), 3).has_value());
  ASSERT_TRUE(t->add(pfx("10.1.2.128/25"), 4).has_value());
  ASSERT_TRUE(t->add(pfx("10.1.2.200/30"), 5).has_value());
  ASSERT_TRUE(t->remove(pfx("10.1.2.0/24")).has_value());
  EXPECT_EQ(t->lookup(ip("10.1.2.1")), 1u);    // was the /24's: now the /8's
  EXPECT_EQ(t->lookup(ip("10.1.2.130")), 4u);  // the /25 stays
  ASSERT_TRUE(t->remove(pfx("10.1.2.128/25")).has_value());
  EXPECT_EQ(t->lookup(ip("10.1.2.130")), 1u);
  EXPECT_EQ(t->lookup(ip("10.1.2.201")), 5u);
  EXPECT_EQ(t->tbl8_groups_used(), 1u);
  ASSERT_TRUE(t->remove(pfx("10.1.2.200/30")).has_value());
  EXPECT_EQ(t->tbl8_groups_used(), 0u);  // nothing longer than /24 left: the group is folded back
  EXPECT_EQ(t->lookup(ip("10.1.2.201")), 1u);
  ASSERT_TRUE(t->remove(pfx("10.0.0.0/8")).has_value());
  EXPECT_EQ(t->lookup(ip("10.1.2.201")), lpm_no_route);
  EXPECT_EQ(t->route_count(), 0u);
  // Every group is usable again.
  for (std::uint32_t i = 0; i < 16; ++i) ASSERT_TRUE(t->add({ip("10.0.0.0") + (i << 8), 32}, i).has_value());
  EXPECT_EQ(t->tbl8_groups_used(), 16u);
  t->clear();
  EXPECT_EQ(t->tbl8_groups_used(), 0u);
  EXPECT_EQ(t->lookup(ip("10.0.0.0")), lpm_no_route);
}

TEST(Lpm4, RefusalsNameTheRouteAndLeaveTheTableUnchanged) {
  auto t = table(3, 1);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->add(pfx("10.0.0.0/8"), 7).has_value());
  auto dup = t->add(pfx("10.0.0.0/8"), 9);
  ASSERT_FALSE(dup.has_value());
  EXPECT_HAS(dup.error().message, "route 10.0.0.0/8 already exists (next hop 7)");
  EXPECT_EQ(t->lookup(ip("10.9.9.9")), 7u);
  auto host_bits = t->add({ip("10.1.0.0"), 8}, 1);
  ASSERT_FALSE(host_bits.has_value());
  EXPECT_HAS(host_bits.error().message, "10.1.0.0/8: host bits set past /8 (the network is 10.0.0.0/8)");
  auto big_hop = t->add(pfx("11.0.0.0/8"), lpm_max_next_hop + 1);
  ASSERT_FALSE(big_hop.has_value());
  EXPECT_HAS(big_hop.error().message, "next hop 16777215 is above the largest, 16777214");
  ASSERT_TRUE(t->add(pfx("12.0.0.1/32"), 1).has_value());  // takes the only group
  auto no_group = t->add(pfx("12.0.1.1/32"), 2);
  ASSERT_FALSE(no_group.has_value());
  EXPECT_HAS(no_group.error().message, "route 12.0.1.1/32: no free tbl8 group (1 in use");
  EXPECT_EQ(t->lookup(ip("12.0.1.1")), lpm_no_route);
  ASSERT_TRUE(t->add(pfx("12.0.0.2/32"), 3).has_value());  // same /24: same group
  auto full = t->add(pfx("13.0.0.0/8"), 4);
  ASSERT_FALSE(full.has_value());
  EXPECT_HAS(full.error().message, "route 13.0.0.0/8: the table is full (3 routes, max_routes 3)");
  EXPECT_EQ(t->lookup(ip("13.0.0.1")), lpm_no_route);
  auto missing = t->remove(pfx("14.0.0.0/8"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_HAS(missing.error().message, "no route 14.0.0.0/8 to remove");
  EXPECT_EQ(t->route_count(), 3u);
}

TEST(Lpm4, BadSizesAreRefused) {
  auto none = Lpm4::create({"t", 0, 1, HugePolicy::never});
  ASSERT_FALSE(none.has_value());
  EXPECT_HAS(none.error().message, "lpm 't': max_routes 0 is not 1-16777216");
  auto many = Lpm4::create({"t", lpm_max_routes + 1, 1, HugePolicy::never});
  ASSERT_FALSE(many.has_value());
  EXPECT_HAS(many.error().message, "max_routes 16777217 is not 1-16777216");
  auto huge = Lpm4::create({"t", 1, lpm_max_tbl8_groups + 1, HugePolicy::never});
  ASSERT_FALSE(huge.has_value());
  EXPECT_HAS(huge.error().message, "8388609 tbl8 groups requested, at most 8388608");
}

// 1k routes of every length 0-32, random next hops; then half removed in random order.
TEST(Lpm4, MatchesTheNaiveReferenceOn1kRandomRoutes) {
  std::mt19937 rng(1);
  auto t = table(1000, 1000);
  ASSERT_TRUE(t);
  Linear ref;
  while (ref.routes.size() < 1000) {
    const unsigned len = rng() % 33;
    const Ipv4Prefix p{static_cast<std::uint32_t>(rng()) & mask(len), static_cast<std::uint8_t>(len)};
    if (t->find(p) != lpm_no_route) continue;
    const std::uint32_t hop = rng() % 4096;
    ASSERT_TRUE(t->add(p, hop).has_value()) << p.to_string();
    ref.routes.emplace_back(p, hop);
  }
  std::vector<std::uint32_t> addrs;
  for (int i = 0; i < 20000; ++i) addrs.push_back(static_cast<std::uint32_t>(rng()));
  for (const auto& [p, h] : ref.routes) add_edges(addrs, p);
  check_lookups(*t, ref, addrs);
  std::shuffle(ref.routes.begin(), ref.routes.end(), rng);
  for (std::size_t i = 0; i < 500; ++i) ASSERT_TRUE(t->remove(ref.routes[i].first).has_value());
  ref.routes.erase(ref.routes.begin(), ref.routes.begin() + 500);
  EXPECT_EQ(t->route_count(), 500u);
  check_lookups(*t, ref, addrs);
}

// A BGP-like mix: mostly /24 and /17-/23, few short prefixes, 2% longer than /24.
unsigned bgp_like_length(std::mt19937& rng) {
  const std::uint32_t r = rng() % 1000;
  if (r < 560) return 24;
  if (r < 930) return 17 + rng() % 7;
  if (r < 950) return 25 + rng() % 8;
  // /8-/16, each length half as likely as the next longer one.
  return 16 - std::min(8, std::countr_zero(static_cast<std::uint32_t>(rng()) | 0x100u));
}

TEST(Lpm4, MatchesTheReferenceOn1MRandomRoutes) {
  constexpr std::uint32_t n = 1'000'000;
  std::mt19937 rng(2);
  auto t = table(n, 1u << 15);
  ASSERT_TRUE(t);
  PerLength ref;
  for (unsigned len : {16u, 17u, 18u, 19u, 20u, 21u, 22u, 23u, 24u}) ref.by_length[len].reserve(n / 4);
  std::vector<Ipv4Prefix> sample;
  std::uint32_t added = 0;
  while (added < n) {
    const unsigned len = bgp_like_length(rng);
    const Ipv4Prefix p{static_cast<std::uint32_t>(rng()) & mask(len), static_cast<std::uint8_t>(len)};
    const std::uint32_t hop = rng() % 65536;
    if (!ref.by_length[len].emplace(p.addr, hop).second) continue;
    auto ok = t->add(p, hop);
    ASSERT_TRUE(ok.has_value()) << ok.error().message;
    if (++added % 64 == 0) sample.push_back(p);
  }
  EXPECT_EQ(t->route_count(), n);
  std::vector<std::uint32_t> addrs;
  for (int i = 0; i < 50000; ++i) addrs.push_back(static_cast<std::uint32_t>(rng()));
  for (const auto& p : sample) add_edges(addrs, p);
  check_lookups(*t, ref, addrs);
  // Remove every sampled route: lookups fall back to what covers them.
  for (const auto& p : sample) {
    ASSERT_TRUE(t->remove(p).has_value()) << p.to_string();
    ref.by_length[p.length].erase(p.addr);
  }
  check_lookups(*t, ref, addrs);
}

}  // namespace
}  // namespace ws
