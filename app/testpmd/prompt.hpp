// The interactive prompt (-i) and --cmdline-file: a small command table driving both parsing
// and help. Commands run on the control thread; forwarding continues while they run.
#pragma once
#include <atomic>
#include <istream>

#include "app/testpmd/testpmd.hpp"

namespace ws::testpmd {

enum class PromptResult { quit, end_of_input };

// Reads commands from `in` until quit or end of input. `stop_requested` (a signal) ends it too.
PromptResult run_prompt(Testpmd& tp, std::istream& in, bool show_prompt, const std::atomic<bool>& stop_requested);
// Runs one command line; false if it asked to quit.
bool run_command(Testpmd& tp, const std::string& line);

}  // namespace ws::testpmd
