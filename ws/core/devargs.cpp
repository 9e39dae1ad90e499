// SPDX-License-Identifier: BSD-3-Clause
// Device string parsing and typed access.
#include "ws/core/devargs.hpp"

#include <algorithm>
#include <charconv>

namespace ws {
namespace {

bool valid_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == ':';
}

}  // namespace

Result<DevArgs> DevArgs::parse(std::string_view text) {
  DevArgs out;
  out.text_ = std::string(text);
  // Split at top-level commas (commas inside [...] belong to a list value).
  std::vector<std::string_view> fields;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      fields.push_back(text.substr(start, i - start));
      start = i + 1;
    } else if (text[i] == '[') {
      ++depth;
    } else if (text[i] == ']') {
      if (--depth < 0) return fail("device '{}': unbalanced ']' at offset {}", text, i);
    }
  }
  if (depth != 0) return fail("device '{}': unbalanced '['", text);
  const std::string_view name = fields.front();
  if (name.empty()) return fail("device '{}': empty device name (expected e.g. net_null0,size=64)", text);
  if (!std::all_of(name.begin(), name.end(), valid_name_char))
    return fail("device '{}': name '{}' has characters outside [A-Za-z0-9_.:-]", text, name);
  out.name_ = std::string(name);
  for (std::size_t i = 1; i < fields.size(); ++i) {
    const std::string_view f = fields[i];
    const auto eq = f.find('=');
    if (f.empty()) return fail("device '{}': empty field after ',' (expected key=value)", text);
    const std::string_view key = f.substr(0, eq);
    if (key.empty()) return fail("device '{}': '{}' has an empty key", text, f);
    if (!std::all_of(key.begin(), key.end(), valid_name_char))
      return fail("device '{}': key '{}' has characters outside [A-Za-z0-9_.:-]", text, key);
    if (eq == std::string_view::npos) out.bare_.emplace_back(key);
    out.pairs_.emplace_back(std::string(key),
                            eq == std::string_view::npos ? std::string() : std::string(f.substr(eq + 1)));
  }
  return out;
}

bool DevArgs::bare(std::string_view key) const { return std::find(bare_.begin(), bare_.end(), key) != bare_.end(); }

bool DevArgs::has(std::string_view key) const { return get(key).has_value(); }

std::optional<std::string_view> DevArgs::get(std::string_view key) const {
  for (const auto& [k, v] : pairs_)
    if (k == key) return std::string_view(v);
  return std::nullopt;
}

std::vector<std::string_view> DevArgs::get_all(std::string_view key) const {
  std::vector<std::string_view> out;
  for (const auto& [k, v] : pairs_)
    if (k == key) out.emplace_back(v);
  return out;
}

Result<void> DevArgs::check_keys(std::span<const ParamSpec> known) const {
  for (const auto& [k, v] : pairs_) {
    const bool ok = std::any_of(known.begin(), known.end(), [&](const ParamSpec& p) { return p.key == k; });
    if (!ok) {
      std::string keys;
      for (const auto& p : known) keys += (keys.empty() ? "" : ", ") + std::string(p.key);
      return fail("device '{}': unknown key '{}' (known keys: {})", name_, k, keys.empty() ? "none" : keys);
    }
  }
  return {};
}

Result<std::uint64_t> DevArgs::get_uint(std::string_view key, std::uint64_t default_value, std::uint64_t min,
                                        std::uint64_t max) const {
  const auto v = get(key);
  if (!v) return default_value;
  if (bare(key))
    return fail("device '{}': key '{}' has no value, expected key=value with an unsigned integer in [{}, {}]", name_,
                key, min, max);
  std::uint64_t n = 0;
  int base = 10;
  std::string_view digits = *v;
  if (digits.starts_with("0x") || digits.starts_with("0X")) {
    base = 16;
    digits.remove_prefix(2);
  }
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n, base);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size())
    return fail("device '{}': key '{}' has value '{}', expected an unsigned integer in [{}, {}]", name_, key, *v, min,
                max);
  if (n < min || n > max)
    return fail("device '{}': key '{}' has value {}, expected a value in [{}, {}]", name_, key, n, min, max);
  return n;
}

Result<bool> DevArgs::get_bool(std::string_view key, bool default_value) const {
  const auto v = get(key);
  if (!v) return default_value;
  if (bare(key) || *v == "1" || *v == "true" || *v == "yes" || *v == "on") return true;
  if (*v == "0" || *v == "false" || *v == "no" || *v == "off") return false;
  return fail("device '{}': key '{}' has value '{}', expected 0 or 1", name_, key, *v);
}

std::string DevArgs::get_string(std::string_view key, std::string_view default_value) const {
  return std::string(get(key).value_or(default_value));
}

std::string describe_params(std::span<const ParamSpec> params) {
  std::string out;
  for (const auto& p : params)
    out += fmt::format("  {} ({}{}{}): {}\n", p.key, p.type, p.default_value.empty() ? "" : ", default ",
                       p.default_value, p.help);
  return out;
}

}  // namespace ws
