// SPDX-License-Identifier: BSD-3-Clause
// sysfs PCI devices: attributes, config space, capabilities, BAR mappings, binding checks.
#include "ws/pci/device.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "ws/pci/vfio.hpp"

namespace ws::pci {
namespace {

namespace fs = std::filesystem;

// The drivers that leave a device to a userspace driver: vfio-pci (behind the IOMMU) and
// uio_pci_generic (no IOMMU: the device is given physical addresses).
constexpr std::string_view uio_driver = "uio_pci_generic";

std::optional<std::string> read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

Result<std::uint64_t> read_hex(const std::string& dir, std::string_view attr) {
  const std::string path = fmt::format("{}/{}", dir, attr);
  auto line = read_line(path);
  if (!line) return fail("cannot read {}", path);
  std::string_view v = *line;
  if (v.starts_with("0x")) v.remove_prefix(2);
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n, 16);
  if (v.empty() || ec != std::errc{} || end != v.data() + v.size())
    return fail("{}: '{}' is not a hex number", path, *line);
  return n;
}

std::vector<BarInfo> read_resources(const std::string& dir) {
  std::vector<BarInfo> bars;
  std::ifstream in(dir + "/resource");
  std::string line;
  while (bars.size() < 6 && std::getline(in, line)) {
    std::istringstream fields(line);
    std::uint64_t start = 0, end = 0, flags = 0;
    fields >> std::hex >> start >> end >> flags;
    BarInfo b;
    if (fields && (start != 0 || end != 0) && end >= start) b = {start, end - start + 1, flags};
    bars.push_back(b);
  }
  return bars;
}

}  // namespace

Bar& Bar::operator=(Bar&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) ::munmap(base_, size_);
    base_ = o.base_;
    size_ = o.size_;
    o.base_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

Bar::~Bar() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

std::string bind_commands(const Address& address, std::string_view driver, std::string_view to) {
  const std::string a = address.to_string();
  std::string cmds = fmt::format("modprobe {}; ", to);
  cmds += fmt::format("echo {} > /sys/bus/pci/devices/{}/driver_override; ", to, a);
  if (!driver.empty()) cmds += fmt::format("echo {} > /sys/bus/pci/devices/{}/driver/unbind; ", a, a);
  cmds += fmt::format("echo {} > /sys/bus/pci/drivers_probe", a);
  return cmds;
}

std::vector<Device> scan(const std::string& root) {
  std::vector<Device> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    auto addr = Address::parse(entry.path().filename().string());
    if (!addr) continue;
    if (auto dev = Device::open(*addr, root)) out.push_back(std::move(*dev));
  }
  std::sort(out.begin(), out.end(), [](const Device& a, const Device& b) { return a.address() < b.address(); });
  return out;
}

Result<Device> Device::open(const Address& address, std::string root) {
  Device d;
  d.address_ = address;
  d.path_ = fmt::format("{}/{}", root, address.to_string());
  d.root_ = std::move(root);
  std::error_code ec;
  if (!fs::exists(d.path_, ec)) {
    std::string present;
    for (const Device& other : scan(d.root_)) present += (present.empty() ? "" : ", ") + other.describe();
    return fail("PCI device {} does not exist (no {}); devices present: {}", address.to_string(), d.path_,
                present.empty() ? "none" : present);
  }
  auto vendor = read_hex(d.path_, "vendor");
  auto device = read_hex(d.path_, "device");
  auto klass = read_hex(d.path_, "class");
  for (const auto* r : {&vendor, &device, &klass})
    if (!*r) return fail("PCI device {}: {}", address.to_string(), r->error().message);
  d.id_ = {static_cast<std::uint16_t>(*vendor), static_cast<std::uint16_t>(*device)};
  auto sv = read_hex(d.path_, "subsystem_vendor"), sd = read_hex(d.path_, "subsystem_device");
  if (sv && sd) d.subsystem_ = {static_cast<std::uint16_t>(*sv), static_cast<std::uint16_t>(*sd)};
  d.class_code_ = static_cast<std::uint32_t>(*klass);
  if (auto node = read_line(d.path_ + "/numa_node")) {
    int n = -1;
    std::from_chars(node->data(), node->data() + node->size(), n);
    d.numa_node_ = n;
  }
  const fs::path link = fs::path(d.path_) / "driver";
  if (fs::is_symlink(link, ec)) d.driver_ = fs::read_symlink(link, ec).filename().string();
  if (auto o = read_line(d.path_ + "/driver_override"); o && *o != "(null)") d.driver_override_ = *o;
  d.bars_ = read_resources(d.path_);
  return d;
}

std::string Device::describe() const { return fmt::format("{} ({:04x}:{:04x})", name(), id_.vendor, id_.device); }

Result<std::vector<std::uint8_t>> Device::config() const {
  if (vfio_) {
    auto bytes = vfio_->read_config(0, 4096);
    if (bytes && bytes->size() < 64)
      return fail("PCI device {}: VFIO gives {} bytes of config space, less than the 64-byte header", describe(),
                  bytes->size());
    return bytes;
  }
  const std::string path = path_ + "/config";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail("PCI device {}: cannot open {}: {}", describe(), path, std::strerror(errno));
  std::vector<std::uint8_t> bytes(4096);
  const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), 0);
  const int e = errno;
  ::close(fd);
  if (n < 0) return fail("PCI device {}: reading {}: {}", describe(), path, std::strerror(e));
  if (n < 64) return fail("PCI device {}: {} holds {} bytes, less than the 64-byte header", describe(), path, n);
  bytes.resize(static_cast<std::size_t>(n));
  return bytes;
}

Result<void> Device::write_config(std::size_t offset, const void* data, std::size_t len) const {
  if (vfio_) return vfio_->write_config(offset, data, len);
  const std::string path = path_ + "/config";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("PCI device {}: cannot open {} for writing: {} (needs root)", describe(), path, std::strerror(errno));
  const ssize_t n = ::pwrite(fd, data, len, static_cast<off_t>(offset));
  const int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(len))
    return fail("PCI device {}: writing {} bytes at {:#x} of {}: {}", describe(), len, offset, path,
                n < 0 ? std::strerror(e) : "short write");
  return {};
}

Result<std::vector<Capability>> Device::parse_capabilities(const std::vector<std::uint8_t>& c, std::string_view who) {
  std::vector<Capability> caps;
  if (c.size() < 64) return fail("PCI device {}: config space of {} bytes has no header", who, c.size());
  const std::uint16_t status = static_cast<std::uint16_t>(c[reg::status] | c[reg::status + 1] << 8);
  if ((status & reg::status_cap_list) == 0) return caps;
  // Only the first 256 bytes hold the standard list; each entry is dword aligned (§6.7).
  const std::size_t limit = std::min<std::size_t>(c.size(), 256);
  std::uint8_t ptr = c[reg::cap_ptr] & 0xfc;
  while (ptr != 0) {
    if (ptr < 64 || ptr + 2u > limit)
      return fail("PCI device {}: capability pointer {:#x} is outside {:#x}..{:#x}", who, ptr, 64, limit - 2);
    if (caps.size() == 48)  // (256 - 64) / 4 entries at most: a longer list loops
      return fail("PCI device {}: the capability list loops (more than 48 entries)", who);
    caps.push_back({c[ptr], ptr});
    ptr = c[ptr + 1u] & 0xfc;
  }
  return caps;
}

Result<std::vector<Capability>> Device::capabilities() const {
  auto c = config();
  if (!c) return std::unexpected(c.error());
  return parse_capabilities(*c, describe());
}

BarInfo Device::bar(unsigned index) const { return index < bars_.size() ? bars_[index] : BarInfo{}; }

Result<Bar> Device::map_bar(unsigned index, std::size_t min_bytes, std::string_view what) const {
  const BarInfo b = bar(index);
  if (b.size == 0) return fail("PCI device {}: BAR {} ({}) is not implemented", describe(), index, what);
  if (!b.memory())
    return fail("PCI device {}: BAR {} ({}) is not a memory BAR (flags {:#x})", describe(), index, what, b.flags);
  if (b.size < min_bytes)
    return fail("PCI device {}: BAR {} ({}) is {} bytes; the driver needs at least {}", describe(), index, what, b.size,
                min_bytes);
  if (vfio_) {
    auto mapped = vfio_->map_bar(index, min_bytes, what);
    if (!mapped) return std::unexpected(mapped.error());
    return Bar(mapped->first, mapped->second);
  }
  const std::string path = fmt::format("{}/resource{}", path_, index);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_SYNC);
  if (fd < 0) return fail("PCI device {}: cannot open {}: {} (needs root)", describe(), path, std::strerror(errno));
  void* p = ::mmap(nullptr, b.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  ::close(fd);  // the mapping stays
  if (p == MAP_FAILED)
    return fail("PCI device {}: mmap of {} ({} bytes): {}", describe(), path, b.size, std::strerror(e));
  return Bar(static_cast<std::byte*>(p), b.size);
}

bool Device::on_vfio() const { return driver_ == vfio::driver_name; }

Result<void> Device::check_binding() const {
  // Meant for a driver (driver_override) yet bound to none: that driver's module is not loaded.
  // Driving the device through sysfs then would take it out from under the IOMMU the user chose.
  if (driver_.empty() && !driver_override_.empty())
    return fail(
        "PCI device {} is bound to no driver, though its driver_override names {}: the {} module is not loaded. "
        "Load it and probe the device again: modprobe {}; echo {} > /sys/bus/pci/drivers_probe",
        describe(), driver_override_, driver_override_, driver_override_, address_.to_string());
  if (driver_.empty() || driver_ == uio_driver || on_vfio()) return {};
  return fail(
      "PCI device {} is bound to the kernel driver {}; wirespeed never takes a device from a kernel driver "
      "itself. If nothing on this machine needs it (check that it is not your management interface), hand "
      "it over to vfio-pci, behind the IOMMU: {}; or, on a machine without an IOMMU, to uio_pci_generic: {}",
      describe(), driver_, bind_commands(address_, driver_, vfio::driver_name),
      bind_commands(address_, driver_, uio_driver));
}

Result<void> Device::enable() const {
  auto c = config();
  if (!c) return std::unexpected(c.error());
  auto command = static_cast<std::uint16_t>((*c)[reg::command] | (*c)[reg::command + 1] << 8);
  command |= reg::command_memory | reg::command_master | reg::command_intx_disable;
  return write_config(reg::command, &command, sizeof command);
}

}  // namespace ws::pci
