// SPDX-License-Identifier: BSD-3-Clause
// Test-only helpers for tests that check our output with an outside tool (tshark).
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ws/testing/require.hpp"

namespace ws::testing {

// What `cmd` (run by /bin/sh) prints on stdout; empty when it cannot be started.
inline std::string shell_output(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out;
}

inline bool have_command(const char* name) {
  return std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0;
}

}  // namespace ws::testing

// In a TEST body: skips without tshark outside CI, fails in CI (scripts/install-deps installs it).
#define WS_REQUIRE_TSHARK(what) \
  WS_REQUIRE(::ws::testing::have_command("tshark"), "tshark (Debian package tshark) for " << what)
