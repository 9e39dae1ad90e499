// SPDX-License-Identifier: BSD-3-Clause
// Longest-prefix match for IPv4 routes: a DIR-24-8 table (Gupta, Lin, McKeown, "Routing Lookups
// in Hardware at Memory Access Speeds", 1998), as DPDK's rte_lpm. One 2^24-entry table indexed
// by the top 24 address bits answers every prefix up to /24 in one load; a longer prefix turns
// its /24 entry into a pointer to a 256-entry group indexed by the last byte (second load).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws/core/arena.hpp"
#include "ws/core/result.hpp"

namespace ws {

/// An IPv4 prefix: a network address and a length.
struct Ipv4Prefix {
  std::uint32_t addr = 0;   ///< Network address in host byte order; bits past `length` are zero.
  std::uint8_t length = 0;  ///< Prefix length, 0 to 32.
  /// Same address and length.
  bool operator==(const Ipv4Prefix&) const = default;
  /// "10.0.0.0/8".
  std::string to_string() const;
};

/// "A.B.C.D" in host byte order. Errors name the text.
Result<std::uint32_t> parse_ipv4_address(std::string_view text);
/// "A.B.C.D" of a host-byte-order address.
std::string ipv4_to_string(std::uint32_t addr);
/// "A.B.C.D/LEN". Refused, naming the text: a bad address, a length missing or above 32, and
/// host bits set past the length ("10.1.0.0/8" overlaps more than the network it names; the
/// message gives the network meant, "10.0.0.0/8").
Result<Ipv4Prefix> parse_ipv4_prefix(std::string_view text);

/// Value lookups return for an address no route covers.
inline constexpr std::uint32_t lpm_no_route = 0x00ffffff;
/// The largest next hop a route may carry (next hops are 24 bits; lpm_no_route is reserved).
inline constexpr std::uint32_t lpm_max_next_hop = lpm_no_route - 1;
/// Routes longer than /24 each need a group of this many entries for their /24.
inline constexpr std::uint32_t lpm_tbl8_group_entries = 256;
/// The most 256-entry groups a table may have (8 GiB of groups; an entry's index into them must
/// fit a signed 32-bit gather index).
inline constexpr std::uint32_t lpm_max_tbl8_groups = 1u << 23;

/// The most routes a table may hold (its bookkeeping takes 32 bytes per route it may hold).
inline constexpr std::uint32_t lpm_max_routes = 1u << 24;

/// Sizes and memory of an Lpm4 table.
struct LpmConfig {
  std::string name = "lpm";                 ///< Names the table in errors and its memory.
  std::uint32_t max_routes = 1024;          ///< Routes the table holds at most (<= lpm_max_routes).
  std::uint32_t tbl8_groups = 256;          ///< /24s that may hold routes longer than /24.
  HugePolicy huge = HugePolicy::automatic;  ///< 2 MiB pages for the tables (as an Arena).
};

/// An IPv4 longest-prefix-match table. Lookups are lock-free reads and may run on any number of
/// threads; add() and remove() run on one control thread and must not run during lookups (as
/// rte_lpm without RCU).
class Lpm4 {
 public:
  /// Bytes of table memory `config` needs (the 2^24 first-level entries and the groups).
  static std::size_t memory_bytes(const LpmConfig& config) noexcept;
  /// Creates an empty table. Errors name the table and the bad size.
  static Result<std::unique_ptr<Lpm4>> create(const LpmConfig& config);
  ~Lpm4();
  Lpm4(const Lpm4&) = delete;
  Lpm4& operator=(const Lpm4&) = delete;

  /// Adds a route. Refused, leaving the table unchanged: a next hop above lpm_max_next_hop, a
  /// prefix already present (whatever its next hop), a full table (max_routes) and a route
  /// longer than /24 for which no group is free. Each error names the route and the limit.
  Result<void> add(Ipv4Prefix prefix, std::uint32_t next_hop);
  /// Removes a route; addresses it covered fall back to the next longest route covering them.
  /// Refused when the prefix is not in the table.
  Result<void> remove(Ipv4Prefix prefix);
  /// The next hop of exactly this prefix, or lpm_no_route when the table does not hold it.
  std::uint32_t find(Ipv4Prefix prefix) const;
  /// Removes every route.
  void clear();

  /// The next hop of the longest prefix covering `addr` (host byte order), or lpm_no_route.
  std::uint32_t lookup(std::uint32_t addr) const noexcept {
    std::uint32_t e = tbl24_[addr >> 8];
    if (e & ext_flag) [[unlikely]]
      e = tbl8_[((e & value_mask) << 8) | (addr & 0xff)];
    return e & value_mask;
  }
  /// lookup() of n addresses into next_hops (lpm_no_route for a miss). Faster than n calls
  /// for bursts: the first-level loads of the whole burst are issued before any is used. The
  /// version (portable, AVX2, AVX-512) is the widest the SIMD level allowed at create().
  void lookup_bulk(const std::uint32_t* addrs, std::uint32_t* next_hops, std::size_t n) const noexcept {
    bulk_(*this, addrs, next_hops, n);
  }

  /// Routes in the table.
  std::uint32_t route_count() const noexcept { return routes_; }
  /// 256-entry groups in use (one per /24 holding routes longer than /24).
  std::uint32_t tbl8_groups_used() const noexcept {
    return tbl8_groups_ - static_cast<std::uint32_t>(free_groups_.size());
  }
  /// The configuration the table was created with.
  const LpmConfig& config() const noexcept { return config_; }

 private:
  // An entry: bits 0-23 a next hop (or, with ext_flag, a group index), bits 24-29 the length
  // of the route that wrote it (the add/remove bookkeeping; lookups mask it off).
  static constexpr std::uint32_t value_mask = 0x00ffffff;
  static constexpr std::uint32_t ext_flag = 1u << 31;
  static constexpr unsigned depth_shift = 24;
  static constexpr std::uint32_t empty = lpm_no_route;  // depth 0, no next hop

  using BulkFn = void (*)(const Lpm4&, const std::uint32_t*, std::uint32_t*, std::size_t) noexcept;
  friend struct LpmBulk;

  Lpm4(const LpmConfig& config, std::unique_ptr<Arena> arena, std::uint32_t* tbl24, std::uint32_t* tbl8);
  static std::uint32_t depth_of(std::uint32_t e) noexcept { return (e >> depth_shift) & 0x3f; }
  static std::uint32_t entry(std::uint32_t next_hop, std::uint32_t depth) noexcept {
    return next_hop | depth << depth_shift;
  }
  // Writes `value` (of depth `depth`) into entries [first, first + count) of tbl24 or a group,
  // where the entry there is no longer than `depth` (a longer route keeps its entries).
  void fill_tbl24(std::uint32_t first, std::uint32_t count, std::uint32_t value, std::uint32_t depth) noexcept;
  void fill_tbl8(std::uint32_t group, std::uint32_t first, std::uint32_t count, std::uint32_t value,
                 std::uint32_t depth) noexcept;
  // Writes `value` where an entry has exactly depth `depth` (removal of that route).
  void replace_tbl24(std::uint32_t first, std::uint32_t count, std::uint32_t depth, std::uint32_t value) noexcept;
  void replace_tbl8(std::uint32_t group, std::uint32_t first, std::uint32_t count, std::uint32_t depth,
                    std::uint32_t value) noexcept;
  // Folds group `group`, pointed to by tbl24 entry `index`, back into it when no route longer
  // than /24 remains in it.
  void maybe_free_group(std::uint32_t index, std::uint32_t group) noexcept;
  // The entry value of the longest route shorter than `depth` covering `addr` (empty if none).
  std::uint32_t covering_entry(std::uint32_t addr, std::uint32_t depth) const;

  LpmConfig config_;
  std::unique_ptr<Arena> arena_;
  std::uint32_t* tbl24_;
  std::uint32_t* tbl8_;
  BulkFn bulk_;
  std::uint32_t tbl8_groups_;
  std::uint32_t routes_ = 0;
  std::vector<std::uint32_t> free_groups_;  // a stack; the lowest index on top
  // The routes, for add/remove bookkeeping: an open-addressing hash table of (address, length)
  // -> next hop, sized at creation for max_routes at most half full (no allocation per route).
  struct RouteSlot {
    std::uint64_t key;  // address << 8 | length; empty_key when free
    std::uint32_t next_hop;
  };
  static constexpr std::uint64_t empty_key = ~0ULL;
  RouteSlot* find_route(std::uint32_t addr, std::uint32_t length) const noexcept;
  void insert_route(std::uint32_t addr, std::uint32_t length, std::uint32_t next_hop) noexcept;
  void erase_route(RouteSlot* slot) noexcept;
  std::vector<RouteSlot> slots_;
  std::size_t slot_mask_ = 0;
};

}  // namespace ws
