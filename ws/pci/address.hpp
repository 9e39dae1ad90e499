// SPDX-License-Identifier: BSD-3-Clause
/// @file
/// A PCI device's address (domain:bus:device.function), parsed and printed as DPDK does:
/// "0000:00:04.0", or "00:04.0" with domain 0; and its vendor and device ids, by which drivers
/// claim it.
#pragma once
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "ws/core/result.hpp"

namespace ws::pci {

/// Where a device sits: domain:bus:device.function.
struct Address {
  std::uint32_t domain = 0;   ///< up to 0xffff in sysfs names (DPDK prints four digits)
  std::uint8_t bus = 0;       ///< 0..255
  std::uint8_t device = 0;    ///< 0..31
  std::uint8_t function = 0;  ///< 0..7

  /// "0000:00:04.0" or "00:04.0"; hex digits, either case. Errors say what the form is.
  static Result<Address> parse(std::string_view text);
  /// Whether `text` looks like a PCI address rather than a virtual device name (starts with hex
  /// digits and a colon), so a command line can tell "-a 0000:00:04.0" from "-a net_null0".
  static bool looks_like(std::string_view text);
  /// "0000:00:04.0", as sysfs and DPDK name it.
  std::string to_string() const;
  /// Ordered as the bus is scanned: domain, bus, device, function.
  auto operator<=>(const Address&) const = default;
};

/// What a device is: its vendor and device ids (config space offsets 0 and 2).
struct Id {
  std::uint16_t vendor = 0;  ///< e.g. 0x8086 (Intel), 0x1af4 (virtio)
  std::uint16_t device = 0;  ///< e.g. 0x10d3 (82574L), 0x1041 (virtio-net, modern)
  /// Same vendor and device.
  bool operator==(const Id&) const = default;
};

}  // namespace ws::pci
