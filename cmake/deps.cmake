# SPDX-License-Identifier: BSD-3-Clause
# Third-party packages, all from Debian (scripts/install-deps installs them).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
# libpcap for net_pcap (ws/drivers/pcap).
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCAP REQUIRED IMPORTED_TARGET libpcap)
# libedit for wirespeed-testpmd's interactive prompt (line editing, history, completion).
pkg_check_modules(LIBEDIT REQUIRED IMPORTED_TARGET libedit)
if(WS_TESTS)
  find_package(GTest REQUIRED)
endif()
if(WS_BENCH)
  find_package(benchmark REQUIRED)
  find_package(PkgConfig)
  if(PkgConfig_FOUND)
    # DPDK is a peer we measure against, linked only by bench/ programs.
    pkg_check_modules(DPDK IMPORTED_TARGET libdpdk)
  endif()
endif()
