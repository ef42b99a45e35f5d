// Filters (x | name(args)) and tests (x is name(args)), with Jinja2's
// semantics; tojson is Hugging Face's (json.dumps with ", " and ": ",
// ensure_ascii=False, no HTML escaping). Each charges steps by the bytes and
// items it touches and sizes its result before building it (jinja_eval.h).
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

// The bytes html_escape(s) takes.
std::size_t html_escaped_size(const std::string& s) {
  std::size_t n = s.size();
  for (char c : s) n += c == '&' ? 4 : c == '<' || c == '>' ? 3 : c == '"' || c == '\'' ? 4 : 0;
  return n;
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(html_escaped_size(s));
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
  step();
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
      bool digits = !part.empty() && part.size() <= 18 && std::all_of(part.begin(), part.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      });
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
  std::string v_text;  // v's text when v is not a string
  auto subject = [&]() -> const std::string& { return v.is_string() ? v.as_string() : (v_text = text(v)); };

  if (name == "safe") return v;
  if (name == "string") return v.is_string() ? v : make_string(text(v));
  if (name == "trim") {
    const Value* chars = a(0, "chars");
    return strip(subject(), chars ? *chars : Value(), true, true);
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    const std::string& s = subject();
    expect_string(s.size(), name);
    step_over(s.size());
    if (name == "upper") return make_string(ascii_upper(s));
    if (name == "lower") return make_string(ascii_lower(s));
    if (name == "title") return make_string(jinja_title(s));
    return make_string(s.empty() ? s : ascii_upper(s.substr(0, 1)) + ascii_lower(s.substr(1)));
  }
  if (name == "e" || name == "escape") {
    const std::string& s = subject();
    step_over(s.size());
    expect_string(html_escaped_size(s), name);
    return make_string(html_escape(s));
  }
  if (name == "replace") {
    const Value *from = a(0, "old"), *to = a(1, "new");
    if (!from || !to) type_error("replace filter takes old and new");
    Args margs = {from->is_string() ? *from : make_string(text(*from)), to->is_string() ? *to : make_string(text(*to))};
    if (const Value* count = a(2, "count"); count && !count->is_none()) margs.push_back(*count);
    return call_method(v.is_string() ? v : make_string(text(v)), "replace", std::move(margs), {});
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
    const std::size_t cap =
        std::min(limits_.max_output_bytes, limits_.max_work_bytes - std::min(work_, limits_.max_work_bytes));
    std::optional<std::string> json =
        v.to_json(ind, flag(0, "ensure_ascii"), flag(3, "sort_keys"), item_sep, key_sep, cap);
    if (!json)
      fail(ErrorKind::out_of_memory, "tojson would be longer than " + std::to_string(cap) +
                                         " bytes (the output limit, or the work limit's rest)");
    step_over(json->size());  // the walk's time follows its length: every element writes a byte or more
    return make_string(std::move(*json));
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) {
      step_over(v.as_string().size());
      return Value::integer(static_cast<std::int64_t>(utf8_length(v.as_string())));
    }
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
      step_over(v.as_string().size());
      const auto [b, e] = py_strip_bounds(v.as_string(), Value(), true, true);
      const std::string s = v.as_string().substr(b, e - b);
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
    std::string method = a(1, "method") ? text(*a(1, "method")) : "common";
    double scale = std::pow(10.0, prec && prec->is_number() ? static_cast<double>(prec->as_int()) : 0.0);
    if (!v.is_number()) type_error("round: expected a number, got " + v.type_name());
    double x = v.as_double() * scale;
    x = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
    return Value::floating(x / scale);
  }
  if (name == "first" || name == "last") {  // one item: a string's characters or a dict's keys are not all made
    const bool first = name == "first";
    if (v.is_list()) return v.as_list().empty() ? Value() : first ? v.as_list().front() : v.as_list().back();
    if (v.is_dict())
      return v.as_dict().empty() ? Value()
                                 : Value::string(first ? v.as_dict().front().first : v.as_dict().back().first);
    if (v.is_string()) {
      const std::string& s = v.as_string();
      if (s.empty()) return Value();
      std::size_t at = 0;
      if (!first) {  // the last character: found from the front, as iteration finds it
        step_over(s.size());
        while (at + utf8_char_size(s, at) < s.size()) at += utf8_char_size(s, at);
      }
      return make_string(s.substr(at, utf8_char_size(s, at)));
    }
    iterate(v);  // undefined: empty; others: not iterable
    return Value();
  }
  if (name == "list") return v.is_list() ? v : make_list(iterate(v));
  if (name == "reverse") {
    if (v.is_string()) {  // each character to its mirrored place
      const std::string& s = v.as_string();
      expect_string(s.size(), "reverse");
      step_over(s.size());
      std::string out(s.size(), '\0');
      for (std::size_t at = 0; at < s.size();) {
        const std::size_t len = utf8_char_size(s, at);
        s.copy(out.data() + (s.size() - at - len), len, at);
        at += len;
      }
      return make_string(std::move(out));
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return make_list(std::move(items));
  }
  if (name == "items" || name == "dictsort") {
    if (v.is_undefined()) return make_list({});
    if (!v.is_dict()) type_error(name + ": expected a mapping, got " + v.type_name());
    const Dict& d = v.as_dict();
    std::size_t key_bytes = 0;
    for (const auto& e : d) key_bytes += e.first.size();
    step_over(d.size() + key_bytes);
    // The pairs, and for dictsort each key in lower case, compared by a step each.
    expect_work(list_work(d.size()) + saturating_mul(d.size(), list_work(2) + string_work(0)) + 2 * key_bytes, name);
    std::vector<std::pair<std::string, Value>> keyed;  // (sort key, the pair)
    keyed.reserve(d.size());
    for (const auto& [k, val] : d)
      keyed.emplace_back(name == "dictsort" ? ascii_lower(k) : std::string(), make_tuple({Value::string(k), val}));
    if (name == "dictsort")
      std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
        step_over(std::min(x.first.size(), y.first.size()));
        return x.first < y.first;
      });
    List out;
    out.reserve(keyed.size());
    for (auto& [key, pair] : keyed) out.push_back(std::move(pair));
    return make_list(std::move(out));
  }
  if (name == "join") {
    const Value* sep = a(0, "d");
    std::string attribute = attr_name(1, "attribute"), s = sep ? text(*sep) : "", out;
    bool first = true;
    for (const auto& item : iterate(v)) {
      const Value piece_value = attribute.empty() ? item : attr_path(item, attribute);
      std::string piece_text;
      const std::string& piece = piece_value.is_string() ? piece_value.as_string() : (piece_text = text(piece_value));
      const std::size_t grown = out.size() + (first ? 0 : s.size()) + piece.size();
      expect_string(grown, "join");  // before out grows: it never passes the limits
      step_over(grown - out.size());
      if (!first) out += s;
      first = false;
      out += piece;
    }
    return make_string(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    bool by_attr = name.size() > 6, keep_if = name[0] == 's';
    std::size_t test_at = by_attr ? 1 : 0;
    std::string attribute = by_attr ? attr_name(0, "attr") : "";
    if (by_attr && attribute.empty()) type_error(name + " needs an attribute name");
    std::string test = args.size() > test_at ? text(args[test_at]) : "";
    if (!test.empty() && !is_known_test(test)) fail(ErrorKind::unsupported, "test not supported: " + test);
    Args test_args(args.size() > test_at + 1 ? args.begin() + static_cast<std::ptrdiff_t>(test_at) + 1 : args.end(), args.end());
    List out;
    for (const auto& item : iterate(v)) {
      step();
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
        step();
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
    auto key = [&](const Value& item) {  // a lower-case copy of a string key: sized first
      Value k = attribute.empty() ? item : attr_path(item, attribute);
      if (!k.is_string() || case_sensitive) return k;
      expect_string(k.as_string().size(), name);
      step_over(k.as_string().size());
      return make_string(ascii_lower(k.as_string()));
    };
    List items = iterate(v), out;
    // Each item's key, made once; compared by less() and equal(), which count their steps.
    expect_work(saturating_mul(items.size(), sizeof(std::pair<Value, Value>)), name);
    std::vector<std::pair<Value, Value>> keyed;  // (key, item)
    keyed.reserve(items.size());
    for (auto& item : items) keyed.emplace_back(key(item), std::move(item));
    if (name == "sort") {
      std::stable_sort(keyed.begin(), keyed.end(),
                       [&](const auto& x, const auto& y) { return less(x.first, y.first); });
      if (flag(0, "reverse")) std::reverse(keyed.begin(), keyed.end());
      for (auto& [k, item] : keyed) out.push_back(std::move(item));
      return make_list(std::move(out));
    }
    List seen;
    for (auto& [k, item] : keyed) {
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) continue;
      seen.push_back(k);
      out.push_back(std::move(item));
    }
    return make_list(std::move(out));
  }
  if (name == "indent") {
    const Value* width = a(0, "width");
    std::string pad = width && width->is_string() ? width->as_string()
                                                  : std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(width ? width->as_int() : 4, 0, 256)), ' ');
    bool first = flag(1, "first"), blank = flag(2, "blank");
    const std::string& s = subject();
    // Calls line(b, e, padded) for each line of s, padded when it gets the pad.
    auto each_line = [&](auto&& line) {
      for (std::size_t b = 0, index = 0;; ++index) {
        const std::size_t e = std::min(s.find('\n', b), s.size());
        line(b, e, (index > 0 || first) && (blank || e > b));
        if (e == s.size()) return;
        b = e + 1;
      }
    };
    step_over(2 * s.size());
    std::size_t pads = 0;
    each_line([&](std::size_t, std::size_t, bool padded) { pads += padded; });
    const std::size_t bytes = s.size() + saturating_mul(pads, pad.size());
    expect_string(bytes, "indent");
    step_over(bytes);
    std::string out;
    out.reserve(bytes);
    each_line([&](std::size_t b, std::size_t e, bool padded) {
      if (b > 0) out += '\n';
      if (padded) out += pad;
      out.append(s, b, e - b);
    });
    return make_string(std::move(out));
  }
  fail(ErrorKind::unsupported, "filter not supported: " + name);
}

bool Evaluator::apply_test(const std::string& name, const Value& v, const Args& args) {
  using T = Value::Type;
  step();
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
  if (name == "lower" || name == "upper") {  // cased, and no letter of the other case
    std::string v_text;
    const std::string& s = v.is_string() ? v.as_string() : (v_text = text(v));
    step_over(s.size());
    auto other_case = name == "lower" ? +[](unsigned char c) { return std::isupper(c) != 0; }
                                      : +[](unsigned char c) { return std::islower(c) != 0; };
    bool cased = std::any_of(s.begin(), s.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; });
    return cased && std::none_of(s.begin(), s.end(), [&](char c) { return other_case(static_cast<unsigned char>(c)); });
  }
  if (name == "even" || name == "odd" || name == "divisibleby") {
    if (!v.is(T::integer) && !v.is(T::boolean)) type_error("test '" + name + "' needs an integer, got " + v.type_name());
    std::int64_t d = name == "divisibleby" ? (other().is_number() ? other().as_int() : 0) : 2;
    if (d == 0) type_error("divisibleby: divisor must be a non-zero integer");
    bool divisible = d == -1 || v.as_int() % d == 0;  // INT64_MIN % -1 would trap
    return name == "odd" ? !divisible : divisible;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, other());
  if (name == "ne" || name == "!=") return !equal(v, other());
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, other());
  if (name == "le" || name == "<=") return !less(other(), v);
  if (name == "gt" || name == "greaterthan" || name == ">") return less(other(), v);
  if (name == "ge" || name == ">=") return !less(v, other());
  if (name == "in") return contains(other(), v);
  if (name == "sameas") {
    const Value& o = other();
    if (v.is_none() || v.is(T::boolean) || v.is_undefined()) return v.type() == o.type() && equal(v, o);
    return v.type() == o.type() && ((v.is(T::ns) && v.as_ns() == o.as_ns()));
  }
  fail(ErrorKind::unsupported, "test not supported: " + name);
}

}  // namespace weft::serve::detail
