// SPDX-License-Identifier: BSD-3-Clause
// IPv4 routes as text: DPDK l3fwd's route files ("R198.18.0.0/24 0" per line, '#' comments) and
// single routes from a command line ("198.18.0.0/24,0"), loaded into an Lpm4.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ws/core/result.hpp"
#include "ws/lpm/lpm.hpp"

namespace ws {

/// A route: a prefix and the next hop its addresses go to.
struct Ipv4Route {
  Ipv4Prefix prefix;           ///< Destination network.
  std::uint32_t next_hop = 0;  ///< Where its packets go (a port id in l3fwd).
  /// Same prefix and next hop.
  bool operator==(const Ipv4Route&) const = default;
};

/// One route: "[R]A.B.C.D/LEN NEXT_HOP", the separator blanks or one comma (the leading 'R' is
/// DPDK l3fwd's route-line marker). NEXT_HOP is decimal, at most `max_next_hop`. Errors name
/// the text and what is wrong with it.
Result<Ipv4Route> parse_ipv4_route(std::string_view text, std::uint32_t max_next_hop = lpm_max_next_hop);

/// A route file's text: one route per line (as parse_ipv4_route), blank lines and lines starting
/// with '#' skipped. A prefix given twice is refused, naming both lines. Errors start with
/// "SOURCE:LINE:" (`source` names the text, e.g. its file).
Result<std::vector<Ipv4Route>> parse_ipv4_routes(std::string_view text, std::string_view source,
                                                 std::uint32_t max_next_hop = lpm_max_next_hop);

/// parse_ipv4_routes() of a file's contents; an unreadable file is an error naming it.
Result<std::vector<Ipv4Route>> read_ipv4_routes(const std::string& path, std::uint32_t max_next_hop = lpm_max_next_hop);

/// Adds every route to `table`; the first refusal stops, naming the route (routes added before it
/// stay). `source` prefixes errors, as in parse_ipv4_routes.
Result<void> add_ipv4_routes(Lpm4& table, const std::vector<Ipv4Route>& routes, std::string_view source);

}  // namespace ws
