// SPDX-License-Identifier: BSD-3-Clause
// The compiled XDP program (xdp_fast_drop.bpf.c), embedded at build time by embed.cmake.
#pragma once
#include <cstddef>

namespace ws {

extern const unsigned char xdp_fast_drop_obj[];
extern const std::size_t xdp_fast_drop_obj_bytes;

}  // namespace ws
