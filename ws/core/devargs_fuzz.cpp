// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target for DevArgs::parse and its getters: no crash, no UB, and what parses must
// print back to a device string that parses to the same name and pairs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ws/core/devargs.hpp"

namespace {

constexpr ws::ParamSpec fuzz_params[] = {
    {"size", "uint", "64", ""}, {"copy", "bool", "0", ""}, {"iface", "path", "", ""}, {"rx_pcap", "path", "", ""}};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto args = ws::DevArgs::parse(text);
  if (!args) {
    if (args.error().message.empty()) std::abort();  // every refusal must say why
    return 0;
  }
  if (args->name().empty() || args->text() != text) std::abort();
  for (const auto& [key, value] : args->pairs()) {
    if (key.empty() || !args->has(key) || args->get_all(key).empty()) std::abort();
    (void)args->get_uint(key, 0, 1, 1000);
    (void)args->get_bool(key, false);
    (void)args->get_string(key, "");
  }
  (void)args->check_keys(fuzz_params);

  // Round trip: name,key=value,... must parse back to the same fields.
  std::string printed = args->name();
  for (const auto& [key, value] : args->pairs()) printed += "," + key + "=" + value;
  auto again = ws::DevArgs::parse(printed);
  if (!again || again->name() != args->name() || again->pairs() != args->pairs()) std::abort();
  return 0;
}
