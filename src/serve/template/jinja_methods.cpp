// Python's str and dict methods as templates call them ('x'.strip(),
// d.items(), ...), and the UTF-8 string helpers filters share. Case mapping
// is ASCII-only; lengths, indices and strip characters count code points.
#include <algorithm>
#include <cctype>

#include "serve/template/jinja_eval.h"

namespace weft::serve::detail {
namespace {

bool py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

std::size_t char_len(unsigned char c) { return c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1; }

// Python's str.split / str.rsplit (sep empty: whitespace runs, no empty parts).
std::vector<std::string> py_split(const std::string& s, const std::string* sep, std::int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (!sep) {
    std::vector<std::pair<std::size_t, std::size_t>> words;
    for (std::size_t i = 0; i < s.size();) {
      while (i < s.size() && py_space(static_cast<unsigned char>(s[i]))) ++i;
      std::size_t b = i;
      while (i < s.size() && !py_space(static_cast<unsigned char>(s[i]))) ++i;
      if (i > b) words.emplace_back(b, i);
    }
    if (maxsplit >= 0 && static_cast<std::size_t>(maxsplit) + 1 < words.size()) {
      std::size_t keep = static_cast<std::size_t>(maxsplit);
      if (from_right) {  // the leftmost words stay joined, with their inner spacing
        std::size_t first = words.size() - keep;
        std::vector<std::pair<std::size_t, std::size_t>> w = {{0, words[first - 1].second}};
        w.insert(w.end(), words.begin() + static_cast<std::ptrdiff_t>(first), words.end());
        words = std::move(w);
      } else {
        words.resize(keep + 1);
        words[keep].second = s.size();
      }
    }
    for (auto [b, e] : words) parts.push_back(s.substr(b, e - b));
    return parts;
  }
  std::vector<std::size_t> cuts;
  if (!from_right) {
    for (std::size_t p = s.find(*sep); p != std::string::npos && (maxsplit < 0 || cuts.size() < static_cast<std::size_t>(maxsplit));
         p = s.find(*sep, p + sep->size()))
      cuts.push_back(p);
  } else {
    std::size_t end = s.size();
    while (end >= sep->size() && (maxsplit < 0 || cuts.size() < static_cast<std::size_t>(maxsplit))) {
      std::size_t p = s.rfind(*sep, end - sep->size());
      if (p == std::string::npos) break;
      cuts.insert(cuts.begin(), p);
      if (p < sep->size()) break;
      end = p;
    }
  }
  std::size_t b = 0;
  for (std::size_t c : cuts) parts.push_back(s.substr(b, c - b)), b = c + sep->size();
  parts.push_back(s.substr(b));
  return parts;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, std::int64_t count) {
  std::string out;
  std::size_t b = 0;
  std::int64_t done = 0;
  if (from.empty()) {  // Python inserts `to` between characters
    for (const auto& c : utf8_chars(s)) {
      if (count < 0 || done < count) out += to, ++done;
      out += c;
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  for (std::size_t p = s.find(from); p != std::string::npos && (count < 0 || done < count); p = s.find(from, b), ++done) {
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

std::size_t utf8_length(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = std::min(char_len(static_cast<unsigned char>(s[i])), s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::size_t b = 0, e = s.size();
  if (!chars.is_string()) {
    while (left && b < e && py_space(static_cast<unsigned char>(s[b]))) ++b;
    while (right && e > b && py_space(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
  }
  std::vector<std::string> set = utf8_chars(chars.as_string());
  auto in_set = [&](std::size_t at, std::size_t n) {
    return std::any_of(set.begin(), set.end(), [&](const std::string& c) { return s.compare(at, n, c) == 0 && c.size() == n; });
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
  return s.substr(b, e - b);
}

std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
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

Value Evaluator::call_method(const Value& self, const std::string& name, Args args, Kwargs kwargs) {
  auto a = [&](std::size_t i, const char* n) { return arg(args, kwargs, i, n); };
  auto str_arg = [&](std::size_t i, const char* n) -> const std::string* {
    const Value* v = a(i, n);
    if (!v || v->is_none()) return nullptr;
    if (!v->is_string()) type_error(name + "(): argument '" + n + "' must be str, not " + v->type_name());
    return &v->as_string();
  };
  auto int_arg = [&](std::size_t i, const char* n, std::int64_t dflt) {
    const Value* v = a(i, n);
    if (!v || v->is_none()) return dflt;
    if (!v->is(Value::Type::integer)) type_error(name + "(): argument '" + n + "' must be int, not " + v->type_name());
    return v->as_int();
  };
  if (self.is_dict()) {
    const Dict& d = self.as_dict();
    if (name == "items" || name == "keys" || name == "values") {
      List out;
      for (const auto& [k, v] : d) {
        if (name == "items") out.push_back(make_tuple({Value::string(k), v}));
        else out.push_back(name == "keys" ? Value::string(k) : v);
      }
      return make_list(std::move(out));
    }
    if (name == "get") {
      const Value* key = a(0, "key");
      const Value* found = key && key->is_string() ? self.find(key->as_string()) : nullptr;
      if (found) return *found;
      const Value* dflt = a(1, "default");
      return dflt ? *dflt : Value::none();
    }
    fail(ErrorKind::unsupported, "dict method not supported (templates may not modify values): " + name);
  }
  if (self.is_list()) fail(ErrorKind::unsupported, "list method not supported (templates may not modify values): " + name);
  const std::string& s = self.as_string();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value* chars = a(0, "chars");
    return make_string(py_strip(s, chars ? *chars : Value(), name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* p = a(0, "prefix");
    if (!p) type_error(name + "() takes at least 1 argument");
    List options = p->is_list() ? p->as_list() : List{*p};
    for (const auto& o : options) {
      if (!o.is_string()) type_error(name + "() argument must be str or a tuple of str, not " + o.type_name());
      const std::string& x = o.as_string();
      if (x.size() <= s.size() && s.compare(name == "startswith" ? 0 : s.size() - x.size(), x.size(), x) == 0)
        return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "split" || name == "rsplit") {
    const std::string* sep = str_arg(0, "sep");
    if (sep && sep->empty()) type_error("empty separator");
    List out;
    for (auto& p : py_split(s, sep, int_arg(1, "maxsplit", -1), name == "rsplit")) out.push_back(make_string(std::move(p)));
    return make_list(std::move(out));
  }
  if (name == "splitlines") {
    List out;
    std::size_t b = 0;
    for (std::size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n' || s[i] == '\r') {
        out.push_back(make_string(s.substr(b, i - b)));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        b = i + 1;
      }
    if (b < s.size()) out.push_back(make_string(s.substr(b)));
    return make_list(std::move(out));
  }
  if (name == "replace") {
    const std::string *from = str_arg(0, "old"), *to = str_arg(1, "new");
    if (!from || !to) type_error("replace() takes 2 string arguments");
    std::int64_t count = int_arg(2, "count", -1);
    if (!from->empty() && to->size() > from->size() && s.size() / from->size() * (to->size() - from->size()) > limits_.max_output_bytes)
      fail(ErrorKind::out_of_memory, "replace() result longer than the output limit");
    return make_string(py_replace(s, *from, *to, count));
  }
  if (name == "upper") return make_string(ascii_upper(s));
  if (name == "lower") return make_string(ascii_lower(s));
  if (name == "title") return make_string(py_title(s));
  if (name == "capitalize") return make_string(s.empty() ? s : ascii_upper(s.substr(0, 1)) + ascii_lower(s.substr(1)));
  if (name == "find" || name == "rfind" || name == "count") {
    const std::string* sub = str_arg(0, "sub");
    if (!sub) type_error(name + "() takes a string argument");
    if (name == "count") {
      std::int64_t n = 0;
      if (sub->empty()) return Value::integer(static_cast<std::int64_t>(utf8_length(s)) + 1);
      for (std::size_t p = s.find(*sub); p != std::string::npos; p = s.find(*sub, p + sub->size())) ++n;
      return Value::integer(n);
    }
    std::size_t p = name == "find" ? s.find(*sub) : s.rfind(*sub);
    return Value::integer(p == std::string::npos ? -1 : static_cast<std::int64_t>(utf8_length(s.substr(0, p))));
  }
  if (name == "join") {
    const Value* items = a(0, "iterable");
    if (!items) type_error("join() takes an iterable");
    std::string out;
    bool first = true;
    for (const auto& v : iterate(*items)) {
      if (!v.is_string()) type_error("join(): expected str items, found " + v.type_name());
      if (!first) out += s;
      first = false;
      out += v.as_string();
      if (out.size() > limits_.max_output_bytes) fail(ErrorKind::out_of_memory, "join() result longer than the output limit");
    }
    return make_string(std::move(out));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace") {
    bool (*pred)(unsigned char) = name == "isdigit"   ? +[](unsigned char c) { return std::isdigit(c) != 0; }
                                  : name == "isalpha" ? +[](unsigned char c) { return std::isalpha(c) != 0; }
                                                      : +[](unsigned char c) { return py_space(c); };
    return Value::boolean(!s.empty() && std::all_of(s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)); }));
  }
  fail(ErrorKind::unsupported, "string method not supported: " + name);
}

}  // namespace weft::serve::detail
