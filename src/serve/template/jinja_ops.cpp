// Operators and access: arithmetic, comparison, membership, attribute and
// item lookup, slicing, iteration, and the global functions (range,
// namespace, dict, raise_exception, strftime_now). Each charges its steps by
// the bytes and items it touches, and sizes what it builds before building it
// (jinja_eval.h states the contract).
#include <algorithm>
#include <cmath>
#include <ctime>
#include <optional>

#include "serve/template/jinja_eval.h"

namespace weft::serve::detail {
namespace {

bool is_int(const Value& v) { return v.is(Value::Type::integer) || v.is(Value::Type::boolean); }

template <class Op>
Value checked(Op op, std::int64_t x, std::int64_t y, const Evaluator& ev) {
  std::int64_t r = 0;
  if (op(x, y, &r)) ev.fail(ErrorKind::invalid_input, "integer overflow");
  return Value::integer(r);
}

// x ** y for y >= 0 by squaring: at most 2 * 63 multiplications. The base is
// squared only while a bit of y remains, and then |x| >= 2 makes the result
// at least that square, so an overflow of either is an overflow of x ** y.
Value int_power(std::int64_t x, std::int64_t y, const Evaluator& ev) {
  std::int64_t result = 1, base = x;
  for (;;) {
    if ((y & 1) != 0 && __builtin_mul_overflow(result, base, &result))
      ev.fail(ErrorKind::invalid_input, "integer overflow");
    y >>= 1;
    if (y == 0) return Value::integer(result);
    if (__builtin_mul_overflow(base, base, &base)) ev.fail(ErrorKind::invalid_input, "integer overflow");
  }
}

// The characters of s that Python's s[b:e:st] selects (b, e clamped as
// slice.indices() does, count of them given), as (byte offset, byte length)
// in the slice's order.
std::vector<std::pair<std::size_t, std::size_t>> picked_chars(const std::string& s, std::int64_t b, std::int64_t st,
                                                              std::size_t count) {
  std::vector<std::pair<std::size_t, std::size_t>> picks;
  picks.reserve(count);
  const std::int64_t first = st > 0 ? b : b + st * static_cast<std::int64_t>(count - 1);  // lowest index picked
  const std::int64_t stride = st > 0 ? st : -st;
  std::int64_t index = 0;
  for (std::size_t at = 0; at < s.size() && picks.size() < count; ++index) {
    const std::size_t n = utf8_char_size(s, at);
    if (index >= first && (index - first) % stride == 0) picks.emplace_back(at, n);
    at += n;
  }
  if (st < 0) std::reverse(picks.begin(), picks.end());
  return picks;
}

// How many indices b, b + st, ... lie before e (after e, for st < 0).
std::size_t slice_count(std::int64_t b, std::int64_t e, std::int64_t st) {
  if (st > 0 ? b >= e : b <= e) return 0;
  const auto span =
      static_cast<unsigned __int128>(st > 0 ? static_cast<__int128>(e) - b : static_cast<__int128>(b) - e);
  const auto stride = static_cast<unsigned __int128>(st > 0 ? static_cast<__int128>(st) : -static_cast<__int128>(st));
  const unsigned __int128 n = (span + stride - 1) / stride;
  return n > SIZE_MAX ? SIZE_MAX : static_cast<std::size_t>(n);
}

}  // namespace

bool Evaluator::equal(const Value& a, const Value& b) {
  using T = Value::Type;
  step();
  if (a.is_number() && b.is_number()) {
    if (a.is(T::floating) || b.is(T::floating)) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case T::undefined:
    case T::none: return true;
    case T::string:
      if (a.as_string().size() != b.as_string().size()) return false;
      step_over(a.as_string().size());
      return a.as_string() == b.as_string();
    case T::list: {
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case T::dict: {
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (const auto& [k, v] : a.as_dict()) {
        step_over(b.as_dict().size());  // the lookup scans b's entries
        const Value* other = b.find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    }
    case T::ns: return a.as_ns() == b.as_ns();
    default: return false;
  }
}

namespace {

// Python's integer operators, overflow an error; nullopt for one that
// integers do not have here.
std::optional<Value> int_arithmetic(Evaluator& ev, const std::string& op, std::int64_t x, std::int64_t y) {
  auto add = [](std::int64_t p, std::int64_t q, std::int64_t* r) { return __builtin_add_overflow(p, q, r); };
  auto sub = [](std::int64_t p, std::int64_t q, std::int64_t* r) { return __builtin_sub_overflow(p, q, r); };
  auto mul = [](std::int64_t p, std::int64_t q, std::int64_t* r) { return __builtin_mul_overflow(p, q, r); };
  if (op == "+") return checked(add, x, y, ev);
  if (op == "-") return checked(sub, x, y, ev);
  if (op == "*") return checked(mul, x, y, ev);
  if (op == "//" || op == "%") {
    if (y == 0) ev.type_error("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) ev.type_error("integer overflow");
    std::int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
    return Value::integer(op == "//" ? q : m);
  }
  if (op == "**") {
    if (y < 0) return Value::floating(std::pow(static_cast<double>(x), static_cast<double>(y)));
    return int_power(x, y, ev);
  }
  return std::nullopt;
}

// Python's float operators (and int with float); nullopt for one they do not have.
std::optional<Value> float_arithmetic(Evaluator& ev, const std::string& op, double x, double y) {
  if (op == "+") return Value::floating(x + y);
  if (op == "-") return Value::floating(x - y);
  if (op == "*") return Value::floating(x * y);
  if (op == "**") return Value::floating(std::pow(x, y));
  if (y == 0) ev.type_error("float division by zero");
  if (op == "/") return Value::floating(x / y);
  if (op == "//") return Value::floating(std::floor(x / y));
  if (op == "%") {
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::floating(m);
  }
  return std::nullopt;
}

}  // namespace

Value Evaluator::binary(const std::string& op, const Value& a, const Value& b) {
  // Joins two strings, sized before it is built.
  auto concat = [&](const std::string& x, const std::string& y) {
    expect_string(x.size() + y.size(), "'" + op + "'");
    step_over(x.size() + y.size());
    std::string out;
    out.reserve(x.size() + y.size());
    out.append(x).append(y);
    return make_string(std::move(out));
  };
  if (op == "~") {
    std::string x_text, y_text;  // the operands' text when they are not strings already
    const std::string& x = a.is_string() ? a.as_string() : (x_text = text(a));
    const std::string& y = b.is_string() ? b.as_string() : (y_text = text(b));
    return concat(x, y);
  }
  if (op == "==") return Value::boolean(equal(a, b));
  if (op == "!=") return Value::boolean(!equal(a, b));
  if (op == "<") return Value::boolean(less(a, b));
  if (op == ">") return Value::boolean(less(b, a));
  if (op == "<=") return Value::boolean(!less(b, a));
  if (op == ">=") return Value::boolean(!less(a, b));
  if (op == "in") return Value::boolean(contains(b, a));
  if (op == "not in") return Value::boolean(!contains(b, a));
  auto bad = [&]() -> Value {
    type_error("unsupported operand types for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) return concat(a.as_string(), b.as_string());
    if (a.is_list() && b.is_list()) {
      const std::size_t n = a.as_list().size() + b.as_list().size();
      expect_work(list_work(n), "'+' of two lists");
      step_over(n);
      List items;
      items.reserve(n);
      items.insert(items.end(), a.as_list().begin(), a.as_list().end());
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      return make_list(std::move(items));
    }
  }
  if (op == "*" && ((a.is_string() && is_int(b)) || (is_int(a) && b.is_string()))) {
    const std::string& s = a.is_string() ? a.as_string() : b.as_string();
    std::int64_t n = a.is_string() ? b.as_int() : a.as_int();
    if (n <= 0 || s.empty()) return Value::string("");
    const std::size_t bytes = saturating_mul(s.size(), static_cast<std::uint64_t>(n));
    expect_string(bytes, "'*' on a string");
    step_over(bytes);
    std::string out;
    out.reserve(bytes);
    for (std::int64_t i = 0; i < n; ++i) out += s;
    return make_string(std::move(out));
  }
  if (!a.is_number() || !b.is_number()) return bad();
  std::optional<Value> r = is_int(a) && is_int(b) && op != "/"
                               ? int_arithmetic(*this, op, a.as_int(), b.as_int())
                               : float_arithmetic(*this, op, a.as_double(), b.as_double());
  return r ? *r : bad();
}

bool Evaluator::less(const Value& a, const Value& b) {
  step();
  if (a.is_number() && b.is_number()) {
    if (is_int(a) && is_int(b)) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) {  // UTF-8 bytes order as code points
    step_over(std::min(a.as_string().size(), b.as_string().size()));
    return a.as_string() < b.as_string();
  }
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equal(x[i], y[i])) return less(x[i], y[i]);
    return x.size() < y.size();
  }
  type_error("'<' not supported between '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool Evaluator::contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::string:
      if (!item.is_string()) type_error("'in <string>' requires string as left operand, not " + item.type_name());
      step_search(container.as_string().size(), item.as_string().size());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::list:
      return std::any_of(container.as_list().begin(), container.as_list().end(),
                         [&](const Value& x) { return equal(x, item); });
    case Value::Type::dict:
      step_over(container.as_dict().size());
      return item.is_string() && container.find(item.as_string()) != nullptr;
    case Value::Type::undefined: return false;
    default: type_error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

List Evaluator::iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::list: step_over(v.as_list().size()); return v.as_list();
    case Value::Type::dict: {  // new strings: the keys
      const Dict& d = v.as_dict();
      step_over(d.size());
      std::size_t bytes = list_work(d.size());
      for (const auto& e : d) bytes += string_work(e.first.size());
      charge(bytes);
      List keys;
      keys.reserve(d.size());
      for (const auto& e : d) keys.push_back(Value::string(e.first));
      return keys;
    }
    case Value::Type::string: {  // a new string per character
      const std::string& s = v.as_string();
      step_over(s.size());
      const std::size_t n = utf8_length(s);
      charge(list_work(n) + saturating_mul(n, string_work(0)));
      List chars;
      chars.reserve(n);
      for (std::size_t at = 0; at < s.size();) {
        const std::size_t len = utf8_char_size(s, at);
        chars.push_back(Value::string(s.substr(at, len)));
        at += len;
      }
      return chars;
    }
    case Value::Type::undefined: return {};
    default: type_error("'" + v.type_name() + "' object is not iterable");
  }
}

Value Evaluator::getattr(const Value& obj, const std::string& name) {
  if (obj.is(Value::Type::ns)) {
    step_over(obj.as_ns()->attrs.size());
    for (const auto& [k, v] : obj.as_ns()->attrs)
      if (k == name) return v;
    return Value();
  }
  // Python finds methods first (d.items is the method even when d has a key "items").
  if (is_method(obj, name))
    return Value::callable(Callable{Callable::Kind::method, name, nullptr, std::make_shared<const Value>(obj)});
  if (obj.is_dict()) {
    step_over(obj.as_dict().size());
    const Value* v = obj.find(name);
    return v ? *v : Value();
  }
  return Value();  // undefined, also for attributes of undefined
}

Value Evaluator::getitem(const Value& obj, const Value& key) {
  if (obj.is_dict() || obj.is(Value::Type::ns)) {
    if (!key.is_string()) return Value();
    if (obj.is_dict()) {
      step_over(obj.as_dict().size());
      const Value* v = obj.find(key.as_string());
      return v ? *v : Value();
    }
    return getattr(obj, key.as_string());
  }
  if ((obj.is_list() || obj.is_string()) && is_int(key)) {
    std::int64_t i = key.as_int();
    if (obj.is_list()) {
      auto n = static_cast<std::int64_t>(obj.as_list().size());
      if (i < 0) i += n;
      return i >= 0 && i < n ? obj.as_list()[static_cast<std::size_t>(i)] : Value();
    }
    const std::string& s = obj.as_string();
    step_over(s.size());
    if (i < 0) i += static_cast<std::int64_t>(utf8_length(s));
    if (i < 0) return Value();
    for (std::size_t at = 0; at < s.size(); --i) {  // the i-th character
      const std::size_t len = utf8_char_size(s, at);
      if (i == 0) return make_string(s.substr(at, len));
      at += len;
    }
    return Value();
  }
  return Value();  // as Jinja2: a failed lookup is undefined
}

Value Evaluator::slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  auto opt = [&](const Value& v, const char* what) -> std::optional<std::int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!is_int(v)) type_error(std::string("slice ") + what + " must be an integer, not " + v.type_name());
    return v.as_int();
  };
  std::int64_t st = opt(step, "step").value_or(1);
  if (st == 0) type_error("slice step cannot be zero");
  std::int64_t n;
  if (obj.is_list()) n = static_cast<std::int64_t>(obj.as_list().size());
  else if (obj.is_string())
    step_over(obj.as_string().size()), n = static_cast<std::int64_t>(utf8_length(obj.as_string()));
  else if (obj.is_undefined()) return Value();
  else type_error("'" + obj.type_name() + "' object is not subscriptable");
  // Python's slice.indices().
  std::int64_t lower = st > 0 ? 0 : -1, upper = st > 0 ? n : n - 1;
  auto clamp = [&](std::optional<std::int64_t> v, std::int64_t dflt) {
    if (!v) return dflt;
    return *v < 0 ? std::max(*v + n, lower) : std::min(*v, upper);
  };
  std::int64_t b = clamp(opt(start, "start"), st > 0 ? lower : upper), e = clamp(opt(stop, "stop"), st > 0 ? upper : lower);
  const std::size_t count = slice_count(b, e, st);  // at most n
  step_over(count);
  if (obj.is_list()) {
    expect_work(list_work(count), "a slice");
    List items;
    items.reserve(count);
    for (std::size_t k = 0; k < count; ++k)  // k * st stays within the list: no overflow
      items.push_back(obj.as_list()[static_cast<std::size_t>(b + static_cast<std::int64_t>(k) * st)]);
    return make_list(std::move(items));
  }
  const std::string& s = obj.as_string();
  if (count == 0) return make_string("");
  expect_work(saturating_mul(count, sizeof(std::pair<std::size_t, std::size_t>)), "a slice");
  const auto picks = picked_chars(s, b, st, count);
  std::size_t bytes = 0;
  for (const auto& [at, len] : picks) bytes += len;
  expect_string(bytes, "a slice");
  std::string out;
  out.reserve(bytes);
  for (const auto& [at, len] : picks) out.append(s, at, len);
  return make_string(std::move(out));
}

bool Evaluator::is_global(const std::string& name) {
  return name == "range" || name == "namespace" || name == "dict" || name == "raise_exception" || name == "strftime_now";
}

Value Evaluator::call_global(const std::string& name, Args args, Kwargs kwargs) {
  if (name == "raise_exception") {
    fail(ErrorKind::invalid_input, args.empty() ? "raise_exception() called" : text(args[0]));
  }
  if (name == "namespace" || name == "dict") {
    Dict attrs;
    const std::size_t given = !args.empty() && args[0].is_dict() ? args[0].as_dict().size() : 0;
    step_over(saturating_mul(given + kwargs.size(), 1 + kwargs.size()));  // each keyword replaces by a scan
    expect_work(kSharedObjectBytes + (given + kwargs.size()) * sizeof(Dict::value_type), name + "()");
    if (given > 0) attrs = args[0].as_dict();
    for (auto& kv : kwargs) {
      auto it = std::find_if(attrs.begin(), attrs.end(), [&](const auto& e) { return e.first == kv.first; });
      if (it != attrs.end()) it->second = std::move(kv.second);
      else attrs.emplace_back(kv.first, std::move(kv.second));
    }
    if (name == "dict") return make_dict(std::move(attrs));
    charge(sizeof(Namespace) + attrs.size() * sizeof(Dict::value_type));
    namespaces_.push_back(std::make_unique<Namespace>(Namespace{std::move(attrs)}));
    return Value::ns(namespaces_.back().get());
  }
  if (name == "range") {
    for (const auto& a : args)
      if (!is_int(a)) type_error("range() takes integers, not " + a.type_name());
    if (args.empty() || args.size() > 3) type_error("range() takes 1 to 3 arguments");
    std::int64_t start = args.size() > 1 ? args[0].as_int() : 0, stop = args.size() > 1 ? args[1].as_int() : args[0].as_int();
    std::int64_t step = args.size() > 2 ? args[2].as_int() : 1;
    if (step == 0) type_error("range() step must not be zero");
    const std::size_t count = slice_count(start, stop, step);
    if (count > limits_.max_loop_iterations)
      fail(ErrorKind::out_of_memory, "range() longer than " + std::to_string(limits_.max_loop_iterations) + " items");
    expect_work(list_work(count), "range()");
    step_over(count);
    List items;
    items.reserve(count);
    for (std::size_t k = 0; k < count; ++k)  // start + k * step lies between start and stop; k * step may not fit
      items.push_back(Value::integer(static_cast<std::int64_t>(
          static_cast<std::uint64_t>(start) + static_cast<std::uint64_t>(k) * static_cast<std::uint64_t>(step))));
    return make_list(std::move(items));
  }
  if (name == "strftime_now") {
    if (args.empty() || !args[0].is_string() || args[0].as_string().size() > 256) type_error("strftime_now() takes a format string (at most 256 bytes)");
    std::time_t t = std::chrono::system_clock::to_time_t(now_);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[1024];
    std::size_t n = std::strftime(buf, sizeof buf, args[0].as_string().c_str(), &tm);
    return make_string(std::string(buf, n));
  }
  fail(ErrorKind::unsupported, "function not supported: " + name);
}

}  // namespace weft::serve::detail
