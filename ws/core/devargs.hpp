// SPDX-License-Identifier: BSD-3-Clause
// Device strings in DPDK's form: "net_vhost0,iface=/tmp/vhost0,queues=4". The first field is
// the device name; the rest are key=value pairs, where a value may be a bracketed list
// ("key=[a,b]"). Keys may repeat (net_pcap takes one rx_pcap per queue). As DPDK's kvargs, a
// bare key ("net_tap0,persist") is accepted: it switches a boolean on and is an error elsewhere.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ws/core/result.hpp"

namespace ws {

/// One key a driver accepts, for validation and help.
struct ParamSpec {
  std::string_view key;            ///< The key, as in "size" of "net_null0,size=64".
  std::string_view type;           ///< "uint", "bool", "path", "string", ...
  std::string_view default_value;  ///< What applies when the key is absent (text, for help).
  std::string_view help;           ///< One line on what the key does.
};

/// A parsed device string: its name and its key=value pairs, in order.
class DevArgs {
 public:
  /// Parses the text; errors name the device string and the offending part.
  static Result<DevArgs> parse(std::string_view text);

  const std::string& name() const { return name_; }  ///< The device name: "net_vhost0".
  const std::string& text() const { return text_; }  ///< The whole string as given.
  /// Every key=value pair in order; a bare key has an empty value.
  const std::vector<std::pair<std::string, std::string>>& pairs() const { return pairs_; }

  /// True when `key` was given (with a value or bare).
  bool has(std::string_view key) const;
  /// First value of `key`, if given.
  std::optional<std::string_view> get(std::string_view key) const;
  /// Every value of `key`, in order (empty when absent).
  std::vector<std::string_view> get_all(std::string_view key) const;

  /// Every key must be in `known`; the error lists the known keys.
  Result<void> check_keys(std::span<const ParamSpec> known) const;

  /// Typed getters: missing key -> default; bad value -> error naming device, key, value, range.
  Result<std::uint64_t> get_uint(std::string_view key, std::uint64_t default_value, std::uint64_t min,
                                 std::uint64_t max) const;
  /// A boolean (1/true/yes/on, 0/false/no/off, or a bare key for true); missing: the default;
  /// anything else: an error naming device, key and value.
  Result<bool> get_bool(std::string_view key, bool default_value) const;
  /// The first value of `key` as text, or `default_value` when absent.
  std::string get_string(std::string_view key, std::string_view default_value) const;

 private:
  std::string text_;
  std::string name_;
  std::vector<std::pair<std::string, std::string>> pairs_;  // a bare key has an empty value
  std::vector<std::string> bare_;                           // keys given without '='
  bool bare(std::string_view key) const;
};

/// "size (uint, default 64): packet length" lines for help and error messages.
std::string describe_params(std::span<const ParamSpec> params);

}  // namespace ws
