// SPDX-License-Identifier: BSD-3-Clause
// WS_REQUIRE: a test that needs something of the machine (a program, CPUs, a kernel feature)
// skips without it, naming what is missing; under CI (env CI set) it fails instead, since CI
// installs every package (scripts/install-deps) and runs as root.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>

// In a TEST body: `ok` false stops the test (skipped, or failed under CI) with `why`.
#define WS_REQUIRE(ok, why)                                    \
  do {                                                         \
    if (!(ok)) {                                               \
      if (std::getenv("CI")) FAIL() << "CI requires: " << why; \
      GTEST_SKIP() << why;                                     \
    }                                                          \
  } while (0)
