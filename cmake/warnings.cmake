# SPDX-License-Identifier: BSD-3-Clause
# Compiler flags shared by every wirespeed target (ws_flags is linked by each module).
include(${CMAKE_CURRENT_LIST_DIR}/arch_check.cmake)
set(ws_options -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual
  -Wnull-dereference -Wformat=2)
if(WS_WERROR)
  list(APPEND ws_options -Werror)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    # GCC 12 reports -Wrestrict / -Wstringop-overflow inside libstdc++'s own std::string and
    # std::copy code at -O3 (GCC bugs 105329, 105651): still shown, not fatal.
    list(APPEND ws_options -Wno-error=restrict -Wno-error=stringop-overflow)
  endif()
endif()
# The instruction sets every build assumes: a named baseline (x86-64-v2 unless WS_MARCH says
# otherwise), never the build machine's, so that what builds and passes on one machine does on
# every other, and the binary runs on any x86-64 server and in QEMU's TCG guests. Wider code is
# compiled beside it and chosen at run time (ws/core/simd.hpp). WS_NATIVE is a user's opt-in for
# tuning one machine.
if(WS_NATIVE)
  list(APPEND ws_options -march=native)
else()
  list(APPEND ws_options -march=${WS_MARCH})
endif()
# Every function starts on a cache line, so a hot loop's layout does not depend on what else is
# linked: with GCC's 16-byte default, two builds with identical hot instructions forwarded at
# different rates (bench/README.md, capture_cost).
list(APPEND ws_options -falign-functions=64)
# The library's objects are position-independent (cmake/library.cmake): calls between its own
# functions need not go through the PLT, and the programs in this tree link them statically.
list(APPEND ws_options -fno-semantic-interposition)
add_library(ws_flags INTERFACE)
target_compile_options(ws_flags INTERFACE ${ws_options})

# The flags a source gets, all of them, through a probe that uses the dispatch attributes.
string(TOUPPER "${CMAKE_BUILD_TYPE}" build_type)
separate_arguments(ws_probe_flags UNIX_COMMAND "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${build_type}}")
ws_check_build_flags(${CMAKE_CXX_COMPILER} ${ws_probe_flags} ${ws_options})

# The source root, and the build tree's include/ for generated headers (ws/version.hpp).
target_include_directories(ws_flags INTERFACE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/include)

# With WS_PCH (the sanitizer build), every test binary reuses one precompiled header: GoogleTest's
# and the standard headers take a third to a half of each test source's compile time at -O0 with
# the sanitizers, and the tests have about sixty sources that share one set of flags.
function(ws_test_pch)
  if(TARGET ws_test_pch)
    return()
  endif()
  file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/ws_test_pch.cpp CONTENT "")  # written once, not at each configure
  add_library(ws_test_pch OBJECT ${PROJECT_BINARY_DIR}/ws_test_pch.cpp)
  target_link_libraries(ws_test_pch PRIVATE GTest::gtest fmt::fmt ws_flags)
  target_precompile_headers(ws_test_pch PRIVATE <gtest/gtest.h> <algorithm> <array> <atomic> <chrono> <cstdint>
    <cstring> <expected> <memory> <span> <string> <string_view> <thread> <vector> <fmt/format.h>)
endfunction()

# ws_test(NAME SOURCES... LIBS ...): one GoogleTest binary registered with CTest (not in an
# `optimized` build: CMakeLists.txt, WS_TEST_SET).
function(ws_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT WS_TESTS OR WS_TEST_SET STREQUAL "optimized")
    return()
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest_main ws_flags)
  if(WS_PCH)
    ws_test_pch()
    target_precompile_headers(${name} REUSE_FROM ws_test_pch)
  endif()
  gtest_discover_tests(${name} TEST_PREFIX "${name}." DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
endfunction()

# ws_bench(NAME SOURCES... LIBS ...): one Google Benchmark binary (not a test).
function(ws_bench name)
  cmake_parse_arguments(B "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT WS_BENCH)
    return()
  endif()
  add_executable(${name} ${B_SOURCES})
  target_link_libraries(${name} PRIVATE ${B_LIBS} benchmark::benchmark ws_flags)
  if(WS_TEST_SET STREQUAL "optimized")  # configured for the style checks, not built (bench/ too)
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL TRUE)
  endif()
endfunction()

# ws_fuzzer(NAME SOURCES... LIBS ... CORPUS dir): a libFuzzer target plus a smoke test
# that replays its seed corpus (and fuzzes briefly) under ASan+UBSan.
function(ws_fuzzer name)
  cmake_parse_arguments(F "" "CORPUS" "SOURCES;LIBS" ${ARGN})
  if(NOT WS_FUZZ)
    return()
  endif()
  add_executable(${name} ${F_SOURCES})
  # `fuzzers` builds every fuzzer and only what they link: scripts/test needs nothing else of
  # the fuzz preset (not wirespeed-testpmd, not the shared library).
  if(NOT TARGET fuzzers)
    add_custom_target(fuzzers)
  endif()
  add_dependencies(fuzzers ${name})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(${name} PRIVATE ${F_LIBS} ws_flags)
  # libFuzzer writes new inputs into the first directory: a scratch one, never the seeds.
  set(scratch ${CMAKE_CURRENT_BINARY_DIR}/${name}_corpus)
  file(MAKE_DIRECTORY ${scratch})
  add_test(NAME ${name}_smoke COMMAND ${name} -runs=20000 -max_total_time=8
           ${scratch} ${PROJECT_SOURCE_DIR}/fuzz/corpus/${F_CORPUS})
endfunction()
