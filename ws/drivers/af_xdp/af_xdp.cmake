# SPDX-License-Identifier: BSD-3-Clause
# net_af_xdp: built when libxdp, libbpf and clang (BPF target) are found; the XDP program is
# compiled from xdp_fast_drop.bpf.c and embedded in the binary (xdp_fast_drop_obj.hpp/.cpp).
pkg_check_modules(LIBXDP IMPORTED_TARGET GLOBAL libxdp)  # GLOBAL: libwirespeed links them too
pkg_check_modules(LIBBPF IMPORTED_TARGET GLOBAL libbpf)
find_program(WS_BPF_CLANG NAMES clang clang-19 clang-14)
if(LIBXDP_FOUND AND LIBBPF_FOUND AND WS_BPF_CLANG)
  set(_dir ${CMAKE_CURRENT_SOURCE_DIR}/af_xdp)
  set(_obj ${CMAKE_CURRENT_BINARY_DIR}/xdp_fast_drop.bpf.o)
  set(_cpp ${CMAKE_CURRENT_BINARY_DIR}/xdp_fast_drop_obj.cpp)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-multiarch OUTPUT_VARIABLE _multiarch
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT _multiarch)
    set(_multiarch x86_64-linux-gnu)
  endif()
  add_custom_command(OUTPUT ${_obj}
    COMMAND ${WS_BPF_CLANG} -O2 -g -target bpf -I/usr/include/${_multiarch} -c ${_dir}/xdp_fast_drop.bpf.c -o ${_obj}
    DEPENDS ${_dir}/xdp_fast_drop.bpf.c
    COMMENT "Compiling the XDP program xdp_fast_drop.bpf.c (clang, BPF target)")
  add_custom_command(OUTPUT ${_cpp}
    COMMAND ${CMAKE_COMMAND} -DIN=${_obj} -DOUT=${_cpp} -P ${_dir}/embed.cmake
    DEPENDS ${_obj} ${_dir}/embed.cmake)
  target_sources(ws_drivers PRIVATE af_xdp/af_xdp_port.cpp ${_cpp})
  target_link_libraries(ws_drivers PRIVATE PkgConfig::LIBXDP PkgConfig::LIBBPF)
  target_compile_definitions(ws_drivers PRIVATE WS_HAVE_AF_XDP=1)
else()
  message(STATUS "net_af_xdp: not built (needs libxdp-dev, libbpf-dev and clang)")
endif()
