// Driver lookup by device-name prefix, as DPDK matches --vdev names.
#include "ws/port/driver.hpp"

namespace ws {

void DriverRegistry::add(std::unique_ptr<Driver> driver) { drivers_.push_back(std::move(driver)); }

Driver* DriverRegistry::find_for_device(std::string_view device_name) const {
  Driver* best = nullptr;
  for (const auto& d : drivers_) {
    if (device_name.starts_with(d->name()) && (!best || d->name().size() > best->name().size())) best = d.get();
  }
  return best;
}

std::vector<std::string_view> DriverRegistry::names() const {
  std::vector<std::string_view> out;
  for (const auto& d : drivers_) out.push_back(d->name());
  return out;
}

Result<std::unique_ptr<Port>> DriverRegistry::create_port(std::string_view device, const PortEnv& env) const {
  auto args = DevArgs::parse(device);
  if (!args) return std::unexpected(args.error());
  Driver* driver = find_for_device(args->name());
  if (!driver) {
    std::string known;
    for (auto n : names()) known += (known.empty() ? "" : ", ") + std::string(n) + "N";
    return fail("device '{}': no driver for '{}' (known drivers: {})", device, args->name(), known);
  }
  if (auto ok = args->check_keys(driver->params()); !ok) return std::unexpected(ok.error());
  return driver->create(*args, env);
}

}  // namespace ws
