// Filters (x | name(args)) and tests (x is name(args)), with Jinja2's
// semantics; tojson is Hugging Face's (json.dumps with ", " and ": ",
// ensure_ascii=False, no HTML escaping).
#include <algorithm>
#include <cctype>
#include <cmath>

#include "serve/template/jinja_eval.h"

namespace weft::serve::detail {
namespace {

const char* const kFilters[] = {"trim",   "tojson", "length", "count",   "upper",      "lower",  "title",
                                "capitalize", "first", "last", "join",   "default",    "d",      "replace",
                                "list",   "string", "int",    "float",   "abs",        "items",  "selectattr",
                                "rejectattr", "select", "reject", "map", "unique",     "indent", "safe",
                                "e",      "escape", "reverse", "sort",   "round",      "dictsort"};
const char* const kTests[] = {"defined", "undefined", "none",   "string", "number",   "integer",    "float",
                              "mapping", "iterable",  "sequence", "boolean", "true",  "false",      "even",
                              "odd",     "divisibleby", "eq",   "equalto", "==",      "ne",         "!=",
                              "lt",      "lessthan",  "<",      "le",     "<=",       "gt",         "greaterthan",
                              ">",       "ge",        ">=",     "in",     "callable", "lower",      "upper",
                              "sameas",  "escaped"};

template <class Names>
bool known(const Names& names, const std::string& name) {
  return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
}

const Value* arg(const Args& args, const Kwargs& kwargs, std::size_t i, const char* name) {
  if (i < args.size()) return &args[i];
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string jinja_title(const std::string& s) {  // Jinja's title: words start after whitespace - ( { [ <
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    auto u = static_cast<unsigned char>(c);
    bool delim = std::isspace(u) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (!delim) c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
    start = delim;
  }
  return out;
}

}  // namespace

bool is_known_filter(const std::string& name) { return known(kFilters, name); }
bool is_known_test(const std::string& name) { return known(kTests, name); }

Value Evaluator::apply_filter(const std::string& name, const Value& v, Args args, Kwargs kwargs) {
  auto a = [&](std::size_t i, const char* n) { return arg(args, kwargs, i, n); };
  auto flag = [&](std::size_t i, const char* n) {
    const Value* x = a(i, n);
    return x && x->truthy();
  };
  // Follows a dotted attribute path ("function.name") as Jinja's attribute= arguments do.
  auto attr_path = [&](const Value& item, const std::string& path) {
    Value cur = item;
    for (std::size_t b = 0; b <= path.size();) {
      std::size_t e = std::min(path.find('.', b), path.size());
      std::string part = path.substr(b, e - b);
      bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
      cur = digits ? getitem(cur, Value::integer(std::stoll(part))) : getitem(cur, Value::string(part));
      b = e + 1;
    }
    return cur;
  };
  auto attr_name = [&](std::size_t i, const char* n) -> std::string {
    const Value* x = a(i, n);
    if (!x || x->is_none()) return "";
    if (!x->is_string()) type_error(name + ": attribute must be a string");
    return x->as_string();
  };

  if (name == "safe") return v;
  if (name == "string") return v.is_string() ? v : make_string(v.str());
  if (name == "trim") {
    const Value* chars = a(0, "chars");
    return make_string(py_strip(v.str(), chars ? *chars : Value(), true, true));
  }
  if (name == "upper") return make_string(ascii_upper(v.str()));
  if (name == "lower") return make_string(ascii_lower(v.str()));
  if (name == "title") return make_string(jinja_title(v.str()));
  if (name == "capitalize") {
    std::string s = v.str();
    return make_string(s.empty() ? s : ascii_upper(s.substr(0, 1)) + ascii_lower(s.substr(1)));
  }
  if (name == "e" || name == "escape") return make_string(html_escape(v.str()));
  if (name == "replace") {
    const Value *from = a(0, "old"), *to = a(1, "new");
    if (!from || !to) type_error("replace filter takes old and new");
    Args margs = {make_string(from->str()), make_string(to->str())};
    if (const Value* count = a(2, "count"); count && !count->is_none()) margs.push_back(*count);
    return call_method(v.is_string() ? v : make_string(v.str()), "replace", std::move(margs), {});
  }
  if (name == "tojson") {  // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    const Value* indent = a(1, "indent");
    int ind = -1;
    if (indent && !indent->is_none()) {
      if (!indent->is(Value::Type::integer) || indent->as_int() < 0 || indent->as_int() > 64) type_error("tojson: indent must be an integer 0..64");
      ind = static_cast<int>(indent->as_int());
    }
    std::string item_sep = ind < 0 ? ", " : ",", key_sep = ": ";
    if (const Value* sep = a(2, "separators"); sep && !sep->is_none()) {
      if (!sep->is_list() || sep->as_list().size() != 2 || !sep->as_list()[0].is_string() || !sep->as_list()[1].is_string())
        type_error("tojson: separators must be a pair of strings");
      item_sep = sep->as_list()[0].as_string();
      key_sep = sep->as_list()[1].as_string();
    }
    return make_string(v.to_json(ind, flag(0, "ensure_ascii"), flag(3, "sort_keys"), item_sep, key_sep));
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value::integer(static_cast<std::int64_t>(utf8_length(v.as_string())));
    if (v.is_list()) return Value::integer(static_cast<std::int64_t>(v.as_list().size()));
    if (v.is_dict()) return Value::integer(static_cast<std::int64_t>(v.as_dict().size()));
    if (v.is_undefined()) return Value::integer(0);
    type_error("object of type '" + v.type_name() + "' has no len()");
  }
  if (name == "default" || name == "d") {
    const Value* dflt = a(0, "default_value");
    bool use = v.is_undefined() || (flag(1, "boolean") && !v.truthy());
    return use ? (dflt ? *dflt : Value::string("")) : v;
  }
  if (name == "abs") {
    if (v.is(Value::Type::floating)) return Value::floating(std::fabs(v.as_double()));
    if (!v.is_number() || v.as_int() == INT64_MIN) type_error("bad operand type for abs(): '" + v.type_name() + "'");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (name == "int" || name == "float") {
    const Value* dflt = a(0, "default");
    Value fallback = dflt ? *dflt : name == "int" ? Value::integer(0) : Value::floating(0.0);
    double d = 0;
    if (v.is_number()) {
      d = v.as_double();
      if (name == "int" && !v.is(Value::Type::floating)) return Value::integer(v.as_int());
    } else if (v.is_string()) {
      std::string s = py_strip(v.as_string(), Value(), true, true);
      std::size_t used = 0;
      try {
        if (name == "int" && s.find_first_of(".eE") == std::string::npos) {
          long long i = std::stoll(s, &used);
          if (used == s.size()) return Value::integer(i);
          return fallback;
        }
        d = std::stod(s, &used);
      } catch (const std::exception&) {
        return fallback;
      }
      if (used != s.size()) return fallback;
    } else {
      return fallback;
    }
    if (name == "float") return Value::floating(d);
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::integer(static_cast<std::int64_t>(d));
  }
  if (name == "round") {
    const Value* prec = a(0, "precision");
    std::string method = a(1, "method") ? a(1, "method")->str() : "common";
    double scale = std::pow(10.0, prec && prec->is_number() ? static_cast<double>(prec->as_int()) : 0.0);
    if (!v.is_number()) type_error("round: expected a number, got " + v.type_name());
    double x = v.as_double() * scale;
    x = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
    return Value::floating(x / scale);
  }
  if (name == "first" || name == "last") {
    List items = iterate(v);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return v.is_list() ? v : make_list(iterate(v));
  if (name == "reverse") {
    if (v.is_string()) {
      std::vector<std::string> chars = utf8_chars(v.as_string());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return make_string(std::move(out));
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return make_list(std::move(items));
  }
  if (name == "items" || name == "dictsort") {
    if (v.is_undefined()) return make_list({});
    if (!v.is_dict()) type_error(name + ": expected a mapping, got " + v.type_name());
    List out;
    for (const auto& [k, val] : v.as_dict()) out.push_back(make_tuple({Value::string(k), val}));
    if (name == "dictsort")
      std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
        return ascii_lower(x.as_list()[0].as_string()) < ascii_lower(y.as_list()[0].as_string());
      });
    return make_list(std::move(out));
  }
  if (name == "join") {
    const Value* sep = a(0, "d");
    std::string attribute = attr_name(1, "attribute"), s = sep ? sep->str() : "", out;
    bool first = true;
    for (const auto& item : iterate(v)) {
      if (!first) out += s;
      first = false;
      out += (attribute.empty() ? item : attr_path(item, attribute)).str();
      if (out.size() > limits_.max_output_bytes) fail(ErrorKind::out_of_memory, "join result longer than the output limit");
    }
    return make_string(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    bool by_attr = name.size() > 6, keep_if = name[0] == 's';
    std::size_t test_at = by_attr ? 1 : 0;
    std::string attribute = by_attr ? attr_name(0, "attr") : "";
    if (by_attr && attribute.empty()) type_error(name + " needs an attribute name");
    std::string test = args.size() > test_at ? args[test_at].str() : "";
    if (!test.empty() && !is_known_test(test)) fail(ErrorKind::unsupported, "test not supported: " + test);
    Args test_args(args.size() > test_at + 1 ? args.begin() + static_cast<std::ptrdiff_t>(test_at) + 1 : args.end(), args.end());
    List out;
    for (const auto& item : iterate(v)) {
      Value subject = by_attr ? attr_path(item, attribute) : item;
      bool pass = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
      if (pass == keep_if) out.push_back(item);
    }
    return make_list(std::move(out));
  }
  if (name == "map") {
    std::string attribute = attr_name(99, "attribute");
    List out;
    if (!attribute.empty()) {
      const Value* dflt = arg({}, kwargs, 0, "default");
      for (const auto& item : iterate(v)) {
        Value x = attr_path(item, attribute);
        out.push_back(x.is_undefined() && dflt ? *dflt : x);
      }
    } else {
      if (args.empty() || !args[0].is_string()) type_error("map needs a filter name or attribute=");
      std::string filter = args[0].as_string();
      if (!is_known_filter(filter)) fail(ErrorKind::unsupported, "filter not supported: " + filter);
      Args rest(args.begin() + 1, args.end());
      for (const auto& item : iterate(v)) out.push_back(apply_filter(filter, item, rest, kwargs));
    }
    return make_list(std::move(out));
  }
  if (name == "unique" || name == "sort") {
    bool case_sensitive = flag(name == "sort" ? 1 : 0, "case_sensitive");
    std::string attribute = attr_name(name == "sort" ? 2 : 1, "attribute");
    auto key = [&](const Value& item) {
      Value k = attribute.empty() ? item : attr_path(item, attribute);
      return k.is_string() && !case_sensitive ? Value::string(ascii_lower(k.as_string())) : k;
    };
    List items = iterate(v), out;
    if (name == "sort") {
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) { return less(key(x), key(y)); });
      if (flag(0, "reverse")) std::reverse(items.begin(), items.end());
      return make_list(std::move(items));
    }
    List seen;
    for (const auto& item : items) {
      Value k = key(item);
      if (std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
      seen.push_back(k);
      out.push_back(item);
    }
    return make_list(std::move(out));
  }
  if (name == "indent") {
    const Value* width = a(0, "width");
    std::string pad = width && width->is_string() ? width->as_string()
                                                  : std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(width ? width->as_int() : 4, 0, 256)), ' ');
    bool first = flag(1, "first"), blank = flag(2, "blank");
    std::string s = v.str(), out;
    std::size_t b = 0;
    for (bool line0 = true; b <= s.size(); line0 = false) {
      std::size_t e = std::min(s.find('\n', b), s.size());
      std::string line = s.substr(b, e - b);
      if (!line0) out += '\n';
      if ((!line0 || first) && (blank || !line.empty())) out += pad;
      out += line;
      if (out.size() > limits_.max_output_bytes) fail(ErrorKind::out_of_memory, "indent result longer than the output limit");
      if (e == s.size()) break;
      b = e + 1;
    }
    return make_string(std::move(out));
  }
  fail(ErrorKind::unsupported, "filter not supported: " + name);
}

bool Evaluator::apply_test(const std::string& name, const Value& v, const Args& args) {
  using T = Value::Type;
  auto other = [&]() -> const Value& {
    if (args.empty()) type_error("test '" + name + "' needs an argument");
    return args[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is(T::integer);
  if (name == "float") return v.is(T::floating);
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "boolean") return v.is(T::boolean);
  if (name == "true") return v.is(T::boolean) && v.as_bool();
  if (name == "false") return v.is(T::boolean) && !v.as_bool();
  if (name == "callable") return v.is(T::callable);
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    std::string s = v.str();
    bool cased = std::any_of(s.begin(), s.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; });
    return cased && s == (name == "lower" ? ascii_lower(s) : ascii_upper(s));
  }
  if (name == "even" || name == "odd" || name == "divisibleby") {
    if (!v.is(T::integer) && !v.is(T::boolean)) type_error("test '" + name + "' needs an integer, got " + v.type_name());
    std::int64_t d = name == "divisibleby" ? (other().is_number() ? other().as_int() : 0) : 2;
    if (d == 0) type_error("divisibleby: divisor must be a non-zero integer");
    bool divisible = v.as_int() % d == 0;
    return name == "odd" ? !divisible : divisible;
  }
  if (name == "eq" || name == "equalto" || name == "==") return v == other();
  if (name == "ne" || name == "!=") return !(v == other());
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, other());
  if (name == "le" || name == "<=") return !less(other(), v);
  if (name == "gt" || name == "greaterthan" || name == ">") return less(other(), v);
  if (name == "ge" || name == ">=") return !less(v, other());
  if (name == "in") return contains(other(), v);
  if (name == "sameas") {
    const Value& o = other();
    if (v.is_none() || v.is(T::boolean) || v.is_undefined()) return v.type() == o.type() && v == o;
    return v.type() == o.type() && ((v.is(T::ns) && v.as_ns() == o.as_ns()));
  }
  fail(ErrorKind::unsupported, "test not supported: " + name);
}

}  // namespace weft::serve::detail
