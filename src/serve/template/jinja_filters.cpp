// Filters (x | name(args)) and tests (x is name(args)), with Jinja2's
// semantics; tojson is Hugging Face's (json.dumps with ", " and ": ",
// ensure_ascii=False, no HTML escaping). Each charges steps by the bytes and
// items it touches and sizes its result before building it (jinja_eval.h).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "serve/template/jinja_filter_call.h"

namespace weft::serve::detail {
namespace {

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


Value filter_safe(FilterCall& c) { return c.v; }

Value filter_string(FilterCall& c) { return c.v.is_string() ? c.v : c.ev.make_string(c.ev.text(c.v)); }

Value filter_trim(FilterCall& c) {
  const Value* chars = c.arg(0, "chars");
  return c.ev.strip(c.subject(), chars ? *chars : Value(), true, true);
}

Value filter_case(FilterCall& c) {  // upper, lower, title, capitalize
  const std::string& s = c.subject();
  c.ev.expect_string(s.size(), c.name);
  c.ev.step_over(s.size());
  if (c.name == "upper") return c.ev.make_string(ascii_upper(s));
  if (c.name == "lower") return c.ev.make_string(ascii_lower(s));
  if (c.name == "title") return c.ev.make_string(jinja_title(s));
  return c.ev.make_string(s.empty() ? s : ascii_upper(s.substr(0, 1)) + ascii_lower(s.substr(1)));
}

Value filter_escape(FilterCall& c) {
  const std::string& s = c.subject();
  c.ev.step_over(s.size());
  c.ev.expect_string(html_escaped_size(s), c.name);
  return c.ev.make_string(html_escape(s));
}

Value filter_replace(FilterCall& c) {
  Evaluator& ev = c.ev;
  const Value *from = c.arg(0, "old"), *to = c.arg(1, "new");
  if (!from || !to) ev.type_error("replace filter takes old and new");
  Args margs = {from->is_string() ? *from : ev.make_string(ev.text(*from)),
                to->is_string() ? *to : ev.make_string(ev.text(*to))};
  if (const Value* count = c.arg(2, "count"); count && !count->is_none()) margs.push_back(*count);
  return ev.call_method(c.v.is_string() ? c.v : ev.make_string(ev.text(c.v)), "replace", std::move(margs), {});
}

// transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
Value filter_tojson(FilterCall& c) {
  Evaluator& ev = c.ev;
  const Value* indent = c.arg(1, "indent");
  int ind = -1;
  if (indent && !indent->is_none()) {
    if (!indent->is(Value::Type::integer) || indent->as_int() < 0 || indent->as_int() > 64)
      ev.type_error("tojson: indent must be an integer 0..64");
    ind = static_cast<int>(indent->as_int());
  }
  std::string item_sep = ind < 0 ? ", " : ",", key_sep = ": ";
  if (const Value* sep = c.arg(2, "separators"); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->as_list().size() != 2 || !sep->as_list()[0].is_string() || !sep->as_list()[1].is_string())
      ev.type_error("tojson: separators must be a pair of strings");
    item_sep = sep->as_list()[0].as_string();
    key_sep = sep->as_list()[1].as_string();
  }
  const std::size_t cap = ev.output_cap();
  std::optional<std::string> json =
      c.v.to_json(ind, c.flag(0, "ensure_ascii"), c.flag(3, "sort_keys"), item_sep, key_sep, cap);
  if (!json)
    ev.fail(ErrorKind::out_of_memory, "tojson would be longer than " + std::to_string(cap) +
                                          " bytes (the output limit, or the work limit's rest)");
  ev.step_over(json->size());  // the walk's time follows its length: every element writes a byte or more
  return ev.make_string(std::move(*json));
}

Value filter_length(FilterCall& c) {  // length, count
  const Value& v = c.v;
  if (v.is_string()) {
    c.ev.step_over(v.as_string().size());
    return Value::integer(static_cast<std::int64_t>(utf8_length(v.as_string())));
  }
  if (v.is_list()) return Value::integer(static_cast<std::int64_t>(v.as_list().size()));
  if (v.is_dict()) return Value::integer(static_cast<std::int64_t>(v.as_dict().size()));
  if (v.is_undefined()) return Value::integer(0);
  c.ev.type_error("object of type '" + v.type_name() + "' has no len()");
}

Value filter_default(FilterCall& c) {  // default, d
  const Value* dflt = c.arg(0, "default_value");
  bool use = c.v.is_undefined() || (c.flag(1, "boolean") && !c.v.truthy());
  return use ? (dflt ? *dflt : Value::string("")) : c.v;
}

Value filter_abs(FilterCall& c) {
  const Value& v = c.v;
  if (v.is(Value::Type::floating)) return Value::floating(std::fabs(v.as_double()));
  if (!v.is_number() || v.as_int() == INT64_MIN) c.ev.type_error("bad operand type for abs(): '" + v.type_name() + "'");
  return Value::integer(std::llabs(v.as_int()));
}

// int or float of a string: the result when it is decided here (an int, or
// the fallback when the stripped text is not wholly a number); nullopt with d
// set when the number still needs float's or int's last steps.
std::optional<Value> number_of_string(FilterCall& c, const Value& fallback, bool as_int, double& d) {
  const std::string& text = c.v.as_string();
  c.ev.step_over(text.size());
  const auto [b, e] = py_strip_bounds(text, Value(), true, true);
  const std::string s = text.substr(b, e - b);
  std::size_t used = 0;
  try {
    if (as_int && s.find_first_of(".eE") == std::string::npos) {
      long long i = std::stoll(s, &used);
      return used == s.size() ? Value::integer(i) : fallback;
    }
    d = std::stod(s, &used);
  } catch (const std::exception&) {
    return fallback;
  }
  if (used != s.size()) return fallback;
  return std::nullopt;
}

Value filter_number(FilterCall& c) {  // int, float
  const Value& v = c.v;
  const bool as_int = c.name == "int";
  const Value* dflt = c.arg(0, "default");
  Value fallback = dflt ? *dflt : as_int ? Value::integer(0) : Value::floating(0.0);
  double d = 0;
  if (v.is_number()) {
    d = v.as_double();
    if (as_int && !v.is(Value::Type::floating)) return Value::integer(v.as_int());
  } else if (v.is_string()) {
    if (std::optional<Value> decided = number_of_string(c, fallback, as_int, d)) return *decided;
  } else {
    return fallback;
  }
  if (!as_int) return Value::floating(d);
  if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
  return Value::integer(static_cast<std::int64_t>(d));
}

Value filter_round(FilterCall& c) {
  const Value* prec = c.arg(0, "precision");
  std::string method = c.arg(1, "method") ? c.ev.text(*c.arg(1, "method")) : "common";
  double scale = std::pow(10.0, prec && prec->is_number() ? static_cast<double>(prec->as_int()) : 0.0);
  if (!c.v.is_number()) c.ev.type_error("round: expected a number, got " + c.v.type_name());
  double x = c.v.as_double() * scale;
  x = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value::floating(x / scale);
}

Value filter_indent(FilterCall& c) {
  const Value* width = c.arg(0, "width");
  std::string pad = width && width->is_string()
                        ? width->as_string()
                        : std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(width ? width->as_int() : 4, 0, 256)), ' ');
  bool first = c.flag(1, "first"), blank = c.flag(2, "blank");
  const std::string& s = c.subject();
  // Calls line(b, e, padded) for each line of s, padded when it gets the pad.
  auto each_line = [&](auto&& line) {
    for (std::size_t b = 0, index = 0;; ++index) {
      const std::size_t e = std::min(s.find('\n', b), s.size());
      line(b, e, (index > 0 || first) && (blank || e > b));
      if (e == s.size()) return;
      b = e + 1;
    }
  };
  c.ev.step_over(2 * s.size());
  std::size_t pads = 0;
  each_line([&](std::size_t, std::size_t, bool padded) { pads += padded; });
  const std::size_t bytes = s.size() + saturating_mul(pads, pad.size());
  c.ev.expect_string(bytes, "indent");
  c.ev.step_over(bytes);
  std::string out;
  out.reserve(bytes);
  each_line([&](std::size_t b, std::size_t e, bool padded) {
    if (b > 0) out += '\n';
    if (padded) out += pad;
    out.append(s, b, e - b);
  });
  return c.ev.make_string(std::move(out));
}

struct FilterRow {
  const char* name;
  FilterFn fn;
};

// Every filter: the parser accepts exactly these names (is_known_filter).
constexpr FilterRow kFilters[] = {
    {"trim", filter_trim},          {"tojson", filter_tojson},         {"length", filter_length},
    {"count", filter_length},       {"upper", filter_case},            {"lower", filter_case},
    {"title", filter_case},         {"capitalize", filter_case},       {"first", filter_first_last},
    {"last", filter_first_last},    {"join", filter_join},             {"default", filter_default},
    {"d", filter_default},          {"replace", filter_replace},       {"list", filter_list},
    {"string", filter_string},      {"int", filter_number},            {"float", filter_number},
    {"abs", filter_abs},            {"items", filter_items},           {"selectattr", filter_select},
    {"rejectattr", filter_select},  {"select", filter_select},         {"reject", filter_select},
    {"map", filter_map},            {"unique", filter_unique_sort},    {"indent", filter_indent},
    {"safe", filter_safe},          {"e", filter_escape},              {"escape", filter_escape},
    {"reverse", filter_reverse},    {"sort", filter_unique_sort},      {"round", filter_round},
    {"dictsort", filter_items},
};

const FilterRow* find_filter(const std::string& name) {
  for (const FilterRow& row : kFilters)
    if (name == row.name) return &row;
  return nullptr;
}

}  // namespace

const Value* FilterCall::arg(std::size_t i, const char* n) const {
  if (i < args.size()) return &args[i];
  for (const auto& [k, value] : kwargs)
    if (k == n) return &value;
  return nullptr;
}

bool FilterCall::flag(std::size_t i, const char* n) const {
  const Value* x = arg(i, n);
  return x && x->truthy();
}

std::string FilterCall::attr_name(std::size_t i, const char* n) const {
  const Value* x = arg(i, n);
  if (!x || x->is_none()) return "";
  if (!x->is_string()) ev.type_error(name + ": attribute must be a string");
  return x->as_string();
}

Value FilterCall::attr_path(const Value& item, const std::string& path) const {
  Value cur = item;
  for (std::size_t b = 0; b <= path.size();) {
    std::size_t e = std::min(path.find('.', b), path.size());
    std::string part = path.substr(b, e - b);
    bool digits = !part.empty() && part.size() <= 18 && std::all_of(part.begin(), part.end(), [](char ch) {
      return std::isdigit(static_cast<unsigned char>(ch));
    });
    cur = digits ? ev.getitem(cur, Value::integer(std::stoll(part))) : ev.getitem(cur, Value::string(part));
    b = e + 1;
  }
  return cur;
}

const std::string& FilterCall::subject() { return v.is_string() ? v.as_string() : (v_text = ev.text(v)); }

bool is_known_filter(const std::string& name) { return find_filter(name) != nullptr; }
bool is_known_test(const std::string& name) { return known(kTests, name); }

Value Evaluator::apply_filter(const std::string& name, const Value& v, Args args, Kwargs kwargs) {
  step();
  const FilterRow* row = find_filter(name);
  if (row == nullptr) fail(ErrorKind::unsupported, "filter not supported: " + name);
  FilterCall call{*this, name, v, args, kwargs, {}};
  return row->fn(call);
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
