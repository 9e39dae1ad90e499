# SPDX-License-Identifier: BSD-3-Clause
# libwirespeed: every ws/ module (core, pci, net, port, virtio, drivers, eal, lpm) in one library,
# shared (libwirespeed.so.MAJOR, with a SONAME) and static (libwirespeed.a), built from the
# modules' own objects (compiled once, position-independent). The targets in this tree keep
# linking the modules (ws_core, ...); applications outside it use the installed package:
# find_package(wirespeed CONFIG) -> wirespeed::wirespeed (shared) or wirespeed::wirespeed_static,
# or pkg-config wirespeed. Why one library and not one per module: docs/library.md.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ws_modules ws_core ws_pci ws_net ws_port ws_virtio ws_drivers ws_eal ws_lpm)
set(ws_objects)
foreach(m IN LISTS ws_modules)
  set_target_properties(${m} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  list(APPEND ws_objects $<TARGET_OBJECTS:${m}>)
endforeach()

# What the library's own code links beyond fmt and threads: libpcap (net_pcap), and libxdp and
# libbpf when net_af_xdp is built (ws/drivers/af_xdp/af_xdp.cmake).
# The .pc names the libraries themselves, not their .pc files: with --static, libpcap.pc would
# also list what libpcap links privately (libsystemd, libdbus), which a static libwirespeed.a
# does not need.
set(ws_private_targets PkgConfig::PCAP)
set(ws_private_libs pcap)
set(ws_pc_libs_private "-lpcap")
if(TARGET PkgConfig::LIBXDP AND TARGET PkgConfig::LIBBPF)
  list(APPEND ws_private_targets PkgConfig::LIBXDP PkgConfig::LIBBPF)
  list(APPEND ws_private_libs xdp bpf)
  string(APPEND ws_pc_libs_private " -lxdp -lbpf")
endif()

# ws/version.hpp: the version the headers belong to (the library reports its own, see there).
set(ws_generated_include ${PROJECT_BINARY_DIR}/include)
configure_file(${PROJECT_SOURCE_DIR}/cmake/templates/version.hpp.in ${ws_generated_include}/ws/version.hpp @ONLY)

set(ws_install_includedir ${CMAKE_INSTALL_INCLUDEDIR}/wirespeed)
foreach(lib wirespeed wirespeed_static)
  if(lib STREQUAL wirespeed)
    add_library(${lib} SHARED ${ws_objects})
    set_target_properties(${lib} PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
    target_link_libraries(${lib} PRIVATE ${ws_private_targets})
  else()
    add_library(${lib} STATIC ${ws_objects})
    set_target_properties(${lib} PROPERTIES OUTPUT_NAME wirespeed)
    # A static library's users link what its objects need.
    target_link_libraries(${lib} INTERFACE "$<BUILD_INTERFACE:${ws_private_targets}>"
                                           "$<INSTALL_INTERFACE:${ws_private_libs}>")
  endif()
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${lib})
  target_link_libraries(${lib} PUBLIC fmt::fmt Threads::Threads)
  target_compile_features(${lib} INTERFACE cxx_std_23)
  target_include_directories(${lib} INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                              $<BUILD_INTERFACE:${ws_generated_include}>
                                              $<INSTALL_INTERFACE:${ws_install_includedir}>)
  add_library(wirespeed::${lib} ALIAS ${lib})
endforeach()

# ---- install ----
# Only the public headers (docs/api.md lists what they offer); drivers' own headers, ws/virtio,
# burst_gate, software offload internals and test helpers stay private.
set(ws_public_headers
  ws/wirespeed.hpp
  ws/core/arena.hpp ws/core/copy.hpp ws/core/cpu.hpp ws/core/devargs.hpp ws/core/lcore.hpp ws/core/log.hpp
  ws/core/mbuf.hpp ws/core/mempool.hpp ws/core/result.hpp ws/core/ring.hpp ws/core/simd.hpp
  ws/net/checksum.hpp ws/net/ether.hpp ws/net/headers.hpp ws/net/ptype.hpp ws/net/rss.hpp
  ws/pci/address.hpp ws/pci/intr_mode.hpp
  ws/port/burst.hpp ws/port/driver.hpp ws/port/port.hpp ws/port/stats.hpp
  ws/flow/flow.hpp ws/flow/parse.hpp
  ws/drivers/builtin.hpp
  ws/eal/eal.hpp ws/eal/eal_args.hpp
  ws/lpm/lpm.hpp ws/lpm/routes.hpp)
set(WS_PUBLIC_HEADERS ${ws_public_headers} CACHE INTERNAL "public headers, relative to the source root")
foreach(h IN LISTS ws_public_headers)
  get_filename_component(dir ${h} DIRECTORY)
  install(FILES ${h} DESTINATION ${ws_install_includedir}/${dir} COMPONENT dev)
endforeach()
install(FILES ${ws_generated_include}/ws/version.hpp DESTINATION ${ws_install_includedir}/ws COMPONENT dev)

install(TARGETS wirespeed EXPORT wirespeedTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev)
install(TARGETS wirespeed_static EXPORT wirespeedTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(TARGETS wirespeed-testpmd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT bin)

set(ws_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/wirespeed)
install(EXPORT wirespeedTargets NAMESPACE wirespeed:: DESTINATION ${ws_cmake_dir} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/templates/wirespeedConfig.cmake.in
  ${PROJECT_BINARY_DIR}/wirespeedConfig.cmake INSTALL_DESTINATION ${ws_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/wirespeedConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/wirespeedConfig.cmake ${PROJECT_BINARY_DIR}/wirespeedConfigVersion.cmake
        DESTINATION ${ws_cmake_dir} COMPONENT dev)

# pkg-config: wirespeed.pc (what users name) requires wirespeed-libs.pc, as DPDK's libdpdk.pc
# does: `--static` then lists the archive before the shared library, so the archive is linked.
# prefix is found from the .pc file's own place, so an installed tree may move (DESTDIR, .deb).
file(RELATIVE_PATH ws_pc_to_prefix ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" ws_pc_to_prefix "${ws_pc_to_prefix}")
foreach(pc wirespeed wirespeed-libs)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/templates/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
endforeach()

# Driver READMEs and the guides, as documentation.
set(ws_docdir ${CMAKE_INSTALL_DATAROOTDIR}/doc/wirespeed)
install(FILES README.md LICENSE DESTINATION ${ws_docdir} COMPONENT doc)
install(FILES docs/api.md docs/library.md DESTINATION ${ws_docdir} COMPONENT doc)
install(FILES ws/port/README.md DESTINATION ${ws_docdir}/port RENAME README.md COMPONENT doc)
file(GLOB ws_driver_readmes RELATIVE ${PROJECT_SOURCE_DIR}/ws/drivers ${PROJECT_SOURCE_DIR}/ws/drivers/*/README.md)
foreach(readme IN LISTS ws_driver_readmes)
  get_filename_component(driver ${readme} DIRECTORY)
  install(FILES ws/drivers/${readme} DESTINATION ${ws_docdir}/drivers/${driver} COMPONENT doc)
endforeach()
# The examples as a user builds them (each directory a standalone project), not this tree's glue.
install(FILES examples/README.md DESTINATION ${ws_docdir}/examples COMPONENT doc)
install(DIRECTORY examples/l2fwd examples/l3fwd examples/l3fwd-power DESTINATION ${ws_docdir}/examples COMPONENT doc)
