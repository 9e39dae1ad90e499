// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: parse_packet and classify must stay inside the bytes they are given for any
// input (ASan reports any read outside), and report lengths that fit in them.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ws/net/checksum.hpp"
#include "ws/net/ptype.hpp"
#include "ws/net/rss.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An exactly-sized heap copy, so that a read one byte past the end is caught.
  std::vector<std::uint8_t> frame(data, data + size);
  frame.shrink_to_fit();
  for (bool tunnel : {false, true}) {
    const ws::PacketInfo info = ws::parse_packet(std::span<const std::uint8_t>(frame.data(), frame.size()), tunnel);
    if (std::size_t{info.l2_len} + info.l3_len + info.l4_len + info.outer_l2_len + info.outer_l3_len > size)
      std::abort();
    if (info.l4_len != 0 && std::size_t{info.l4_offset} + info.l4_len > size) std::abort();
  }
  // The checksum sums read exactly `size` bytes too.
  if (ws::fold_sum(ws::raw_sum_best(frame.data(), frame.size(), 0)) !=
      ws::fold_sum(ws::raw_sum_scalar(frame.data(), frame.size(), 0)))
    std::abort();
  static const ws::Toeplitz toeplitz;
  (void)toeplitz.hash(std::span<const std::uint8_t>(frame.data(), std::min(frame.size(), ws::rss_max_input_bytes)));
  return 0;
}
