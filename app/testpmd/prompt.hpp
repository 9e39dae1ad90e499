// SPDX-License-Identifier: BSD-3-Clause
// The interactive prompt (-i) and --cmdline-file. Commands are listed in prompt/*_cmds.cpp;
// they run on the control thread while forwarding continues. On a terminal the prompt reads
// through libedit (line editing, history, tab completion); otherwise it reads plain lines.
#pragma once
#include <atomic>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "app/testpmd/testpmd.hpp"

namespace ws::testpmd {

enum class PromptResult { quit, end_of_input };

// Reads commands from `in` until quit or end of input. `stop_requested` (a signal) ends it too.
PromptResult run_prompt(Testpmd& tp, std::istream& in, bool show_prompt, const std::atomic<bool>& stop_requested);
// Runs one command line; false if it asked to quit. Holds tp.control_mutex() while it runs.
bool run_command(Testpmd& tp, const std::string& line);
// --capture PORT,FILE[,FILTER]: starts a capture as "capture start" would.
Result<void> start_capture_option(Testpmd& tp, std::string_view spec);
// Completions for the word being typed at the end of `line` (tab completion).
std::vector<std::string> complete_command(std::string_view line);

}  // namespace ws::testpmd
