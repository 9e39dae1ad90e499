// SPDX-License-Identifier: BSD-3-Clause
// The library's version, compiled in (ws/version.hpp is generated from the project version).
#include "ws/version.hpp"

namespace ws {

std::string_view library_version() noexcept { return header_version; }

}  // namespace ws
