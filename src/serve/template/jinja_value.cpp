// Value: construction with depth caps, Python truthiness, equality, str(),
// repr() and json.dumps() formatting.
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

std::int64_t Value::as_int() const { return is(Type::boolean) ? as_bool() : std::get<std::int64_t>(v_); }

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

static std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(quote)) out += std::string("\\") + quote;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

std::string Value::str() const {
  switch (type()) {
    case Type::undefined: return "";
    case Type::none: return "None";
    case Type::boolean: return as_bool() ? "True" : "False";
    case Type::integer: return std::to_string(as_int());
    case Type::floating: return format_double(as_double());
    case Type::string: return as_string();
    case Type::list: {
      bool tuple = std::get<ListPtr>(v_).tuple;
      std::string out = tuple ? "(" : "[";
      for (const auto& v : as_list()) out += (out.size() > 1 ? ", " : "") + v.repr();
      return out + (tuple && as_list().size() == 1 ? ",)" : tuple ? ")" : "]");
    }
    case Type::dict: {
      std::string out = "{";
      for (const auto& [k, v] : as_dict()) out += (out.size() > 1 ? ", " : "") + repr_string(k) + ": " + v.repr();
      return out + "}";
    }
    case Type::ns: return "<Namespace>";
    case Type::callable: return "<function " + as_callable().name + ">";
  }
  return "";
}

std::string Value::repr() const {
  if (is_string()) return repr_string(as_string());
  if (is_undefined()) return "Undefined";
  return str();
}

// Decodes one UTF-8 sequence at s[i] (advancing i); invalid bytes decode as themselves.
static std::uint32_t next_code_point(const std::string& s, std::size_t& i) {
  auto c = static_cast<unsigned char>(s[i++]);
  int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
  std::uint32_t cp = extra == 3 ? c & 0x07u : extra == 2 ? c & 0x0fu : extra == 1 ? c & 0x1fu : c;
  for (int k = 0; k < extra && i < s.size() && (static_cast<unsigned char>(s[i]) & 0xc0) == 0x80; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i++]) & 0x3fu);
  return cp;
}

static void json_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
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
      out += buf;
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

namespace {
struct JsonWriter {
  int indent;
  bool ensure_ascii, sort_keys;
  const std::string &item_sep, &key_sep;
  std::string out;

  void newline(int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(level), ' ');
  }
  void write(const Value& v, int level) {
    switch (v.type()) {
      case Value::Type::none: out += "null"; return;
      case Value::Type::boolean: out += v.as_bool() ? "true" : "false"; return;
      case Value::Type::integer: out += std::to_string(v.as_int()); return;
      case Value::Type::floating: {
        double d = v.as_double();
        out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : format_double(d);
        return;
      }
      case Value::Type::string: json_string(v.as_string(), ensure_ascii, out); return;
      case Value::Type::list: {
        if (v.as_list().empty()) { out += "[]"; return; }
        out += '[';
        bool first = true;
        for (const auto& e : v.as_list()) {
          if (!first) out += item_sep;
          first = false;
          newline(level + 1);
          write(e, level + 1);
        }
        newline(level);
        out += ']';
        return;
      }
      case Value::Type::dict: {
        if (v.as_dict().empty()) { out += "{}"; return; }
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& e : v.as_dict()) entries.push_back(&e);
        if (sort_keys) std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
        out += '{';
        bool first = true;
        for (const auto* e : entries) {
          if (!first) out += item_sep;
          first = false;
          newline(level + 1);
          json_string(e->first, ensure_ascii, out);
          out += key_sep;
          write(e->second, level + 1);
        }
        newline(level);
        out += '}';
        return;
      }
      default: fail(ErrorKind::invalid_input, "chat_template", "tojson: object of type " + v.type_name() + " is not JSON serializable");
    }
  }
};
}  // namespace

std::string Value::to_json(int indent, bool ensure_ascii, bool sort_keys, const std::string& item_sep,
                           const std::string& key_sep) const {
  JsonWriter w{indent, ensure_ascii, sort_keys, item_sep, key_sep, {}};
  w.write(*this, 0);
  return std::move(w.out);
}

bool operator==(const Value& a, const Value& b) {
  using T = Value::Type;
  if (a.is_number() && b.is_number()) {
    if (a.is(T::floating) || b.is(T::floating)) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case T::undefined:
    case T::none: return true;
    case T::string: return a.as_string() == b.as_string();
    case T::list: return a.as_list() == b.as_list();
    case T::dict: {
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (const auto& [k, v] : a.as_dict()) {
        const Value* other = b.find(k);
        if (!other || !(v == *other)) return false;
      }
      return true;
    }
    case T::ns: return a.as_ns() == b.as_ns();
    default: return false;
  }
}

}  // namespace weft::serve::detail
