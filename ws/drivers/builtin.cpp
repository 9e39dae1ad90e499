// Registration list of built-in drivers.
#include "ws/drivers/builtin.hpp"

#include "ws/drivers/null/null_port.hpp"
#include "ws/drivers/ring/ring_port.hpp"

namespace ws {

void register_builtin_drivers(DriverRegistry& registry) {
  registry.add(make_null_driver());
  registry.add(make_ring_driver());
}

}  // namespace ws
