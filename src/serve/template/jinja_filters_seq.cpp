// The Jinja filters over sequences and mappings (jinja_filter_call.h):
// first/last, list, reverse, items/dictsort, join, select/reject(attr),
// map, unique/sort. Each charges steps by the items it touches and sizes its
// result before building it (jinja_eval.h).
#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "serve/template/jinja_filter_call.h"

namespace weft::serve::detail {
namespace {

constexpr std::size_t kKeywordOnly = static_cast<std::size_t>(-1);  // an argument only given by name

}  // namespace

// One item: a string's characters or a dict's keys are not all made.
Value filter_first_last(FilterCall& c) {
  const Value& v = c.v;
  const bool first = c.name == "first";
  if (v.is_list()) return v.as_list().empty() ? Value() : first ? v.as_list().front() : v.as_list().back();
  if (v.is_dict())
    return v.as_dict().empty() ? Value() : Value::string(first ? v.as_dict().front().first : v.as_dict().back().first);
  if (v.is_string()) {
    const std::string& s = v.as_string();
    if (s.empty()) return Value();
    std::size_t at = 0;
    if (!first) {  // the last character: found from the front, as iteration finds it
      c.ev.step_over(s.size());
      while (at + utf8_char_size(s, at) < s.size()) at += utf8_char_size(s, at);
    }
    return c.ev.make_string(s.substr(at, utf8_char_size(s, at)));
  }
  c.ev.iterate(v);  // undefined: empty; others: not iterable
  return Value();
}

Value filter_list(FilterCall& c) { return c.v.is_list() ? c.v : c.ev.make_list(c.ev.iterate(c.v)); }

Value filter_reverse(FilterCall& c) {
  if (c.v.is_string()) {  // each character to its mirrored place
    const std::string& s = c.v.as_string();
    c.ev.expect_string(s.size(), "reverse");
    c.ev.step_over(s.size());
    std::string out(s.size(), '\0');
    for (std::size_t at = 0; at < s.size();) {
      const std::size_t len = utf8_char_size(s, at);
      s.copy(out.data() + (s.size() - at - len), len, at);
      at += len;
    }
    return c.ev.make_string(std::move(out));
  }
  List items = c.ev.iterate(c.v);
  std::reverse(items.begin(), items.end());
  return c.ev.make_list(std::move(items));
}

Value filter_items(FilterCall& c) {  // items, dictsort
  Evaluator& ev = c.ev;
  const bool sort = c.name == "dictsort";
  if (c.v.is_undefined()) return ev.make_list({});
  if (!c.v.is_dict()) ev.type_error(c.name + ": expected a mapping, got " + c.v.type_name());
  const Dict& d = c.v.as_dict();
  std::size_t key_bytes = 0;
  for (const auto& e : d) key_bytes += e.first.size();
  ev.step_over(d.size() + key_bytes);
  // The pairs, and for dictsort each key in lower case, compared by a step each.
  ev.expect_work(list_work(d.size()) + saturating_mul(d.size(), list_work(2) + string_work(0)) + 2 * key_bytes, c.name);
  std::vector<std::pair<std::string, Value>> keyed;  // (sort key, the pair)
  keyed.reserve(d.size());
  for (const auto& [k, val] : d)
    keyed.emplace_back(sort ? ascii_lower(k) : std::string(), ev.make_tuple({Value::string(k), val}));
  if (sort)
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
      ev.step_over(std::min(x.first.size(), y.first.size()));
      return x.first < y.first;
    });
  List out;
  out.reserve(keyed.size());
  for (auto& [key, pair] : keyed) out.push_back(std::move(pair));
  return ev.make_list(std::move(out));
}

Value filter_join(FilterCall& c) {
  Evaluator& ev = c.ev;
  const Value* sep = c.arg(0, "d");
  std::string attribute = c.attr_name(1, "attribute"), s = sep ? ev.text(*sep) : "", out;
  bool first = true;
  for (const auto& item : ev.iterate(c.v)) {
    const Value piece_value = attribute.empty() ? item : c.attr_path(item, attribute);
    std::string piece_text;
    const std::string& piece = piece_value.is_string() ? piece_value.as_string() : (piece_text = ev.text(piece_value));
    const std::size_t grown = out.size() + (first ? 0 : s.size()) + piece.size();
    ev.expect_string(grown, "join");  // before out grows: it never passes the limits
    ev.step_over(grown - out.size());
    if (!first) out += s;
    first = false;
    out += piece;
  }
  return ev.make_string(std::move(out));
}

Value filter_select(FilterCall& c) {  // select, reject, selectattr, rejectattr
  Evaluator& ev = c.ev;
  const std::string& name = c.name;
  bool by_attr = name.size() > 6, keep_if = name[0] == 's';
  std::size_t test_at = by_attr ? 1 : 0;
  std::string attribute = by_attr ? c.attr_name(0, "attr") : "";
  if (by_attr && attribute.empty()) ev.type_error(name + " needs an attribute name");
  std::string test = c.args.size() > test_at ? ev.text(c.args[test_at]) : "";
  if (!test.empty() && !is_known_test(test)) ev.fail(ErrorKind::unsupported, "test not supported: " + test);
  Args test_args(c.args.size() > test_at + 1 ? c.args.begin() + static_cast<std::ptrdiff_t>(test_at) + 1 : c.args.end(),
                 c.args.end());
  List out;
  for (const auto& item : ev.iterate(c.v)) {
    ev.step();
    Value subject = by_attr ? c.attr_path(item, attribute) : item;
    bool pass = test.empty() ? subject.truthy() : ev.apply_test(test, subject, test_args);
    if (pass == keep_if) out.push_back(item);
  }
  return ev.make_list(std::move(out));
}

Value filter_map(FilterCall& c) {
  Evaluator& ev = c.ev;
  std::string attribute = c.attr_name(kKeywordOnly, "attribute");
  List out;
  if (!attribute.empty()) {
    const Value* dflt = c.arg(kKeywordOnly, "default");
    for (const auto& item : ev.iterate(c.v)) {
      ev.step();
      Value x = c.attr_path(item, attribute);
      out.push_back(x.is_undefined() && dflt ? *dflt : x);
    }
  } else {
    if (c.args.empty() || !c.args[0].is_string()) ev.type_error("map needs a filter name or attribute=");
    std::string filter = c.args[0].as_string();
    if (!is_known_filter(filter)) ev.fail(ErrorKind::unsupported, "filter not supported: " + filter);
    Args rest(c.args.begin() + 1, c.args.end());
    for (const auto& item : ev.iterate(c.v)) out.push_back(ev.apply_filter(filter, item, rest, c.kwargs));
  }
  return ev.make_list(std::move(out));
}

Value filter_unique_sort(FilterCall& c) {  // unique, sort
  Evaluator& ev = c.ev;
  const bool sort = c.name == "sort";
  bool case_sensitive = c.flag(sort ? 1 : 0, "case_sensitive");
  std::string attribute = c.attr_name(sort ? 2 : 1, "attribute");
  auto key = [&](const Value& item) {  // a lower-case copy of a string key: sized first
    Value k = attribute.empty() ? item : c.attr_path(item, attribute);
    if (!k.is_string() || case_sensitive) return k;
    ev.expect_string(k.as_string().size(), c.name);
    ev.step_over(k.as_string().size());
    return ev.make_string(ascii_lower(k.as_string()));
  };
  List items = ev.iterate(c.v), out;
  // Each item's key, made once; compared by less() and equal(), which count their steps.
  ev.expect_work(saturating_mul(items.size(), sizeof(std::pair<Value, Value>)), c.name);
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  keyed.reserve(items.size());
  for (auto& item : items) keyed.emplace_back(key(item), std::move(item));
  if (sort) {
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) { return ev.less(x.first, y.first); });
    if (c.flag(0, "reverse")) std::reverse(keyed.begin(), keyed.end());
    for (auto& [k, item] : keyed) out.push_back(std::move(item));
    return ev.make_list(std::move(out));
  }
  List seen;
  for (auto& entry : keyed) {  // not a structured binding: clang before 16 cannot capture one
    const Value& k = entry.first;
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return ev.equal(s, k); })) continue;
    seen.push_back(k);
    out.push_back(std::move(entry.second));
  }
  return ev.make_list(std::move(out));
}

}  // namespace weft::serve::detail
