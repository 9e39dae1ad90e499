// SPDX-License-Identifier: BSD-3-Clause
// PCI address parsing and printing.
#include "ws/pci/address.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>

namespace ws::pci {
namespace {

// Between min_digits and max_digits hex digits from the front of `s`, as a number.
bool take_hex(std::string_view& s, std::size_t min_digits, std::size_t max_digits, std::uint32_t& out) {
  std::size_t n = 0;
  while (n < s.size() && n < max_digits && std::isxdigit(static_cast<unsigned char>(s[n]))) ++n;
  if (n < min_digits) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + n, out, 16);
  if (ec != std::errc{} || end != s.data() + n) return false;
  s.remove_prefix(n);
  return true;
}

bool take(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}

}  // namespace

bool Address::looks_like(std::string_view text) {
  std::uint32_t v = 0;
  return take_hex(text, 2, 8, v) && take(text, ':');
}

Result<Address> Address::parse(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return fail(
        "PCI address '{}': {} (expected DOMAIN:BUS:DEVICE.FUNCTION in hex, e.g. 0000:00:04.0, or "
        "BUS:DEVICE.FUNCTION)",
        text, why);
  };
  std::string_view s = text;
  std::uint32_t a = 0, b = 0, d = 0, f = 0;
  if (!take_hex(s, 2, 8, a) || !take(s, ':')) return bad("no bus");
  // Either "domain:bus:dev.fn" or "bus:dev.fn": look for a second colon.
  const bool with_domain = s.find(':') != std::string_view::npos;
  Address addr;
  if (with_domain) {
    if (a > 0xffff) return bad("domain over ffff");
    addr.domain = a;
    if (!take_hex(s, 2, 2, b) || !take(s, ':')) return bad("the bus must be two hex digits");
  } else {
    if (a > 0xff) return bad("the bus must be two hex digits");
    b = a;
  }
  if (!take_hex(s, 2, 2, d) || !take(s, '.')) return bad("the device must be two hex digits then '.'");
  if (!take_hex(s, 1, 1, f)) return bad("the function must be one digit 0-7");
  if (!s.empty()) return bad(fmt::format("unexpected '{}' at the end", s));
  if (d > 0x1f) return bad(fmt::format("device {:02x} is over 1f", d));
  if (f > 7) return bad(fmt::format("function {} is over 7", f));
  addr.bus = static_cast<std::uint8_t>(b);
  addr.device = static_cast<std::uint8_t>(d);
  addr.function = static_cast<std::uint8_t>(f);
  return addr;
}

std::string Address::to_string() const {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function);
}

}  // namespace ws::pci
