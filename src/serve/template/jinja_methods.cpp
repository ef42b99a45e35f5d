// Python's str and dict methods as templates call them ('x'.strip(),
// d.items(), ...), and the UTF-8 string helpers filters share. Case mapping
// is ASCII-only; lengths, indices and strip characters count code points.
// Each method charges steps by the bytes it scans and sizes its result before
// building it (jinja_eval.h states the contract): replace() and split()
// count what they will make in a first pass that allocates nothing.
#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "serve/template/jinja_eval.h"

namespace weft::serve::detail {
namespace {

bool py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

std::size_t char_len(unsigned char c) { return c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1; }

// Calls part(begin, end) for each part of Python's s.split(sep, maxsplit)
// (sep null: runs of whitespace, no empty parts), or with from_right of
// s.rsplit(sep, maxsplit), whose parts it finds last first. Allocates nothing.
template <class Part>
void split_parts(const std::string& s, const std::string* sep, std::int64_t maxsplit, bool from_right, Part&& part) {
  std::size_t splits = 0;
  auto may_split = [&] { return maxsplit < 0 || splits < static_cast<std::size_t>(maxsplit); };
  auto space = [&](std::size_t i) { return py_space(static_cast<unsigned char>(s[i])); };
  if (sep && !from_right) {
    std::size_t b = 0;
    for (std::size_t p = s.find(*sep); p != std::string::npos && may_split(); p = s.find(*sep, b), ++splits) {
      part(b, p);
      b = p + sep->size();
    }
    part(b, s.size());
  } else if (sep) {
    std::size_t e = s.size();
    for (; e >= sep->size() && may_split(); ++splits) {
      const std::size_t p = s.rfind(*sep, e - sep->size());
      if (p == std::string::npos) break;
      part(p + sep->size(), e);
      e = p;
    }
    part(0, e);
  } else if (!from_right) {  // the last part keeps its inner and trailing spacing
    for (std::size_t i = 0;; ++splits) {
      while (i < s.size() && space(i)) ++i;
      if (i == s.size()) return;
      if (!may_split()) return part(i, s.size());
      const std::size_t b = i;
      while (i < s.size() && !space(i)) ++i;
      part(b, i);
    }
  } else {  // the first part keeps its inner and leading spacing
    for (std::size_t e = s.size();; ++splits) {
      while (e > 0 && space(e - 1)) --e;
      if (e == 0) return;
      if (!may_split()) return part(0, e);
      std::size_t b = e;
      while (b > 0 && !space(b - 1)) --b;
      part(b, e);
      e = b;
    }
  }
}

// How many replacements Python's s.replace(from, to, count) makes (count < 0:
// all). An empty `from` matches before every character and at the end.
std::size_t replacement_count(const std::string& s, const std::string& from, std::int64_t count) {
  const std::size_t most = count < 0 ? SIZE_MAX : static_cast<std::size_t>(count);
  if (from.empty()) return std::min(most, utf8_length(s) + 1);
  std::size_t n = 0;
  for (std::size_t p = s.find(from); p != std::string::npos && n < most; p = s.find(from, p + from.size())) ++n;
  return n;
}

// s with its first `n` matches of `from` replaced by `to` (n from replacement_count), `bytes` long.
std::string py_replace(const std::string& s, const std::string& from, const std::string& to, std::size_t n,
                       std::size_t bytes) {
  std::string out;
  out.reserve(bytes);
  if (from.empty()) {  // Python inserts `to` before each character, then at the end
    std::size_t at = 0;
    for (std::size_t done = 0; done < n; ++done) {
      out += to;
      if (at == s.size()) break;
      const std::size_t len = utf8_char_size(s, at);
      out.append(s, at, len);
      at += len;
    }
    out.append(s, at, std::string::npos);
    return out;
  }
  std::size_t b = 0;
  for (std::size_t done = 0; done < n; ++done) {
    const std::size_t p = s.find(from, b);
    out.append(s, b, p - b);
    out += to;
    b = p + from.size();
  }
  out.append(s, b, std::string::npos);
  return out;
}

std::string py_title(const std::string& s) {  // str.title(): a letter after a non-letter goes upper
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    if (alpha) c = static_cast<char>(prev_cased ? std::tolower(c) : std::toupper(c));
    prev_cased = alpha;
  }
  return out;
}

const Value* arg(const Args& args, const Kwargs& kwargs, std::size_t i, const char* name) {
  if (i < args.size()) return &args[i];
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

}  // namespace

std::size_t utf8_length(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

std::size_t utf8_char_size(std::string_view s, std::size_t at) {
  return std::min(char_len(static_cast<unsigned char>(s[at])), s.size() - at);
}

std::pair<std::size_t, std::size_t> py_strip_bounds(const std::string& s, const Value& chars, bool left, bool right) {
  std::size_t b = 0, e = s.size();
  if (!chars.is_string()) {
    while (left && b < e && py_space(static_cast<unsigned char>(s[b]))) ++b;
    while (right && e > b && py_space(static_cast<unsigned char>(s[e - 1]))) --e;
    return {b, e};
  }
  const std::string& set = chars.as_string();
  auto in_set = [&](std::size_t at, std::size_t n) {  // whether s[at, at + n) is one of set's characters
    for (std::size_t i = 0; i < set.size(); i += utf8_char_size(set, i))
      if (utf8_char_size(set, i) == n && s.compare(at, n, set, i, n) == 0) return true;
    return false;
  };
  while (left && b < e) {
    std::size_t n = std::min(char_len(static_cast<unsigned char>(s[b])), e - b);
    if (!in_set(b, n)) break;
    b += n;
  }
  while (right && e > b) {
    std::size_t start = e - 1;
    while (start > b && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
    if (!in_set(start, e - start)) break;
    e = start;
  }
  return {b, e};
}

std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Value Evaluator::strip(const std::string& s, const Value& chars, bool left, bool right) {
  // Each character stripped is compared with each of chars' characters.
  step(1 + saturating_mul(s.size(), chars.is_string() ? chars.as_string().size() : 1) / 64);
  const auto [b, e] = py_strip_bounds(s, chars, left, right);
  return make_string(s.substr(b, e - b));  // no longer than s
}

bool Evaluator::is_method(const Value& self, const std::string& name) {
  static const char* const str_methods[] = {"strip", "lstrip", "rstrip", "startswith", "endswith", "split", "rsplit",
                                            "replace", "upper", "lower", "title", "capitalize", "find", "rfind",
                                            "count", "join", "isdigit", "isalpha", "isspace", "splitlines", "format"};
  static const char* const dict_methods[] = {"items", "keys", "values", "get", "copy", "update", "pop", "setdefault", "clear"};
  static const char* const list_methods[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "index", "count", "copy"};
  auto in = [&](const auto& names) { return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; }); };
  return (self.is_string() && in(str_methods)) || (self.is_dict() && in(dict_methods)) || (self.is_list() && in(list_methods));
}

namespace {

// One call of a str or dict method: the receiver, its arguments, and the
// argument helpers the methods share. Each method is a function of it; the
// str methods are listed in one table (kStrMethods).
struct MethodCall {
  Evaluator& ev;
  const std::string& name;
  const Value& self;
  const Args& args;
  const Kwargs& kwargs;

  const Value* a(std::size_t i, const char* n) const { return arg(args, kwargs, i, n); }
  // A str argument; nullptr when absent or none; another type is a type error.
  const std::string* str_arg(std::size_t i, const char* n) const {
    const Value* v = a(i, n);
    if (!v || v->is_none()) return nullptr;
    if (!v->is_string()) ev.type_error(name + "(): argument '" + n + "' must be str, not " + v->type_name());
    return &v->as_string();
  }
  std::int64_t int_arg(std::size_t i, const char* n, std::int64_t dflt) const {
    const Value* v = a(i, n);
    if (!v || v->is_none()) return dflt;
    if (!v->is(Value::Type::integer)) ev.type_error(name + "(): argument '" + n + "' must be int, not " + v->type_name());
    return v->as_int();
  }
  const std::string& s() const { return self.as_string(); }
};

Value dict_method(MethodCall& c) {  // items, keys, values, get
  Evaluator& ev = c.ev;
  const std::string& name = c.name;
  const Dict& d = c.self.as_dict();
  if (name == "items" || name == "keys" || name == "values") {
    std::size_t bytes = list_work(d.size()), key_bytes = 0;
    for (const auto& e : d) key_bytes += e.first.size();
    if (name != "values") bytes += saturating_mul(d.size(), string_work(0)) + key_bytes;
    if (name == "items") bytes += saturating_mul(d.size(), list_work(2));
    ev.step_over(d.size() + key_bytes);
    ev.expect_work(bytes, name + "()");
    List out;
    out.reserve(d.size());
    for (const auto& [k, v] : d) {
      if (name == "items") out.push_back(ev.make_tuple({Value::string(k), v}));
      else out.push_back(name == "keys" ? Value::string(k) : v);
    }
    return ev.make_list(std::move(out));
  }
  if (name == "get") {
    const Value* key = c.a(0, "key");
    ev.step_over(d.size());
    const Value* found = key && key->is_string() ? c.self.find(key->as_string()) : nullptr;
    if (found) return *found;
    const Value* dflt = c.a(1, "default");
    return dflt ? *dflt : Value::none();
  }
  ev.fail(ErrorKind::unsupported, "dict method not supported (templates may not modify values): " + name);
}

Value str_strip(MethodCall& c) {  // strip, lstrip, rstrip
  const Value* chars = c.a(0, "chars");
  return c.ev.strip(c.s(), chars ? *chars : Value(), c.name != "rstrip", c.name != "lstrip");
}

Value str_startswith(MethodCall& c) {  // startswith, endswith
  const std::string& s = c.s();
  const Value* p = c.a(0, "prefix");
  if (!p) c.ev.type_error(c.name + "() takes at least 1 argument");
  const List single = {*p};
  const List& options = p->is_list() ? p->as_list() : single;
  c.ev.step_over(options.size());
  for (const auto& o : options) {
    if (!o.is_string()) c.ev.type_error(c.name + "() argument must be str or a tuple of str, not " + o.type_name());
    const std::string& x = o.as_string();
    c.ev.step_over(std::min(x.size(), s.size()));
    if (x.size() <= s.size() && s.compare(c.name == "startswith" ? 0 : s.size() - x.size(), x.size(), x) == 0)
      return Value::boolean(true);
  }
  return Value::boolean(false);
}

Value str_split(MethodCall& c) {  // split, rsplit
  Evaluator& ev = c.ev;
  const std::string& s = c.s();
  const std::string* sep = c.str_arg(0, "sep");
  if (sep && sep->empty()) ev.type_error("empty separator");
  const std::int64_t maxsplit = c.int_arg(1, "maxsplit", -1);
  const bool from_right = c.name == "rsplit";
  ev.step_search(s.size(), sep ? sep->size() : 1);
  std::size_t parts = 0;
  split_parts(s, sep, maxsplit, from_right, [&](std::size_t, std::size_t) { ++parts; });
  ev.expect_work(list_work(parts) + saturating_mul(parts, string_work(0)) + s.size(), c.name + "()");
  ev.step_search(s.size(), sep ? sep->size() : 1);
  // The pieces' bounds are put in order before any Value is made: reversing
  // the Values themselves (std::swap of a variant) has GCC 12 warn of padding
  // it reads as uninitialized (-Wmaybe-uninitialized, GCC bug 106199).
  std::vector<std::pair<std::size_t, std::size_t>> bounds;
  bounds.reserve(parts);
  split_parts(s, sep, maxsplit, from_right, [&](std::size_t b, std::size_t e) { bounds.emplace_back(b, e); });
  if (from_right) std::reverse(bounds.begin(), bounds.end());
  List out;
  out.reserve(bounds.size());
  for (const auto& [b, e] : bounds) out.push_back(ev.make_string(s.substr(b, e - b)));
  return ev.make_list(std::move(out));
}

Value str_splitlines(MethodCall& c) {
  Evaluator& ev = c.ev;
  const std::string& s = c.s();
  // Calls line(b, e) for each line; a final line break ends the last line.
  auto each_line = [&](auto&& line) {
    std::size_t b = 0;
    for (std::size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n' || s[i] == '\r') {
        line(b, i);
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        b = i + 1;
      }
    if (b < s.size()) line(b, s.size());
  };
  ev.step_over(2 * s.size());
  std::size_t lines = 0;
  each_line([&](std::size_t, std::size_t) { ++lines; });
  ev.expect_work(list_work(lines) + saturating_mul(lines, string_work(0)) + s.size(), "splitlines()");
  List out;
  out.reserve(lines);
  each_line([&](std::size_t b, std::size_t e) { out.push_back(ev.make_string(s.substr(b, e - b))); });
  return ev.make_list(std::move(out));
}

Value str_replace(MethodCall& c) {
  Evaluator& ev = c.ev;
  const std::string& s = c.s();
  const std::string *from = c.str_arg(0, "old"), *to = c.str_arg(1, "new");
  if (!from || !to) ev.type_error("replace() takes 2 string arguments");
  ev.step_search(s.size(), from->size());
  const std::size_t n = replacement_count(s, *from, c.int_arg(2, "count", -1));
  // Every replacement takes from.size() bytes of s (none for an empty `from`) and adds to.size().
  const std::size_t added = saturating_mul(n, to->size());
  const std::size_t bytes = added > SIZE_MAX - s.size() ? SIZE_MAX : s.size() - n * from->size() + added;
  ev.expect_string(bytes, "replace()");
  ev.step_over(s.size() + bytes);
  return ev.make_string(py_replace(s, *from, *to, n, bytes));
}

Value str_case(MethodCall& c) {  // upper, lower, title, capitalize
  Evaluator& ev = c.ev;
  const std::string& s = c.s();
  ev.expect_string(s.size(), c.name + "()");
  ev.step_over(s.size());
  if (c.name == "upper") return ev.make_string(ascii_upper(s));
  if (c.name == "lower") return ev.make_string(ascii_lower(s));
  if (c.name == "title") return ev.make_string(py_title(s));
  return ev.make_string(s.empty() ? s : ascii_upper(s.substr(0, 1)) + ascii_lower(s.substr(1)));
}

Value str_find(MethodCall& c) {  // find, rfind, count
  const std::string& s = c.s();
  const std::string* sub = c.str_arg(0, "sub");
  if (!sub) c.ev.type_error(c.name + "() takes a string argument");
  c.ev.step_search(s.size(), sub->size());
  if (c.name == "count") {
    if (sub->empty()) return Value::integer(static_cast<std::int64_t>(utf8_length(s)) + 1);
    return Value::integer(static_cast<std::int64_t>(replacement_count(s, *sub, -1)));
  }
  std::size_t p = c.name == "find" ? s.find(*sub) : s.rfind(*sub);
  return Value::integer(
      p == std::string::npos ? -1 : static_cast<std::int64_t>(utf8_length(std::string_view(s).substr(0, p))));
}

Value str_join(MethodCall& c) {
  Evaluator& ev = c.ev;
  const std::string& s = c.s();
  const Value* items = c.a(0, "iterable");
  if (!items) ev.type_error("join() takes an iterable");
  const List parts = ev.iterate(*items);
  std::size_t bytes = parts.empty() ? 0 : saturating_mul(parts.size() - 1, s.size());
  for (const auto& v : parts) {
    if (!v.is_string()) ev.type_error("join(): expected str items, found " + v.type_name());
    bytes = std::min(bytes + v.as_string().size(), SIZE_MAX / 2);  // each part is below the output limit
  }
  ev.expect_string(bytes, "join()");
  ev.step_over(bytes + parts.size());
  std::string out;
  out.reserve(bytes);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += s;
    out += parts[i].as_string();
  }
  return ev.make_string(std::move(out));
}

Value str_is(MethodCall& c) {  // isdigit, isalpha, isspace
  const std::string& s = c.s();
  c.ev.step_over(s.size());
  bool (*pred)(unsigned char) = c.name == "isdigit"   ? +[](unsigned char ch) { return std::isdigit(ch) != 0; }
                                : c.name == "isalpha" ? +[](unsigned char ch) { return std::isalpha(ch) != 0; }
                                                      : +[](unsigned char ch) { return py_space(ch); };
  return Value::boolean(!s.empty() &&
                        std::all_of(s.begin(), s.end(), [&](char ch) { return pred(static_cast<unsigned char>(ch)); }));
}

struct StrMethodRow {
  const char* name;
  Value (*fn)(MethodCall&);
};

// The str methods call_method runs (is_method also names "format", which
// it refuses as unsupported).
constexpr StrMethodRow kStrMethods[] = {
    {"strip", str_strip},       {"lstrip", str_strip},       {"rstrip", str_strip},   {"startswith", str_startswith},
    {"endswith", str_startswith}, {"split", str_split},      {"rsplit", str_split},   {"splitlines", str_splitlines},
    {"replace", str_replace},   {"upper", str_case},         {"lower", str_case},     {"title", str_case},
    {"capitalize", str_case},   {"find", str_find},          {"rfind", str_find},     {"count", str_find},
    {"join", str_join},         {"isdigit", str_is},         {"isalpha", str_is},     {"isspace", str_is},
};

}  // namespace

Value Evaluator::call_method(const Value& self, const std::string& name, Args args, Kwargs kwargs) {
  MethodCall call{*this, name, self, args, kwargs};
  if (self.is_dict()) return dict_method(call);
  if (self.is_list()) fail(ErrorKind::unsupported, "list method not supported (templates may not modify values): " + name);
  for (const StrMethodRow& row : kStrMethods)
    if (name == row.name) return row.fn(call);
  fail(ErrorKind::unsupported, "string method not supported: " + name);
}

}  // namespace weft::serve::detail
