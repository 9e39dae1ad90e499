// Prompt commands: start, start tx_first [N], stop, show port stats|info all|N,
// show fwd stats all, show config fwd, clear port stats all, set fwd MODE, help, quit.
#include "app/testpmd/prompt.hpp"

#include <charconv>
#include <cstdio>
#include <functional>
#include <iostream>
#include <sstream>
#include <vector>

namespace ws::testpmd {
namespace {

struct Command {
  std::vector<std::string_view> words;  // fixed leading words
  std::string_view args_help;           // what follows, for help
  std::string_view help;
  std::function<void(Testpmd&, const std::vector<std::string>& args)> run;
};

void report(const Result<void>& r) {
  if (!r) std::printf("error: %s\n", r.error().message.c_str());
}

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {{"start", "tx_first"}, "[N]", "send N (default 1) bursts from every stream, then forward",
       [](Testpmd& tp, const std::vector<std::string>& a) {
         unsigned n = 1;
         if (!a.empty()) {
           auto [end, ec] = std::from_chars(a[0].data(), a[0].data() + a[0].size(), n);
           if (ec != std::errc{} || end != a[0].data() + a[0].size() || n == 0) {
             std::printf("error: start tx_first N: N must be a positive number, got '%s'\n", a[0].c_str());
             return;
           }
         }
         report(tp.start_forwarding(n));
       }},
      {{"start"}, "", "start forwarding", [](Testpmd& tp, const auto&) { report(tp.start_forwarding(0)); }},
      {{"stop"}, "", "stop forwarding and show forward statistics",
       [](Testpmd& tp, const auto&) {
         if (!tp.forwarding()) std::printf("Packet forwarding not started\n");
         tp.stop_forwarding();
       }},
      {{"show", "port", "stats"}, "all|N", "port counters and throughput", [](Testpmd& tp, const auto&) { tp.print_nic_stats(true); }},
      {{"show", "fwd", "stats", "all"}, "", "forward statistics since start",
       [](Testpmd& tp, const auto&) { tp.print_forward_stats(); }},
      {{"show", "config", "fwd"}, "", "streams, cores and mode", [](Testpmd& tp, const auto&) { tp.print_fwd_config(); }},
      {{"set", "fwd"}, "MODE", "forwarding mode: io mac macswap flowgen txonly rxonly",
       [](Testpmd& tp, const std::vector<std::string>& a) {
         if (a.size() != 1) {
           std::printf("error: set fwd MODE (%s)\n", engine_names().c_str());
           return;
         }
         auto r = tp.set_forward_mode(a[0]);
         if (r) std::printf("Set %s packet forwarding mode\n", a[0].c_str());
         report(r);
       }},
      {{"help"}, "", "this list", [](Testpmd&, const auto&) {
         for (const auto& c : commands()) {
           std::string w;
           for (auto x : c.words) w += std::string(x) + " ";
           std::printf("  %-28s %s\n", (w + std::string(c.args_help)).c_str(), std::string(c.help).c_str());
         }
         std::printf("  %-28s %s\n", "quit", "stop forwarding and exit");
       }},
  };
  return table;
}

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

bool run_command(Testpmd& tp, const std::string& line) {
  const auto words = split(line);
  if (words.empty() || words[0].starts_with('#')) return true;
  if (words[0] == "quit" || words[0] == "exit") return false;
  // The longest command whose fixed words lead the line wins ("start tx_first" over "start").
  const Command* best = nullptr;
  for (const auto& c : commands()) {
    if (c.words.size() > words.size()) continue;
    bool match = true;
    for (std::size_t i = 0; i < c.words.size() && match; ++i) match = words[i] == c.words[i];
    if (match && (!best || c.words.size() > best->words.size())) best = &c;
  }
  if (!best) {
    std::printf("Bad command: '%s' (type 'help' for the list)\n", line.c_str());
    return true;
  }
  best->run(tp, std::vector<std::string>(words.begin() + static_cast<std::ptrdiff_t>(best->words.size()), words.end()));
  std::fflush(stdout);
  return true;
}

PromptResult run_prompt(Testpmd& tp, std::istream& in, bool show_prompt, const std::atomic<bool>& stop_requested) {
  std::string line;
  while (!stop_requested.load(std::memory_order_relaxed)) {
    if (show_prompt) {
      std::printf("testpmd> ");
      std::fflush(stdout);
    }
    if (!std::getline(in, line)) return PromptResult::end_of_input;
    if (!run_command(tp, line)) return PromptResult::quit;
  }
  return PromptResult::quit;
}

}  // namespace ws::testpmd
