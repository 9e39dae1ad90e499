// SPDX-License-Identifier: BSD-3-Clause
// Prompt: matching a line against the command table, checking its arguments, and reading
// lines (libedit on a terminal, plain getline otherwise).
#include "app/testpmd/prompt.hpp"

#include <editline/readline.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include "app/testpmd/prompt/command.hpp"

namespace ws::testpmd {
namespace {

std::vector<std::string> split(std::string_view line, char sep = ' ') {
  std::vector<std::string> out;
  std::string word;
  for (char c : line) {
    if (c == sep || (sep == ' ' && (c == '\t' || c == '\r' || c == '\n'))) {
      if (!word.empty()) out.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) out.push_back(std::move(word));
  return out;
}

// One argument position of a Command: its literal alternatives, whether a <value> is
// accepted too, and whether it may be left out.
struct ArgSlot {
  std::vector<std::string> literals;
  bool value = false;
  bool optional = false;
  bool rest = false;  // takes every remaining word
};

std::vector<ArgSlot> arg_slots(const Command& c) {
  std::vector<ArgSlot> slots;
  for (std::string token : split(c.args)) {
    ArgSlot s;
    if (token.front() == '[') {
      s.optional = true;
      token = token.substr(1, token.size() - 2);
    }
    if (token.ends_with("...")) {
      s.rest = true;
      token.resize(token.size() - 3);
    }
    for (auto& alt : split(token, '|')) {
      if (alt.front() == '<')
        s.value = true;
      else
        s.literals.push_back(alt);
    }
    slots.push_back(std::move(s));
  }
  return slots;
}

bool slot_accepts(const ArgSlot& s, const std::string& word) {
  if (s.value) return true;
  for (const auto& l : s.literals)
    if (l == word) return true;
  return false;
}

// Empty if `args` fit the command's argument list, else what is wrong.
std::string check_args(const Command& c, const std::vector<std::string>& args) {
  const auto slots = arg_slots(c);
  std::size_t required = 0;
  for (const auto& s : slots) required += s.optional ? 0 : 1;
  if (args.size() < required) return "missing argument";
  if (args.size() > slots.size() && !(!slots.empty() && slots.back().rest))
    return fmt::format("unexpected argument '{}'", args[slots.size()]);
  for (std::size_t i = 0; i < args.size() && i < slots.size(); ++i)
    if (!slot_accepts(slots[i], args[i])) return fmt::format("'{}' is not accepted here", args[i]);
  return {};
}

// The command whose fixed words lead the line, longest first ("start tx_first" over "start").
const Command* find_command(const std::vector<std::string>& words) {
  const Command* best = nullptr;
  for (const auto& c : all_commands()) {
    if (c.words.size() > words.size()) continue;
    bool match = true;
    for (std::size_t i = 0; i < c.words.size() && match; ++i) match = words[i] == c.words[i];
    if (match && (!best || c.words.size() > best->words.size())) best = &c;
  }
  return best;
}

// For a line no command matches: the commands sharing its longest leading words.
void print_near_misses(const std::vector<std::string>& words, const std::string& line) {
  std::size_t best = 0;
  for (const auto& c : all_commands()) {
    std::size_t k = 0;
    while (k < c.words.size() && k < words.size() && c.words[k] == words[k]) ++k;
    best = std::max(best, k);
  }
  if (best == 0) {
    std::printf("Bad command: '%s' (type 'help' for the list)\n", line.c_str());
    return;
  }
  std::printf("Bad command: '%s'; accepted:\n", line.c_str());
  for (const auto& c : all_commands()) {
    std::size_t k = 0;
    while (k < c.words.size() && k < words.size() && c.words[k] == words[k]) ++k;
    if (k == best) std::printf("  %s\n", usage_of(c).c_str());
  }
}

}  // namespace

bool run_command(Testpmd& tp, const std::string& line) {
  const auto words = split(line);
  if (words.empty() || words[0].starts_with('#')) return true;
  if (words[0] == "quit" || words[0] == "exit") return false;
  const Command* c = find_command(words);
  if (!c) {
    print_near_misses(words, line);
    std::fflush(stdout);
    return true;
  }
  const std::vector<std::string> args(words.begin() + static_cast<std::ptrdiff_t>(c->words.size()), words.end());
  if (const std::string bad = check_args(*c, args); !bad.empty()) {
    std::printf("Bad arguments: %s\n  usage: %s\n", bad.c_str(), usage_of(*c).c_str());
  } else {
    std::lock_guard lock(tp.control_mutex());
    if (auto ok = c->run(tp, args); !ok) {
      std::printf("error: %s\n", ok.error().message.c_str());
    }
  }
  std::fflush(stdout);
  return true;
}

std::vector<std::string> complete_command(std::string_view line) {
  auto words = split(line);
  std::string partial;
  if (!line.empty() && line.back() != ' ' && !words.empty()) {
    partial = words.back();
    words.pop_back();
  }
  std::vector<std::string> out;
  auto add = [&](const std::string& w) {
    if (w.starts_with(partial) && std::find(out.begin(), out.end(), w) == out.end()) out.push_back(w);
  };
  for (const auto& c : all_commands()) {
    const auto slots = arg_slots(c);
    bool match = true;
    std::size_t i = 0;
    for (; i < words.size() && match; ++i) {
      if (i < c.words.size())
        match = words[i] == c.words[i];
      else if (i - c.words.size() < slots.size())
        match = slot_accepts(slots[i - c.words.size()], words[i]);
      else
        match = false;
    }
    if (!match) continue;
    if (i < c.words.size())
      add(std::string(c.words[i]));
    else if (i - c.words.size() < slots.size())
      for (const auto& l : slots[i - c.words.size()].literals) add(l);
  }
  return out;
}

namespace {

// ---- libedit (terminal only) ----

constexpr const char* history_env = "WIRESPEED_TESTPMD_HISTORY";

// The history file: $WIRESPEED_TESTPMD_HISTORY (set but empty: no history file), else
// ~/.wirespeed-testpmd_history; empty when there is none.
std::string history_file() {
  if (const char* path = std::getenv(history_env)) return path;
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.wirespeed-testpmd_history" : std::string{};
}

std::vector<std::string> completion_list;

char* completion_generator(const char*, int state) {
  if (state < 0 || static_cast<std::size_t>(state) >= completion_list.size()) return nullptr;
  return strdup(completion_list[static_cast<std::size_t>(state)].c_str());
}

char** attempt_completion(const char* text, int start, int) {
  completion_list = complete_command(std::string(rl_line_buffer, static_cast<std::size_t>(start)) + text);
  rl_attempted_completion_over = 1;  // no file-name fallback
  if (completion_list.empty()) return nullptr;
  return rl_completion_matches(text, completion_generator);
}

// Set by the line handler rl_callback_read_char calls once a line is complete.
bool line_ready = false;
bool line_eof = false;
std::string line_text;

void on_line(char* line) {
  line_ready = true;
  line_eof = line == nullptr;
  if (line) {
    line_text = line;
    std::free(line);
  }
}

constexpr int history_lines = 1000;

// Reads with libedit's callback interface, polling so that a signal (which only sets
// stop_requested) ends the prompt at once; the way CPython drives libedit.
PromptResult run_terminal_prompt(Testpmd& tp, const std::atomic<bool>& stop_requested) {
  rl_readline_name = const_cast<char*>("wirespeed-testpmd");
  rl_attempted_completion_function = attempt_completion;
  using_history();
  stifle_history(history_lines);
  const std::string history = history_file();
  if (!history.empty()) (void)read_history(history.c_str());  // none yet: a fresh history
  bool history_warned = false;
  PromptResult result = PromptResult::quit;
  while (!stop_requested.load(std::memory_order_relaxed)) {
    line_ready = false;
    rl_callback_handler_install("testpmd> ", on_line);
    while (!line_ready && !stop_requested.load(std::memory_order_relaxed)) {
      pollfd p{STDIN_FILENO, POLLIN, 0};
      const int r = poll(&p, 1, 100);
      if (r > 0) rl_callback_read_char();
    }
    rl_callback_handler_remove();
    if (!line_ready) break;  // a signal
    if (line_eof) {
      std::printf("\n");
      result = PromptResult::end_of_input;
      break;
    }
    if (line_text.find_first_not_of(" \t") != std::string::npos) {
      add_history(line_text.c_str());
      // Saved after every line, so that a session ended by a signal or a crash keeps it.
      if (!history.empty() && write_history(history.c_str()) != 0 && !history_warned) {
        std::printf("warning: cannot write the history file %s: %s (set %s= to turn history off)\n", history.c_str(),
                    std::strerror(errno), history_env);
        history_warned = true;
      }
    }
    if (!run_command(tp, line_text)) break;
  }
  return result;
}

}  // namespace

PromptResult run_prompt(Testpmd& tp, std::istream& in, bool show_prompt, const std::atomic<bool>& stop_requested) {
  if (show_prompt && &in == &std::cin && isatty(STDIN_FILENO)) return run_terminal_prompt(tp, stop_requested);
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
