// SPDX-License-Identifier: BSD-3-Clause
// Lpm4: prefix parsing, route add/remove on the DIR-24-8 tables, bulk lookups.
#include "ws/lpm/lpm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>

#include "ws/lpm/lpm_bulk.hpp"

namespace ws {
namespace {

constexpr std::uint32_t tbl24_entries = 1u << 24;

std::uint32_t mask_of(std::uint32_t length) noexcept { return length == 0 ? 0 : ~0u << (32 - length); }

}  // namespace

std::string ipv4_to_string(std::uint32_t a) {
  return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
}

std::string Ipv4Prefix::to_string() const { return fmt::format("{}/{}", ipv4_to_string(addr), length); }

Result<std::uint32_t> parse_ipv4_address(std::string_view text) {
  std::uint32_t addr = 0;
  std::string_view rest = text;
  for (int i = 0; i < 4; ++i) {
    unsigned byte = 0;
    const char* end = rest.data() + rest.size();
    auto [p, ec] = std::from_chars(rest.data(), end, byte);
    // Decimal only, at most 3 digits, no leading zeros: "010" means octal to inet_aton.
    const auto digits = static_cast<std::size_t>(p - rest.data());
    if (ec != std::errc{} || digits == 0 || digits > 3 || byte > 255 || (digits > 1 && rest[0] == '0'))
      return fail("'{}' is not an IPv4 address (expected A.B.C.D, each 0-255)", text);
    addr = addr << 8 | byte;
    rest.remove_prefix(digits);
    if (i < 3) {
      if (rest.empty() || rest[0] != '.')
        return fail("'{}' is not an IPv4 address (expected A.B.C.D, each 0-255)", text);
      rest.remove_prefix(1);
    }
  }
  if (!rest.empty()) return fail("'{}' is not an IPv4 address (expected A.B.C.D, each 0-255)", text);
  return addr;
}

Result<Ipv4Prefix> parse_ipv4_prefix(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return fail("prefix '{}': expected A.B.C.D/LEN (LEN 0-32)", text);
  auto addr = parse_ipv4_address(text.substr(0, slash));
  if (!addr) return fail("prefix '{}': {}", text, addr.error().message);
  const std::string_view len_text = text.substr(slash + 1);
  unsigned len = 0;
  auto [p, ec] = std::from_chars(len_text.data(), len_text.data() + len_text.size(), len);
  if (len_text.empty() || ec != std::errc{} || p != len_text.data() + len_text.size() || len > 32 ||
      len_text.size() > 2)
    return fail("prefix '{}': length '{}' is not 0-32", text, len_text);
  const Ipv4Prefix prefix{*addr & mask_of(len), static_cast<std::uint8_t>(len)};
  if (prefix.addr != *addr)
    return fail("prefix '{}': host bits set past /{} (the network is {})", text, len, prefix.to_string());
  return prefix;
}

std::size_t Lpm4::memory_bytes(const LpmConfig& config) noexcept {
  return std::size_t{tbl24_entries} * 4 + std::size_t{config.tbl8_groups} * lpm_tbl8_group_entries * 4 + 2 * 64;
}

Result<std::unique_ptr<Lpm4>> Lpm4::create(const LpmConfig& config) {
  if (config.max_routes == 0 || config.max_routes > lpm_max_routes)
    return fail("lpm '{}': max_routes {} is not 1-{}", config.name, config.max_routes, lpm_max_routes);
  if (config.tbl8_groups > lpm_max_tbl8_groups)
    return fail("lpm '{}': {} tbl8 groups requested, at most {}", config.name, config.tbl8_groups, lpm_max_tbl8_groups);
  auto arena = Arena::create({config.name, memory_bytes(config), config.huge});
  if (!arena) return fail("lpm '{}': {}", config.name, arena.error().message);
  auto tbl24 = (*arena)->allocate(std::size_t{tbl24_entries} * 4, 64, "tbl24");
  if (!tbl24) return std::unexpected(tbl24.error());
  // At least one group, so that the table's group pointer is valid even when none may be used.
  auto tbl8 = (*arena)->allocate(std::max<std::size_t>(1, config.tbl8_groups) * lpm_tbl8_group_entries * 4, 64, "tbl8");
  if (!tbl8) return std::unexpected(tbl8.error());
  return std::unique_ptr<Lpm4>(
      new Lpm4(config, std::move(*arena), static_cast<std::uint32_t*>(*tbl24), static_cast<std::uint32_t*>(*tbl8)));
}

Lpm4::Lpm4(const LpmConfig& config, std::unique_ptr<Arena> arena, std::uint32_t* tbl24, std::uint32_t* tbl8)
    : config_(config),
      arena_(std::move(arena)),
      tbl24_(tbl24),
      tbl8_(tbl8),
      bulk_(LpmBulk::pick(simd_level())),
      tbl8_groups_(config.tbl8_groups) {
  std::fill_n(tbl24_, tbl24_entries, empty);
  slots_.assign(std::bit_ceil(std::size_t{config.max_routes} * 2), RouteSlot{empty_key, 0});
  slot_mask_ = slots_.size() - 1;
  free_groups_.reserve(tbl8_groups_);
  for (std::uint32_t g = tbl8_groups_; g-- > 0;) free_groups_.push_back(g);
}

Lpm4::~Lpm4() = default;

void Lpm4::clear() {
  std::fill_n(tbl24_, tbl24_entries, empty);
  free_groups_.clear();
  for (std::uint32_t g = tbl8_groups_; g-- > 0;) free_groups_.push_back(g);
  std::fill(slots_.begin(), slots_.end(), RouteSlot{empty_key, 0});
  routes_ = 0;
}

std::uint32_t Lpm4::find(Ipv4Prefix prefix) const {
  if (prefix.length > 32) return lpm_no_route;
  const RouteSlot* s = find_route(prefix.addr, prefix.length);
  return s ? s->next_hop : lpm_no_route;
}

namespace {

std::uint64_t route_key(std::uint32_t addr, std::uint32_t length) noexcept { return std::uint64_t{addr} << 8 | length; }
// Fibonacci hashing: the multiplication spreads nearby prefixes; the top bits index the table.
std::size_t route_hash(std::uint64_t key) noexcept {
  return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ULL) >> 20);
}

}  // namespace

Lpm4::RouteSlot* Lpm4::find_route(std::uint32_t addr, std::uint32_t length) const noexcept {
  const std::uint64_t key = route_key(addr, length);
  for (std::size_t i = route_hash(key) & slot_mask_;; i = (i + 1) & slot_mask_) {
    const RouteSlot& s = slots_[i];
    if (s.key == key) return const_cast<RouteSlot*>(&s);
    if (s.key == empty_key) return nullptr;
  }
}

void Lpm4::insert_route(std::uint32_t addr, std::uint32_t length, std::uint32_t next_hop) noexcept {
  const std::uint64_t key = route_key(addr, length);
  std::size_t i = route_hash(key) & slot_mask_;
  while (slots_[i].key != empty_key) i = (i + 1) & slot_mask_;  // at most half full: a free slot exists
  slots_[i] = {key, next_hop};
}

void Lpm4::erase_route(RouteSlot* slot) noexcept {
  // Linear probing without tombstones: move later entries of the probe run back into the hole
  // when the hole lies between their home slot and where they sit.
  std::size_t hole = static_cast<std::size_t>(slot - slots_.data());
  for (std::size_t i = (hole + 1) & slot_mask_; slots_[i].key != empty_key; i = (i + 1) & slot_mask_) {
    const std::size_t home = route_hash(slots_[i].key) & slot_mask_;
    if (((i - home) & slot_mask_) >= ((i - hole) & slot_mask_)) {
      slots_[hole] = slots_[i];
      hole = i;
    }
  }
  slots_[hole].key = empty_key;
}

void Lpm4::fill_tbl24(std::uint32_t first, std::uint32_t count, std::uint32_t value, std::uint32_t depth) noexcept {
  for (std::uint32_t i = first; i < first + count; ++i) {
    const std::uint32_t e = tbl24_[i];
    if (e & ext_flag) {
      fill_tbl8(e & value_mask, 0, lpm_tbl8_group_entries, value, depth);
    } else if (depth_of(e) <= depth) {
      tbl24_[i] = value;
    }
  }
}

void Lpm4::fill_tbl8(std::uint32_t group, std::uint32_t first, std::uint32_t count, std::uint32_t value,
                     std::uint32_t depth) noexcept {
  std::uint32_t* g = tbl8_ + std::size_t{group} * lpm_tbl8_group_entries;
  for (std::uint32_t i = first; i < first + count; ++i)
    if (depth_of(g[i]) <= depth) g[i] = value;
}

void Lpm4::replace_tbl24(std::uint32_t first, std::uint32_t count, std::uint32_t depth, std::uint32_t value) noexcept {
  for (std::uint32_t i = first; i < first + count; ++i) {
    const std::uint32_t e = tbl24_[i];
    if (e & ext_flag) {
      // The group stays: it exists for a route longer than /24, which this removal keeps.
      replace_tbl8(e & value_mask, 0, lpm_tbl8_group_entries, depth, value);
    } else if (depth_of(e) == depth) {
      tbl24_[i] = value;
    }
  }
}

void Lpm4::replace_tbl8(std::uint32_t group, std::uint32_t first, std::uint32_t count, std::uint32_t depth,
                        std::uint32_t value) noexcept {
  std::uint32_t* g = tbl8_ + std::size_t{group} * lpm_tbl8_group_entries;
  for (std::uint32_t i = first; i < first + count; ++i)
    if (depth_of(g[i]) == depth) g[i] = value;
}

void Lpm4::maybe_free_group(std::uint32_t index, std::uint32_t group) noexcept {
  const std::uint32_t* g = tbl8_ + std::size_t{group} * lpm_tbl8_group_entries;
  // With no route longer than /24 left, every entry holds the same covering route (or none).
  if (!std::all_of(g, g + lpm_tbl8_group_entries, [](std::uint32_t e) { return depth_of(e) <= 24; })) return;
  tbl24_[index] = g[0];
  free_groups_.push_back(group);
}

std::uint32_t Lpm4::covering_entry(std::uint32_t addr, std::uint32_t depth) const {
  for (std::uint32_t d = depth; d-- > 0;) {
    if (const RouteSlot* s = find_route(addr & mask_of(d), d)) return entry(s->next_hop, d);
  }
  return empty;
}

Result<void> Lpm4::add(Ipv4Prefix prefix, std::uint32_t next_hop) {
  if (prefix.length > 32) return fail("lpm '{}': prefix length {} is not 0-32", config_.name, prefix.length);
  const std::uint32_t depth = prefix.length;
  const std::uint32_t addr = prefix.addr & mask_of(depth);
  const Ipv4Prefix p{addr, prefix.length};
  if (addr != prefix.addr)
    return fail("lpm '{}': route {}/{}: host bits set past /{} (the network is {})", config_.name,
                ipv4_to_string(prefix.addr), depth, depth, p.to_string());
  if (next_hop > lpm_max_next_hop)
    return fail("lpm '{}': route {}: next hop {} is above the largest, {}", config_.name, p.to_string(), next_hop,
                lpm_max_next_hop);
  if (const RouteSlot* s = find_route(addr, depth))
    return fail("lpm '{}': route {} already exists (next hop {}); remove it first", config_.name, p.to_string(),
                s->next_hop);
  if (routes_ >= config_.max_routes)
    return fail("lpm '{}': route {}: the table is full ({} routes, max_routes {})", config_.name, p.to_string(),
                routes_, config_.max_routes);
  const std::uint32_t value = entry(next_hop, depth);
  if (depth <= 24) {
    fill_tbl24(addr >> 8, 1u << (24 - depth), value, depth);
  } else {
    const std::uint32_t index = addr >> 8;
    std::uint32_t e = tbl24_[index];
    if (!(e & ext_flag)) {
      if (free_groups_.empty())
        return fail(
            "lpm '{}': route {}: no free tbl8 group ({} in use, each /24 holding routes longer than /24 "
            "takes one); raise tbl8_groups",
            config_.name, p.to_string(), tbl8_groups_);
      const std::uint32_t group = free_groups_.back();
      free_groups_.pop_back();
      std::fill_n(tbl8_ + std::size_t{group} * lpm_tbl8_group_entries, lpm_tbl8_group_entries, e);
      e = group | ext_flag;
      tbl24_[index] = e;
    }
    fill_tbl8(e & value_mask, addr & 0xff, 1u << (32 - depth), value, depth);
  }
  insert_route(addr, depth, next_hop);
  ++routes_;
  return {};
}

Result<void> Lpm4::remove(Ipv4Prefix prefix) {
  if (prefix.length > 32) return fail("lpm '{}': prefix length {} is not 0-32", config_.name, prefix.length);
  const std::uint32_t depth = prefix.length;
  RouteSlot* slot = find_route(prefix.addr, depth);
  if (slot == nullptr) return fail("lpm '{}': no route {} to remove", config_.name, prefix.to_string());
  erase_route(slot);
  --routes_;
  const std::uint32_t value = covering_entry(prefix.addr, depth);
  if (depth <= 24) {
    replace_tbl24(prefix.addr >> 8, 1u << (24 - depth), depth, value);
  } else {
    const std::uint32_t index = prefix.addr >> 8;
    const std::uint32_t group = tbl24_[index] & value_mask;
    replace_tbl8(group, prefix.addr & 0xff, 1u << (32 - depth), depth, value);
    maybe_free_group(index, group);
  }
  return {};
}

}  // namespace ws
