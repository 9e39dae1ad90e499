// SPDX-License-Identifier: BSD-3-Clause
// Hexadecimal masks as DPDK's command lines write them ("0x3" or "3"): -c, --portmask,
// --coremask, the offload masks. One reading for every option; each caller words its own error.
#pragma once
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ws {

/// The 64-bit value of `text`, hexadecimal digits with an optional 0x/0X prefix and nothing
/// else; nullopt when it is empty, has another character or does not fit.
inline std::optional<std::uint64_t> parse_hex_mask(std::string_view text) noexcept {
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace ws
