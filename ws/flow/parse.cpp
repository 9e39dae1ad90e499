// SPDX-License-Identifier: BSD-3-Clause
// The testpmd flow rule parser: words in, a FlowRule out (see parse.hpp).
#include "ws/flow/parse.hpp"

#include <charconv>
#include <string>
#include <vector>

#include "ws/net/rss.hpp"

namespace ws {
namespace {

// The words of the rule and where the parser is.
class Words {
 public:
  explicit Words(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
      std::size_t j = i;
      while (j < text.size() && text[j] != ' ' && text[j] != '\t') ++j;
      if (j > i) words_.emplace_back(text.substr(i, j - i));
      i = j;
    }
  }
  bool done() const { return at_ == words_.size(); }
  std::string_view peek() const { return done() ? std::string_view{} : std::string_view(words_[at_]); }
  std::string_view next() { return done() ? std::string_view{} : std::string_view(words_[at_++]); }
  // "what" expected at the current word.
  std::unexpected<Error> expected(std::string_view what) const {
    if (done()) return fail("flow rule: {} expected at the end", what);
    return fail("flow rule: {} expected at '{}' (word {})", what, peek(), at_ + 1);
  }

 private:
  std::vector<std::string> words_;
  std::size_t at_ = 0;
};

Result<std::uint32_t> number(Words& w, std::string_view what, std::uint64_t max = 0xffffffff) {
  const std::string_view t = w.peek();
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (t.empty() || ec != std::errc{} || end != t.data() + t.size() || n > max)
    return w.expected(fmt::format("{} (0 to {})", what, max));
  w.next();
  return static_cast<std::uint32_t>(n);
}

Result<FlowItemType> item_type(std::string_view word) {
  static constexpr std::pair<std::string_view, FlowItemType> names[] = {
      {"eth", FlowItemType::eth},   {"vlan", FlowItemType::vlan}, {"ipv4", FlowItemType::ipv4},
      {"ipv6", FlowItemType::ipv6}, {"udp", FlowItemType::udp},   {"tcp", FlowItemType::tcp},
      {"icmp", FlowItemType::icmp}};
  for (const auto& [name, type] : names)
    if (name == word) return type;
  return fail("");
}

Result<void> parse_attributes(Words& w, FlowAttr& attr) {
  while (!w.done() && w.peek() != "pattern") {
    const std::string_view word = w.next();
    if (word == "ingress") {
      attr.ingress = true;
    } else if (word == "egress") {
      attr.egress = true;
    } else if (word == "transfer") {
      attr.transfer = true;
    } else if (word == "group" || word == "priority") {
      auto n = number(w, word);
      if (!n) return std::unexpected(n.error());
      (word == "group" ? attr.group : attr.priority) = *n;
    } else {
      return fail("flow rule: '{}': group, priority, ingress, egress, transfer or pattern expected", word);
    }
  }
  if (w.next() != "pattern") return w.expected("pattern");
  return {};
}

// One item's fields up to "/".
Result<void> parse_fields(Words& w, FlowItem& item) {
  while (!w.done() && w.peek() != "/") {
    const std::string field(w.next());
    const std::string how(w.next());
    if (w.done()) return w.expected(fmt::format("a value for {} {}", field, how));
    const std::string value(w.next());
    if (auto ok = item.set(field, how, value); !ok) return fail("flow rule: {}", ok.error().message);
  }
  return {};
}

Result<void> parse_pattern(Words& w, std::vector<FlowItem>& pattern) {
  while (true) {
    const std::string_view word = w.peek();
    if (word == "end") {
      w.next();
      return {};
    }
    auto type = item_type(word);
    if (!type) return w.expected("an item (eth, vlan, ipv4, ipv6, udp, tcp, icmp) or end");
    w.next();
    FlowItem item;
    item.type = *type;
    if (auto ok = parse_fields(w, item); !ok) return ok;
    if (w.next() != "/") return w.expected("/");
    pattern.push_back(item);
  }
}

Result<std::uint32_t> rss_types(Words& w) {
  std::uint32_t types = 0;
  for (std::string_view t = w.next(); t != "end"; t = w.next()) {
    if (t == "ip" || t == "ipv4" || t == "ipv6")
      types |= rss_type::ip;
    else if (t == "udp" || t == "ipv4-udp" || t == "ipv6-udp")
      types |= rss_type::ip | rss_type::udp;
    else if (t == "tcp" || t == "ipv4-tcp" || t == "ipv6-tcp")
      types |= rss_type::ip | rss_type::tcp;
    else
      return fail("flow rule: rss types '{}': ip, ipv4, ipv6, udp, tcp, ipv4-udp, ipv4-tcp, ... or end expected", t);
  }
  return types;
}

Result<void> parse_rss(Words& w, FlowAction& a) {
  while (w.peek() == "types" || w.peek() == "queues") {
    if (w.next() == "types") {
      auto t = rss_types(w);
      if (!t) return std::unexpected(t.error());
      a.rss_types = *t;
      continue;
    }
    while (w.peek() != "end") {
      auto q = number(w, "an RX queue or end", 0xffff);
      if (!q) return std::unexpected(q.error());
      a.rss_queues.push_back(static_cast<std::uint16_t>(*q));
    }
    w.next();
  }
  return {};
}

// One action's type and arguments up to "/".
Result<FlowAction> parse_action(Words& w) {
  const std::string_view word = w.next();
  FlowAction a;
  auto arg = [&](std::string_view key, std::uint64_t max) -> Result<std::uint32_t> {
    if (w.next() != key) return w.expected(key);
    return number(w, key, max);
  };
  Result<std::uint32_t> n = 0u;
  if (word == "queue") {
    a.type = FlowActionType::queue;
    n = arg("index", 0xffff);
    a.queue = static_cast<std::uint16_t>(n.value_or(0));
  } else if (word == "mark") {
    a.type = FlowActionType::mark;
    n = arg("id", 0xffffffff);
    a.mark = n.value_or(0);
  } else if (word == "jump") {
    a.type = FlowActionType::jump;
    n = arg("group", 0xffffffff);
    a.group = n.value_or(0);
  } else if (word == "rss") {
    a.type = FlowActionType::rss;
    if (auto ok = parse_rss(w, a); !ok) return std::unexpected(ok.error());
  } else if (word == "drop" || word == "count" || word == "passthru") {
    a.type = word == "drop" ? FlowActionType::drop : word == "count" ? FlowActionType::count : FlowActionType::passthru;
  } else {
    return fail("flow rule: action '{}': queue, rss, drop, mark, count, passthru, jump or end expected", word);
  }
  if (!n) return std::unexpected(n.error());
  return a;
}

}  // namespace

Result<FlowRule> parse_flow_rule(std::string_view text) {
  Words w(text);
  FlowRule rule;
  rule.text = std::string(text);
  if (auto ok = parse_attributes(w, rule.attr); !ok) return std::unexpected(ok.error());
  if (auto ok = parse_pattern(w, rule.pattern); !ok) return std::unexpected(ok.error());
  if (w.next() != "actions") return w.expected("actions");
  while (w.peek() != "end") {
    if (w.done()) return w.expected("an action or end");
    auto a = parse_action(w);
    if (!a) return std::unexpected(a.error());
    rule.actions.push_back(*a);
    if (w.next() != "/") return w.expected("/");
  }
  w.next();
  if (!w.done()) return w.expected("nothing after the actions' end");
  return rule;
}

}  // namespace ws
