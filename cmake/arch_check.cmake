# SPDX-License-Identifier: BSD-3-Clause
# ws_check_build_flags(COMPILER FLAGS...): compiles cmake/arch_probe.cpp with exactly the flags
# the build's sources get, and stops the configuration when that fails, naming the flag without
# which it would compile. No build that scripts/ runs may succeed or fail with the machine it
# runs on; this catches a flag that brings in the build machine (an -march=native on a CPU whose
# features the compiler warns about, such as clang-19 with AVX10) before the first source does.
#
# Also a script, for the test that reproduces such a machine (tests/CMakeLists.txt):
#   cmake -DCOMPILER=clang++-19 "-DFLAGS=-march=x86-64-v3;-mavx10.1-256;-Werror" -P cmake/arch_check.cmake
function(ws_check_build_flags compiler)
  set(flags ${ARGN})
  get_filename_component(root "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/.." ABSOLUTE)
  set(probe_cmd ${compiler} -std=c++23 -I${root} -c ${root}/cmake/arch_probe.cpp -o /dev/null)
  execute_process(COMMAND ${probe_cmd} ${flags} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0)
    return()
  endif()
  # Which flag: the first whose removal lets the probe compile, trying the warning flags last
  # (without -Werror any warning passes, which would name -Werror rather than its cause).
  set(suspects ${flags})
  list(FILTER suspects EXCLUDE REGEX "^-W")
  set(warnings ${flags})
  list(FILTER warnings INCLUDE REGEX "^-W")
  set(culprit "")
  foreach(flag IN LISTS suspects warnings)
    set(rest ${flags})
    list(REMOVE_ITEM rest "${flag}")
    execute_process(COMMAND ${probe_cmd} ${rest} RESULT_VARIABLE rc2 OUTPUT_QUIET ERROR_QUIET)
    if(rc2 EQUAL 0)
      set(culprit "${flag}")
      break()
    endif()
  endforeach()
  string(REGEX MATCH "[^\n]*error:[^\n]*" first_error "${out}")
  list(JOIN flags " " shown)
  if(culprit)
    message(FATAL_ERROR "build flags: ${compiler} rejects a plain source with the flag '${culprit}' "
      "(flags: ${shown}): ${first_error}\nRemove '${culprit}'. The presets build for x86-64-v2 and pick "
      "AVX2 or AVX-512 code at run time (ws/core/simd.hpp); -DWS_NATIVE=ON (-march=native) is for "
      "tuning one machine, and with clang and -Werror fails on CPUs whose features it warns about.")
  endif()
  message(FATAL_ERROR "build flags: ${compiler} rejects a plain source with the flags: ${shown}\n${out}")
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  ws_check_build_flags(${COMPILER} ${FLAGS})
  message(STATUS "build flags: ${COMPILER} compiles the probe with: ${FLAGS}")
endif()
