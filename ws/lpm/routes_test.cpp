// SPDX-License-Identifier: BSD-3-Clause
// Route text: DPDK l3fwd's route-file lines and command-line routes, comments and blank lines,
// and every refusal naming the text, the line and what was expected.
#include "ws/lpm/routes.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace ws {
namespace {

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "'" << (text) << "' lacks '" << (needle) << "'"

std::string route_error(std::string_view text) {
  auto r = parse_ipv4_route(text);
  EXPECT_FALSE(r.has_value()) << "accepted: " << text;
  return r ? std::string() : r.error().message;
}

TEST(Ipv4Text, AddressesAndPrefixes) {
  EXPECT_EQ(*parse_ipv4_address("198.18.0.1"), 0xc6120001u);
  EXPECT_EQ(*parse_ipv4_address("0.0.0.0"), 0u);
  EXPECT_EQ(*parse_ipv4_address("255.255.255.255"), 0xffffffffu);
  for (const char* bad :
       {"256.0.0.1", "1.2.3", "1.2.3.4.5", "1.2.3.", "a.b.c.d", "1..2.3", "01.2.3.4", " 1.2.3.4", "1.2.3.4 ", ""})
    EXPECT_FALSE(parse_ipv4_address(bad).has_value()) << bad;
  EXPECT_EQ(*parse_ipv4_prefix("10.0.0.0/8"), (Ipv4Prefix{0x0a000000u, 8}));
  EXPECT_EQ(*parse_ipv4_prefix("0.0.0.0/0"), (Ipv4Prefix{0, 0}));
  EXPECT_EQ(*parse_ipv4_prefix("1.2.3.4/32"), (Ipv4Prefix{0x01020304u, 32}));
  EXPECT_EQ(parse_ipv4_prefix("10.0.0.0/8")->to_string(), "10.0.0.0/8");
  EXPECT_HAS(parse_ipv4_prefix("10.0.0.0").error().message, "prefix '10.0.0.0': expected A.B.C.D/LEN");
  EXPECT_HAS(parse_ipv4_prefix("10.0.0.0/33").error().message, "length '33' is not 0-32");
  EXPECT_HAS(parse_ipv4_prefix("10.0.0.0/").error().message, "length '' is not 0-32");
  EXPECT_HAS(parse_ipv4_prefix("10.0.0.0/8x").error().message, "length '8x' is not 0-32");
  EXPECT_HAS(parse_ipv4_prefix("10.0.0.300/8").error().message, "'10.0.0.300' is not an IPv4 address");
  EXPECT_HAS(parse_ipv4_prefix("10.1.0.0/8").error().message,
             "prefix '10.1.0.0/8': host bits set past /8 (the network is 10.0.0.0/8)");
}

TEST(Routes, DpdkLinesAndCommandLineForms) {
  EXPECT_EQ(*parse_ipv4_route("R198.18.0.0/24 0"), (Ipv4Route{{0xc6120000u, 24}, 0}));
  EXPECT_EQ(*parse_ipv4_route("198.18.1.0/24\t1"), (Ipv4Route{{0xc6120100u, 24}, 1}));
  EXPECT_EQ(*parse_ipv4_route("198.18.2.0/24,2"), (Ipv4Route{{0xc6120200u, 24}, 2}));
  EXPECT_EQ(*parse_ipv4_route("  10.0.0.0/8 , 3  "), (Ipv4Route{{0x0a000000u, 8}, 3}));
  EXPECT_EQ(parse_ipv4_route("10.0.0.0/8 3\r")->next_hop, 3u);  // a file with CRLF lines
}

TEST(Routes, MalformedRoutesAreNamed) {
  EXPECT_HAS(route_error("10.0.0.0/8"), "route '10.0.0.0/8': expected PREFIX NEXT_HOP");
  EXPECT_HAS(route_error("10.0.0.0/8 "), "route '10.0.0.0/8 ': expected PREFIX NEXT_HOP");
  EXPECT_HAS(route_error("10.0.0.0/8,"), "next hop '' is not a number 0-16777214");
  EXPECT_HAS(route_error("10.0.0.0/8 x"), "route '10.0.0.0/8 x': next hop 'x' is not a number");
  EXPECT_HAS(route_error("10.0.0.0/8 -1"), "next hop '-1'");
  EXPECT_HAS(route_error("10.0.0.0/8 1 2"), "next hop '1 2'");
  EXPECT_HAS(route_error("10.0.0.0/8,,1"), "next hop ',1'");
  EXPECT_HAS(route_error("10.0.0.0/8 99999999999999999999"), "next hop '99999999999999999999'");
  EXPECT_HAS(route_error("10.0.0.0/40 1"), "route '10.0.0.0/40 1': prefix '10.0.0.0/40': length '40' is not 0-32");
  EXPECT_HAS(route_error("10.0.0.1/8 1"), "host bits set past /8 (the network is 10.0.0.0/8)");
  auto small = parse_ipv4_route("10.0.0.0/8 16", 15);
  ASSERT_FALSE(small.has_value());
  EXPECT_HAS(small.error().message, "next hop '16' is not a number 0-15");
}

TEST(Routes, FilesSkipCommentsAndBlankLinesAndNameTheLine) {
  auto r = parse_ipv4_routes("# routes\nR198.18.0.0/24 0\n\n   \nR198.18.1.0/24 1\n# end", "f.cfg");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1], (Ipv4Route{{0xc6120100u, 24}, 1}));
  auto bad = parse_ipv4_routes("R198.18.0.0/24 0\nR198.18.1.0/24 one\n", "f.cfg");
  ASSERT_FALSE(bad.has_value());
  EXPECT_HAS(bad.error().message, "f.cfg:2: route 'R198.18.1.0/24 one': next hop 'one'");
  auto dup = parse_ipv4_routes("10.0.0.0/8 1\n11.0.0.0/8 2\n10.0.0.0/8 3\n", "f.cfg");
  ASSERT_FALSE(dup.has_value());
  EXPECT_HAS(dup.error().message, "f.cfg:3: route 10.0.0.0/8 duplicates the prefix of line 1");
  // Nested prefixes are what longest-prefix match is for: accepted.
  EXPECT_TRUE(parse_ipv4_routes("10.0.0.0/8 1\n10.1.0.0/16 2\n", "f.cfg").has_value());
  EXPECT_TRUE(parse_ipv4_routes("", "empty").value().empty());
}

TEST(Routes, ReadFileAndLoadIntoATable) {
  const std::string path = ::testing::TempDir() + "ws_routes_test.cfg";
  {
    std::ofstream out(path);
    out << "# DPDK l3fwd format\nR198.18.0.0/24 0\nR198.18.1.0/24 1\nR198.18.1.128/25 2\n";
  }
  auto routes = read_ipv4_routes(path);
  ASSERT_TRUE(routes.has_value()) << routes.error().message;
  auto t = Lpm4::create({"routes", 2, 4, HugePolicy::never});
  ASSERT_TRUE(t.has_value());
  auto full = add_ipv4_routes(**t, *routes, path);
  ASSERT_FALSE(full.has_value());
  EXPECT_HAS(full.error().message,
             path + ": lpm 'routes': route 198.18.1.128/25: the table is full (2 routes, max_routes 2)");
  EXPECT_EQ((*t)->lookup(*parse_ipv4_address("198.18.1.200")), 1u);
  std::remove(path.c_str());
  auto missing = read_ipv4_routes(path);
  ASSERT_FALSE(missing.has_value());
  EXPECT_HAS(missing.error().message, "route file '" + path + "': cannot open");
}

}  // namespace
}  // namespace ws
