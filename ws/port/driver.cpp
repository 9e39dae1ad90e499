// SPDX-License-Identifier: BSD-3-Clause
// Driver lookup by device-name prefix (driver name or alias), as DPDK matches --vdev names.
#include "ws/port/driver.hpp"

#include "ws/pci/device.hpp"

namespace ws {

void DriverRegistry::add(std::unique_ptr<Driver> driver) { drivers_.push_back(std::move(driver)); }

Driver* DriverRegistry::find_for_device(std::string_view device_name) const {
  Driver* best = nullptr;
  std::size_t best_len = 0;
  auto consider = [&](Driver* d, std::string_view prefix) {
    if (device_name.starts_with(prefix) && (!best || prefix.size() > best_len)) {
      best = d;
      best_len = prefix.size();
    }
  };
  for (const auto& d : drivers_) {
    consider(d.get(), d->name());
    for (std::string_view alias : d->aliases()) consider(d.get(), alias);
  }
  return best;
}

std::vector<std::string_view> DriverRegistry::names() const {
  std::vector<std::string_view> out;
  for (const auto& d : drivers_) out.push_back(d->name());
  return out;
}

std::string DriverRegistry::describe_names() const {
  std::string out;
  for (const auto& d : drivers_) {
    if (!out.empty()) out += ", ";
    out += d->name();
    const auto aliases = d->aliases();
    for (std::size_t i = 0; i < aliases.size(); ++i) {
      out += i == 0 ? " (alias " : ", ";
      out += aliases[i];
    }
    if (!aliases.empty()) out += ')';
  }
  return out;
}

Result<std::unique_ptr<Port>> DriverRegistry::create_port(std::string_view device, const PortEnv& env) const {
  auto args = DevArgs::parse(device);
  if (!args) return std::unexpected(args.error());
  Driver* driver = find_for_device(args->name());
  if (!driver)
    return fail("device '{}': no driver for '{}' (known drivers, each followed by a device number: {})", device,
                args->name(), describe_names());
  if (auto ok = args->check_keys(driver->params()); !ok) return std::unexpected(ok.error());
  return driver->create(*args, env);
}

Driver* DriverRegistry::find_for_pci(pci::Id id) const {
  for (const auto& d : drivers_)
    for (const pci::Id& i : d->pci_ids())
      if (i == id) return d.get();
  return nullptr;
}

std::string DriverRegistry::describe_pci_ids() const {
  std::string out;
  for (const auto& d : drivers_) {
    const auto ids = d->pci_ids();
    if (ids.empty()) continue;
    out += fmt::format("{}{} (", out.empty() ? "" : ", ", d->name());
    for (std::size_t i = 0; i < ids.size(); ++i)
      out += fmt::format("{}{:04x}:{:04x}", i ? ", " : "", ids[i].vendor, ids[i].device);
    out += ')';
  }
  return out.empty() ? "none" : out;
}

Result<std::unique_ptr<Port>> DriverRegistry::create_pci_port(const pci::Device& dev, std::string_view devargs,
                                                              const PortEnv& env) const {
  auto args = DevArgs::parse(devargs);
  if (!args) return std::unexpected(args.error());
  Driver* driver = find_for_pci(dev.id());
  if (!driver)
    return fail("PCI device {}: no driver takes this device (drivers of PCI devices: {})", dev.describe(),
                describe_pci_ids());
  if (auto ok = args->check_keys(driver->params()); !ok) return std::unexpected(ok.error());
  if (auto ok = dev.check_binding(); !ok) return std::unexpected(ok.error());
  PortEnv e = env;
  e.pci = &dev;
  return driver->create(*args, e);
}

}  // namespace ws
