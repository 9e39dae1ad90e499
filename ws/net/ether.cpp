// SPDX-License-Identifier: BSD-3-Clause
// MAC address text forms and the IPv4 header checksum.
#include "ws/net/ether.hpp"

#include <charconv>
#include <cstring>

namespace ws {

std::string MacAddress::to_string() const {
  return fmt::format("{:02X}:{:02X}:{:02X}:{:02X}:{:02X}:{:02X}", bytes[0], bytes[1], bytes[2], bytes[3], bytes[4],
                     bytes[5]);
}

Result<MacAddress> MacAddress::parse(std::string_view text) {
  MacAddress mac;
  std::string_view rest = text;
  for (std::size_t i = 0; i < 6; ++i) {
    if (rest.size() < 2) return fail("MAC address '{}': expected six hex bytes like 02:00:00:00:00:01", text);
    std::uint8_t b = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + 2, b, 16);
    if (ec != std::errc{} || end != rest.data() + 2)
      return fail("MAC address '{}': '{}' is not a hex byte", text, rest.substr(0, 2));
    mac.bytes[i] = b;
    rest.remove_prefix(2);
    if (i < 5) {
      if (rest.empty() || (rest[0] != ':' && rest[0] != '-'))
        return fail("MAC address '{}': expected ':' between bytes", text);
      rest.remove_prefix(1);
    }
  }
  if (!rest.empty()) return fail("MAC address '{}': trailing characters '{}'", text, rest);
  return mac;
}

std::uint16_t ipv4_header_checksum(const Ipv4Hdr& hdr) noexcept {
  const std::size_t len = static_cast<std::size_t>(hdr.version_ihl & 0x0f) * 4;
  const auto* p = reinterpret_cast<const std::uint8_t*>(&hdr);
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i + 1 < len; i += 2) {
    if (i == offsetof(Ipv4Hdr, hdr_checksum)) continue;
    std::uint16_t w;
    std::memcpy(&w, p + i, 2);
    sum += w;
  }
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

}  // namespace ws
