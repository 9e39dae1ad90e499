// SPDX-License-Identifier: BSD-3-Clause
// Helpers for drivers on kernel interfaces (kernel_iface.hpp). Kept out of the header: glibc's
// <net/if.h> and the kernel's <linux/if.h> (which net_tap needs) cannot share a translation unit.
#include "ws/drivers/kernel_iface.hpp"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ws {

Result<MacAddress> kernel_interface_mac(const std::string& iface) {
  if (iface.size() >= IFNAMSIZ) return fail("longer than {} characters", IFNAMSIZ - 1);
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, iface.c_str(), iface.size() + 1);
  const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return fail("socket: {}", std::strerror(errno));
  const int rc = ::ioctl(s, SIOCGIFHWADDR, &ifr);
  const int e = errno;
  ::close(s);
  if (rc != 0) return fail("no such interface in this network namespace ({})", std::strerror(e));
  MacAddress mac;
  std::memcpy(mac.bytes.data(), ifr.ifr_hwaddr.sa_data, mac.bytes.size());
  return mac;
}

}  // namespace ws
