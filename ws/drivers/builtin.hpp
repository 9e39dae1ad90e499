// SPDX-License-Identifier: BSD-3-Clause
// The drivers wirespeed ships, registered explicitly (no static constructors).
#pragma once
#include "ws/port/driver.hpp"

namespace ws {

void register_builtin_drivers(DriverRegistry& registry);

}  // namespace ws
