// SPDX-License-Identifier: BSD-3-Clause
// A PCI device as Linux's sysfs shows it (/sys/bus/pci/devices/<address>): its ids, the kernel
// driver bound to it, its config space and capability list, its BARs and the command register.
// We drive a device bound to vfio-pci (then config space and BARs go through its VFIO device fd,
// attach_vfio()), or to uio_pci_generic or no driver (then through sysfs' config and resourceN
// files); we never unbind a kernel driver ourselves.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ws/core/result.hpp"
#include "ws/pci/address.hpp"

namespace ws::pci {

namespace vfio {
class DeviceFd;
}

inline constexpr std::string_view sysfs_devices = "/sys/bus/pci/devices";

// Standard capability ids (PCI Local Bus 3.0 §6.7, PCI Code and ID Assignment §2).
namespace cap {
inline constexpr std::uint8_t power = 0x01, msi = 0x05, vendor = 0x09, pcie = 0x10, msix = 0x11;
}

struct Capability {
  std::uint8_t id = 0;
  std::uint8_t offset = 0;  // in config space
};

// Config space registers (PCI Local Bus 3.0 §6.1, §6.2).
namespace reg {
inline constexpr std::size_t command = 0x04, status = 0x06, cap_ptr = 0x34;
inline constexpr std::uint16_t command_io = 1u << 0, command_memory = 1u << 1, command_master = 1u << 2,
                               command_intx_disable = 1u << 10;
inline constexpr std::uint16_t status_cap_list = 1u << 4;
}  // namespace reg

// One line of sysfs' `resource` file: where a BAR is and what it is.
struct BarInfo {
  std::uint64_t start = 0;
  std::uint64_t size = 0;                               // 0: not implemented
  std::uint64_t flags = 0;                              // Linux IORESOURCE_* bits
  bool memory() const { return (flags & 0x200) != 0; }  // IORESOURCE_MEM
  bool io() const { return (flags & 0x100) != 0; }      // IORESOURCE_IO
};

// A memory BAR mapped into our address space (MAP_SHARED on resourceN); accesses are volatile
// loads and stores of the width the device expects. Unmapped on destruction.
class Bar {
 public:
  Bar() = default;
  Bar(std::byte* base, std::size_t size) : base_(base), size_(size) {}
  Bar(Bar&& o) noexcept : base_(o.base_), size_(o.size_) {
    o.base_ = nullptr;
    o.size_ = 0;
  }
  Bar& operator=(Bar&& o) noexcept;
  Bar(const Bar&) = delete;
  Bar& operator=(const Bar&) = delete;
  ~Bar();

  std::byte* base() const noexcept { return base_; }
  std::size_t size() const noexcept { return size_; }
  template <class T>
  T read(std::size_t off) const noexcept {
    return *reinterpret_cast<const volatile T*>(base_ + off);
  }
  template <class T>
  void write(std::size_t off, T v) const noexcept {
    *reinterpret_cast<volatile T*>(base_ + off) = v;
  }
  std::uint32_t read32(std::size_t off) const noexcept { return read<std::uint32_t>(off); }
  void write32(std::size_t off, std::uint32_t v) const noexcept { write<std::uint32_t>(off, v); }

 private:
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
};

class Device {
 public:
  // Reads the device's sysfs directory under `root` (a /sys/bus/pci/devices directory; tests
  // give a fake one). Errors: no such device (the message lists the devices there), or
  // unreadable attributes.
  static Result<Device> open(const Address& address, std::string root = std::string(sysfs_devices));

  const Address& address() const { return address_; }
  std::string name() const { return address_.to_string(); }
  Id id() const { return id_; }
  Id subsystem() const { return subsystem_; }
  std::uint32_t class_code() const { return class_code_; }
  const std::string& driver() const { return driver_; }  // kernel driver bound now; "" if none
  const std::string& path() const { return path_; }
  int numa_node() const { return numa_node_; }
  // "0000:00:04.0 (8086:10d3)" for messages.
  std::string describe() const;

  // Config space as far as we may read it (256 bytes, or 4096 for PCIe; 64 without root).
  Result<std::vector<std::uint8_t>> config() const;
  Result<void> write_config(std::size_t offset, const void* data, std::size_t len) const;
  // The standard capability list (status bit 4, pointer at 0x34). A list that loops, points
  // into the header or past the end is refused.
  Result<std::vector<Capability>> capabilities() const;
  static Result<std::vector<Capability>> parse_capabilities(const std::vector<std::uint8_t>& config,
                                                            std::string_view who);

  BarInfo bar(unsigned index) const;  // from sysfs' resource file; size 0 if absent
  // Maps memory BAR `index` whole; `min_bytes` is what the driver needs of it (a smaller BAR is
  // refused, naming both sizes). `what` says what the driver uses it for.
  Result<Bar> map_bar(unsigned index, std::size_t min_bytes, std::string_view what) const;

  // Bound to vfio-pci or uio_pci_generic, or to no driver: ours to drive. Otherwise the error
  // names the driver and gives the commands that hand the device over (as dpdk-devbind does).
  // A device on no driver whose driver_override names one is refused: that driver's module is
  // not loaded (the error gives the modprobe).
  Result<void> check_binding() const;
  // Bound to vfio-pci: reached through VFIO, behind the IOMMU.
  bool on_vfio() const;
  // From now on config space and BARs go through this VFIO device fd (Eal opens it).
  void attach_vfio(std::shared_ptr<const vfio::DeviceFd> fd) { vfio_ = std::move(fd); }
  // The VFIO device fd attached, or null (uio_pci_generic, no driver).
  const vfio::DeviceFd* vfio_fd() const { return vfio_.get(); }
  // Memory decoding and bus mastering on, INTx off (we poll). After check_binding().
  Result<void> enable() const;

 private:
  Address address_;
  std::string root_;
  std::string path_;
  Id id_, subsystem_;
  std::uint32_t class_code_ = 0;
  int numa_node_ = -1;
  std::string driver_;
  std::string driver_override_;  // sysfs' driver_override; "" when unset
  std::vector<BarInfo> bars_;
  std::shared_ptr<const vfio::DeviceFd> vfio_;
};

// The commands that give device `address` (bound to `driver`, "" for none) to `to` (vfio-pci or
// uio_pci_generic).
std::string bind_commands(const Address& address, std::string_view driver, std::string_view to);

// Every device under `root`, in address order.
std::vector<Device> scan(const std::string& root = std::string(sysfs_devices));

}  // namespace ws::pci
