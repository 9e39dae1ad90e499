# SPDX-License-Identifier: BSD-3-Clause
# `docs` target: the API reference of the public headers (cmake/library.cmake's list) with
# Debian's doxygen, into build/<preset>/docs/html; docs/api.md is its front page. The test
# docs_doxygen runs the same with every warning an error (an undocumented public declaration,
# a broken reference).
find_program(DOXYGEN_EXECUTABLE doxygen)
set(WS_DOXYGEN_INPUT ${PROJECT_SOURCE_DIR}/docs/api.md ${ws_generated_include}/ws/version.hpp)
foreach(h IN LISTS ws_public_headers)
  list(APPEND WS_DOXYGEN_INPUT ${PROJECT_SOURCE_DIR}/${h})
endforeach()
list(JOIN WS_DOXYGEN_INPUT " " WS_DOXYGEN_INPUT)
set(WS_DOXYGEN_OUTPUT ${PROJECT_BINARY_DIR}/docs)
configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${PROJECT_BINARY_DIR}/Doxyfile @ONLY)
if(DOXYGEN_EXECUTABLE)
  add_custom_target(docs COMMAND ${DOXYGEN_EXECUTABLE} ${PROJECT_BINARY_DIR}/Doxyfile
                    WORKING_DIRECTORY ${PROJECT_BINARY_DIR} COMMENT "API reference (doxygen) into ${WS_DOXYGEN_OUTPUT}/html"
                    VERBATIM)
else()
  message(STATUS "docs: doxygen not found (scripts/install-deps installs it); no docs target")
endif()
if(WS_TESTS AND NOT WS_TEST_SET STREQUAL "optimized")  # the same in every build
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  add_test(NAME docs_doxygen
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/docs/doxygen_test.py --doxyfile ${PROJECT_BINARY_DIR}/Doxyfile
                   --output ${WS_DOXYGEN_OUTPUT}-test)
  set_tests_properties(docs_doxygen PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
