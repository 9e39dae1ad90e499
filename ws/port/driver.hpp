// SPDX-License-Identifier: BSD-3-Clause
// Driver: makes ports from device strings. DriverRegistry holds the drivers an application
// registered explicitly (ws/drivers/builtin.cpp registers ours) and resolves "net_null0,size=64".
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws/core/arena.hpp"
#include "ws/core/devargs.hpp"
#include "ws/pci/address.hpp"
#include "ws/port/port.hpp"

namespace ws {

namespace pci {
class Device;                        // ws/pci/device.hpp, which only PCI drivers include
enum class IntrMode : std::uint8_t;  // ws/pci/irq.hpp
}  // namespace pci

/// What a driver may use from the application when it creates a port.
struct PortEnv {
  Arena* arena = nullptr;            ///< shareable memory (virtio-user maps it to the backend)
  unsigned lcore_count = 1;          ///< lcores of the application (queue sizing hints)
  const pci::Device* pci = nullptr;  ///< the device, for a PCI driver (checked: ours to drive)
  std::optional<pci::IntrMode> intr_mode =
      std::nullopt;  ///< --vfio-intr, for a PCI driver's interrupts; unset: its choice
};

/// A poll-mode driver: makes ports of one kind from device strings.
class Driver {
 public:
  virtual ~Driver() = default;
  /// DPDK's name: "net_null", "net_ring", "net_vhost", "net_virtio_user" ...
  virtual std::string_view name() const = 0;
  /// Other names DPDK registers for the driver (RTE_PMD_REGISTER_ALIAS): "eth_vhost" for
  /// net_vhost, "virtio_user" for net_virtio_user. A device name may start with any of them.
  virtual std::span<const std::string_view> aliases() const { return {}; }
  /// The keys its device strings accept (others are refused before create()).
  virtual std::span<const ParamSpec> params() const = 0;
  /// The PCI devices (vendor:device) a driver for real hardware takes; empty for virtual devices.
  virtual std::span<const pci::Id> pci_ids() const { return {}; }
  /// Creates a port; args.name() is the device name ("net_null0", or the PCI address
  /// "0000:00:04.0" with env.pci set). Unknown keys were refused.
  virtual Result<std::unique_ptr<Port>> create(const DevArgs& args, const PortEnv& env) = 0;
};

/// The drivers an application registered, resolving device strings to ports.
class DriverRegistry {
 public:
  /// Registers a driver (control path).
  void add(std::unique_ptr<Driver> driver);
  /// The driver whose name or alias is the longest prefix of the device name.
  Driver* find_for_device(std::string_view device_name) const;
  /// Parses `device`, finds its driver, checks keys, creates the port.
  Result<std::unique_ptr<Port>> create_port(std::string_view device, const PortEnv& env) const;
  /// The driver that takes PCI devices with `id`, or nullptr.
  Driver* find_for_pci(pci::Id id) const;
  /// A port for PCI device `dev` with `devargs` ("0000:00:04.0,key=value..."): finds its driver,
  /// checks the keys and that the device is ours to drive (bound to uio_pci_generic or nothing).
  Result<std::unique_ptr<Port>> create_pci_port(const pci::Device& dev, std::string_view devargs,
                                                const PortEnv& env) const;
  /// "net_e1000_em (8086:10d3), net_virtio (1af4:1041, 1af4:1000)" for errors.
  std::string describe_pci_ids() const;
  /// Every registered driver's name.
  std::vector<std::string_view> names() const;
  /// "net_null, net_vhost (alias eth_vhost), ..." for errors and help.
  std::string describe_names() const;

 private:
  std::vector<std::unique_ptr<Driver>> drivers_;
};

}  // namespace ws
