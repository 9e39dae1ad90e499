// SPDX-License-Identifier: BSD-3-Clause
// Driver lookup by device-name prefix (driver name or alias), as DPDK matches --vdev names.
#include "ws/port/driver.hpp"

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

}  // namespace ws
