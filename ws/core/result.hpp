// SPDX-License-Identifier: BSD-3-Clause
// Errors for the control path: Result<T> is std::expected<T, Error>, the message says what a
// user can act on (device, key, value, what was expected). The hot path never uses it.
#pragma once
#include <fmt/format.h>

#include <expected>
#include <string>
#include <utility>

namespace ws {

/// A control-path error: a message a user can act on.
struct Error {
  std::string message;  ///< Names the device, key or value at fault and what was expected.
};

/// A value or an Error.
template <class T = void>
using Result = std::expected<T, Error>;

/// Build an error with fmt-style formatting: `return fail("{}: key '{}' ...", dev, key);`
template <class... Args>
std::unexpected<Error> fail(fmt::format_string<Args...> format, Args&&... args) {
  return std::unexpected(Error{fmt::format(format, std::forward<Args>(args)...)});
}

/// Prefix an error with context: `return prefix_error(r, "port 0")` -> "port 0: <message>".
inline std::unexpected<Error> with_context(const Error& e, std::string_view context) {
  return std::unexpected(Error{fmt::format("{}: {}", context, e.message)});
}

}  // namespace ws
