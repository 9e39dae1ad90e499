# SPDX-License-Identifier: BSD-3-Clause
# Writes the bytes of IN as a C++ array (xdp_fast_drop_obj) into OUT.
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(SIZE ${IN} size)
file(WRITE ${OUT} "// Generated from xdp_fast_drop.bpf.o by embed.cmake.\n#include \"ws/drivers/af_xdp/xdp_fast_drop_obj.hpp\"\n"
  "namespace ws {\nalignas(8) const unsigned char xdp_fast_drop_obj[] = {${bytes}};\n"
  "const std::size_t xdp_fast_drop_obj_bytes = ${size};\n}  // namespace ws\n")
