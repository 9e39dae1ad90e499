// SPDX-License-Identifier: BSD-3-Clause
// Route text parsing: single routes, route files, loading into an Lpm4.
#include "ws/lpm/routes.hpp"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <unordered_map>

namespace ws {
namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<Ipv4Route> parse_ipv4_route(std::string_view text, std::uint32_t max_next_hop) {
  std::string_view s = trim(text);
  if (!s.empty() && s.front() == 'R') s.remove_prefix(1);
  std::size_t sep = 0;
  while (sep < s.size() && !blank(s[sep]) && s[sep] != ',') ++sep;
  if (sep == s.size())
    return fail("route '{}': expected PREFIX NEXT_HOP (e.g. 198.18.0.0/24 0, or 198.18.0.0/24,0)", text);
  auto prefix = parse_ipv4_prefix(s.substr(0, sep));
  if (!prefix) return fail("route '{}': {}", text, prefix.error().message);
  std::string_view rest = s.substr(sep);
  bool comma = false;
  while (!rest.empty() && (blank(rest.front()) || (rest.front() == ',' && !comma))) {
    comma = comma || rest.front() == ',';
    rest.remove_prefix(1);
  }
  std::uint64_t hop = 0;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), hop);
  if (rest.empty() || ec != std::errc{} || p != rest.data() + rest.size() || hop > max_next_hop)
    return fail("route '{}': next hop '{}' is not a number 0-{}", text, rest, max_next_hop);
  return Ipv4Route{*prefix, static_cast<std::uint32_t>(hop)};
}

Result<std::vector<Ipv4Route>> parse_ipv4_routes(std::string_view text, std::string_view source,
                                                 std::uint32_t max_next_hop) {
  std::vector<Ipv4Route> routes;
  std::unordered_map<std::uint64_t, std::size_t> seen;  // (address, length) -> line
  std::size_t line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    const std::string_view t = trim(line);
    if (t.empty() || t.front() == '#') continue;
    auto route = parse_ipv4_route(t, max_next_hop);
    if (!route) return fail("{}:{}: {}", source, line_no, route.error().message);
    const std::uint64_t key = std::uint64_t{route->prefix.addr} << 8 | route->prefix.length;
    if (auto [it, fresh] = seen.emplace(key, line_no); !fresh)
      return fail("{}:{}: route {} duplicates the prefix of line {}", source, line_no, route->prefix.to_string(),
                  it->second);
    routes.push_back(*route);
  }
  return routes;
}

Result<std::vector<Ipv4Route>> read_ipv4_routes(const std::string& path, std::uint32_t max_next_hop) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("route file '{}': cannot open", path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return fail("route file '{}': read error", path);
  return parse_ipv4_routes(text.str(), path, max_next_hop);
}

Result<void> add_ipv4_routes(Lpm4& table, const std::vector<Ipv4Route>& routes, std::string_view source) {
  for (const auto& r : routes)
    if (auto ok = table.add(r.prefix, r.next_hop); !ok) return fail("{}: {}", source, ok.error().message);
  return {};
}

}  // namespace ws
