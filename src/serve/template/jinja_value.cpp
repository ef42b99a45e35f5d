// Value: construction with depth caps, Python truthiness, and str(), repr()
// and json.dumps() formatting within a byte cap. (Equality is the evaluator's,
// which counts its steps: jinja_ops.cpp.)
#include "serve/template/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "weft/core/error.h"

namespace weft::serve::detail {

void fail_too_deep() { fail(ErrorKind::out_of_memory, "chat_template", "a value nests deeper than the depth cap"); }

Value Value::list(List items, int max_depth) {
  int depth = 0;
  for (const auto& v : items) depth = std::max(depth, v.depth());
  if (depth + 1 > max_depth) fail_too_deep();
  return Value(ListPtr{std::make_shared<const List>(std::move(items)), depth + 1, false});
}

Value Value::tuple(List items, int max_depth) {
  Value v = list(std::move(items), max_depth);
  std::get<ListPtr>(v.v_).tuple = true;
  return v;
}

Value Value::dict(Dict entries, int max_depth) {
  int depth = 0;
  for (const auto& e : entries) depth = std::max(depth, e.second.depth());
  if (depth + 1 > max_depth) fail_too_deep();
  return Value(DictPtr{std::make_shared<const Dict>(std::move(entries)), depth + 1});
}

int Value::depth() const {
  if (is_list()) return std::get<ListPtr>(v_).depth;
  if (is_dict()) return std::get<DictPtr>(v_).depth;
  return 0;
}

std::int64_t Value::as_int() const {
  if (is(Type::boolean)) return as_bool();
  // Callers check for a number; a float where an integer is wanted is the
  // template's type error, never a std::bad_variant_access escaping as a 500.
  if (!is(Type::integer)) fail(ErrorKind::invalid_input, "chat_template", "an integer is needed here, not a " + type_name());
  return std::get<std::int64_t>(v_);
}

double Value::as_double() const {
  return is(Type::floating) ? std::get<double>(v_) : static_cast<double>(as_int());
}

bool Value::truthy() const {
  switch (type()) {
    case Type::undefined:
    case Type::none: return false;
    case Type::boolean: return as_bool();
    case Type::integer: return as_int() != 0;
    case Type::floating: return as_double() != 0.0;
    case Type::string: return !as_string().empty();
    case Type::list: return !as_list().empty();
    case Type::dict: return !as_dict().empty();
    case Type::ns:
    case Type::callable: return true;
  }
  return false;
}

const Value* Value::find(std::string_view key) const {
  if (!is_dict()) return nullptr;
  for (const auto& [k, v] : as_dict())
    if (k == key) return &v;
  return nullptr;
}

std::string Value::type_name() const {
  static const char* const names[] = {"undefined", "NoneType", "bool", "int", "float", "str", "list", "dict",
                                      "namespace", "function"};
  return names[static_cast<int>(type())];
}

std::string format_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-d.ddde+XX"
  std::size_t e = sci.find('e');
  int exp = std::stoi(sci.substr(e + 1));
  std::string sign = sci[0] == '-' ? "-" : "";
  std::string digits;
  for (std::size_t i = sign.size(); i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  if (exp >= -4 && exp < 16) {  // positional, as Python's repr
    std::string out;
    if (exp < 0) {
      out = "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<std::size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<std::size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<std::size_t>(exp) + 1) + "." + digits.substr(static_cast<std::size_t>(exp) + 1);
    }
    return sign + out;
  }
  std::string mant = digits.size() > 1 ? digits.substr(0, 1) + "." + digits.substr(1) : digits;
  std::snprintf(buf, sizeof buf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return sign + mant + buf;
}

namespace {

struct TooLong {};  // thrown by BoundedText past its cap; caught where the walk began

// Text that refuses to grow past its cap (throws TooLong), so that printing a
// value whose elements are shared many times stops as soon as it is too long.
struct BoundedText {
  std::size_t cap;
  std::string out;

  void put(std::string_view s) {
    if (s.size() > cap - out.size()) throw TooLong{};
    out.append(s);
  }
  void put(char c) { put(std::string_view(&c, 1)); }
  void put_spaces(std::size_t n) {
    if (n > cap - out.size()) throw TooLong{};
    out.append(n, ' ');
  }
};

void repr_string(const std::string& s, BoundedText& t) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  t.put(quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      t.put("\\\\");
    } else if (c == static_cast<unsigned char>(quote)) {
      t.put('\\');
      t.put(quote);
    } else if (c == '\n') {
      t.put("\\n");
    } else if (c == '\r') {
      t.put("\\r");
    } else if (c == '\t') {
      t.put("\\t");
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      t.put(buf);
    } else {
      t.put(static_cast<char>(c));
    }
  }
  t.put(quote);
}

// Python's str() of v, or with as_repr its repr() (as str() shows list and dict elements).
void write_text(const Value& v, bool as_repr, BoundedText& t) {
  using T = Value::Type;
  switch (v.type()) {
    case T::undefined: t.put(as_repr ? "Undefined" : ""); return;
    case T::none: t.put("None"); return;
    case T::boolean: t.put(v.as_bool() ? "True" : "False"); return;
    case T::integer: t.put(std::to_string(v.as_int())); return;
    case T::floating: t.put(format_double(v.as_double())); return;
    case T::string:
      if (as_repr)
        repr_string(v.as_string(), t);
      else
        t.put(v.as_string());
      return;
    case T::list: {
      const bool tuple = v.is_tuple();
      t.put(tuple ? '(' : '[');
      bool first = true;
      for (const auto& e : v.as_list()) {
        if (!first) t.put(", ");
        first = false;
        write_text(e, true, t);
      }
      t.put(tuple && v.as_list().size() == 1 ? ",)" : tuple ? ")" : "]");
      return;
    }
    case T::dict: {
      t.put('{');
      bool first = true;
      for (const auto& [k, e] : v.as_dict()) {
        if (!first) t.put(", ");
        first = false;
        repr_string(k, t);
        t.put(": ");
        write_text(e, true, t);
      }
      t.put('}');
      return;
    }
    case T::ns: t.put("<Namespace>"); return;
    case T::callable: t.put("<function " + v.as_callable().name + ">"); return;
  }
}

// Decodes one UTF-8 sequence at s[i] (advancing i); invalid bytes decode as themselves.
std::uint32_t next_code_point(const std::string& s, std::size_t& i) {
  auto c = static_cast<unsigned char>(s[i++]);
  int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
  std::uint32_t cp = extra == 3 ? c & 0x07u : extra == 2 ? c & 0x0fu : extra == 1 ? c & 0x1fu : c;
  for (int k = 0; k < extra && i < s.size() && (static_cast<unsigned char>(s[i]) & 0xc0) == 0x80; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i++]) & 0x3fu);
  return cp;
}

void json_string(const std::string& s, bool ensure_ascii, BoundedText& out) {
  out.put('"');
  char buf[16];
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80 && ensure_ascii) {
      std::uint32_t cp = next_code_point(s, i);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out.put(buf);
      continue;
    }
    ++i;
    switch (c) {
      case '"': out.put("\\\""); break;
      case '\\': out.put("\\\\"); break;
      case '\n': out.put("\\n"); break;
      case '\r': out.put("\\r"); break;
      case '\t': out.put("\\t"); break;
      case '\b': out.put("\\b"); break;
      case '\f': out.put("\\f"); break;
      default:
        if (c < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out.put(buf);
        } else {
          out.put(static_cast<char>(c));
        }
    }
  }
  out.put('"');
}

struct JsonWriter {
  int indent;
  bool ensure_ascii, sort_keys;
  const std::string &item_sep, &key_sep;
  BoundedText out;

  void newline(int level) {
    if (indent < 0) return;
    out.put('\n');
    out.put_spaces(static_cast<std::size_t>(indent) * static_cast<std::size_t>(level));
  }
  void write(const Value& v, int level) {
    switch (v.type()) {
      case Value::Type::none: out.put("null"); return;
      case Value::Type::boolean: out.put(v.as_bool() ? "true" : "false"); return;
      case Value::Type::integer: out.put(std::to_string(v.as_int())); return;
      case Value::Type::floating: {
        double d = v.as_double();
        out.put(std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : format_double(d));
        return;
      }
      case Value::Type::string: json_string(v.as_string(), ensure_ascii, out); return;
      case Value::Type::list: {
        if (v.as_list().empty()) {
          out.put("[]");
          return;
        }
        out.put('[');
        bool first = true;
        for (const auto& e : v.as_list()) {
          if (!first) out.put(item_sep);
          first = false;
          newline(level + 1);
          write(e, level + 1);
        }
        newline(level);
        out.put(']');
        return;
      }
      case Value::Type::dict: {
        if (v.as_dict().empty()) {
          out.put("{}");
          return;
        }
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& e : v.as_dict()) entries.push_back(&e);
        if (sort_keys) std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
        out.put('{');
        bool first = true;
        for (const auto* e : entries) {
          if (!first) out.put(item_sep);
          first = false;
          newline(level + 1);
          json_string(e->first, ensure_ascii, out);
          out.put(key_sep);
          write(e->second, level + 1);
        }
        newline(level);
        out.put('}');
        return;
      }
      default: fail(ErrorKind::invalid_input, "chat_template", "tojson: object of type " + v.type_name() + " is not JSON serializable");
    }
  }
};

}  // namespace

std::optional<std::string> Value::str(std::size_t max_bytes) const {
  BoundedText t{max_bytes, {}};
  try {
    write_text(*this, false, t);
  } catch (const TooLong&) {
    return std::nullopt;
  }
  return std::move(t.out);
}

std::optional<std::string> Value::to_json(int indent, bool ensure_ascii, bool sort_keys, const std::string& item_sep,
                                          const std::string& key_sep, std::size_t max_bytes) const {
  JsonWriter w{indent, ensure_ascii, sort_keys, item_sep, key_sep, BoundedText{max_bytes, {}}};
  try {
    w.write(*this, 0);
  } catch (const TooLong&) {
    return std::nullopt;
  }
  return std::move(w.out.out);
}

}  // namespace weft::serve::detail
