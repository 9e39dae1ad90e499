// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: testpmd flow rule text into parse_flow_rule, and what parses into the
// compiler the FlowTable validates with. Neither may crash, leak or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ws/flow/classifier.hpp"
#include "ws/flow/parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto rule = ws::parse_flow_rule(text);
  if (rule) (void)ws::compile_flow(*rule, 4);
  return 0;
}
