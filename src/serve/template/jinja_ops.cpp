// Operators and access: arithmetic, comparison, membership, attribute and
// item lookup, slicing, iteration, and the global functions (range,
// namespace, dict, raise_exception, strftime_now).
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

}  // namespace

Value Evaluator::binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return make_string(a.str() + b.str());
  if (op == "==") return Value::boolean(a == b);
  if (op == "!=") return Value::boolean(!(a == b));
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
    if (a.is_string() && b.is_string()) return make_string(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      List items = a.as_list();
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      return make_list(std::move(items));
    }
  }
  if (op == "*" && ((a.is_string() && is_int(b)) || (is_int(a) && b.is_string()))) {
    const std::string& s = a.is_string() ? a.as_string() : b.as_string();
    std::int64_t n = a.is_string() ? b.as_int() : a.as_int();
    if (n <= 0 || s.empty()) return Value::string("");
    if (static_cast<std::uint64_t>(n) > limits_.max_output_bytes / s.size())
      fail(ErrorKind::out_of_memory, "a string longer than the output limit (" + std::to_string(limits_.max_output_bytes) + " bytes)");
    std::string out;
    for (std::int64_t i = 0; i < n; ++i) out += s;
    return make_string(std::move(out));
  }
  if (!a.is_number() || !b.is_number()) return bad();
  if (is_int(a) && is_int(b) && op != "/") {
    std::int64_t x = a.as_int(), y = b.as_int();
    auto add = [](std::int64_t p, std::int64_t q, std::int64_t* r) { return __builtin_add_overflow(p, q, r); };
    auto sub = [](std::int64_t p, std::int64_t q, std::int64_t* r) { return __builtin_sub_overflow(p, q, r); };
    auto mul = [](std::int64_t p, std::int64_t q, std::int64_t* r) { return __builtin_mul_overflow(p, q, r); };
    if (op == "+") return checked(add, x, y, *this);
    if (op == "-") return checked(sub, x, y, *this);
    if (op == "*") return checked(mul, x, y, *this);
    if (op == "//" || op == "%") {
      if (y == 0) type_error("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) type_error("integer overflow");
      std::int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
      return Value::integer(op == "//" ? q : m);
    }
    if (op == "**") {
      if (y < 0) return Value::floating(std::pow(static_cast<double>(x), static_cast<double>(y)));
      Value result = Value::integer(1);
      for (std::int64_t i = 0; i < y && result.as_int() != 0 && !(result.as_int() == 1 && x == 1); ++i)
        result = checked(mul, result.as_int(), x, *this);
      return result;
    }
    return bad();
  }
  double x = a.as_double(), y = b.as_double();
  if (op == "+") return Value::floating(x + y);
  if (op == "-") return Value::floating(x - y);
  if (op == "*") return Value::floating(x * y);
  if (op == "**") return Value::floating(std::pow(x, y));
  if (y == 0) type_error("float division by zero");
  if (op == "/") return Value::floating(x / y);
  if (op == "//") return Value::floating(std::floor(x / y));
  if (op == "%") {
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::floating(m);
  }
  return bad();
}

bool Evaluator::less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_int(a) && is_int(b)) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 bytes order as code points
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!(x[i] == y[i])) return less(x[i], y[i]);
    return x.size() < y.size();
  }
  type_error("'<' not supported between '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool Evaluator::contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::string:
      if (!item.is_string()) type_error("'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::list:
      return std::find(container.as_list().begin(), container.as_list().end(), item) != container.as_list().end();
    case Value::Type::dict: return item.is_string() && container.find(item.as_string()) != nullptr;
    case Value::Type::undefined: return false;
    default: type_error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

List Evaluator::iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::list: return v.as_list();
    case Value::Type::dict: {
      List keys;
      for (const auto& e : v.as_dict()) keys.push_back(Value::string(e.first));
      return keys;
    }
    case Value::Type::string: {
      List chars;
      for (auto& c : utf8_chars(v.as_string())) chars.push_back(Value::string(std::move(c)));
      charge(chars.size() * sizeof(Value));
      return chars;
    }
    case Value::Type::undefined: return {};
    default: type_error("'" + v.type_name() + "' object is not iterable");
  }
}

Value Evaluator::getattr(const Value& obj, const std::string& name) {
  if (obj.is(Value::Type::ns)) {
    for (const auto& [k, v] : obj.as_ns()->attrs)
      if (k == name) return v;
    return Value();
  }
  // Python finds methods first (d.items is the method even when d has a key "items").
  if (is_method(obj, name))
    return Value::callable(Callable{Callable::Kind::method, name, nullptr, std::make_shared<const Value>(obj)});
  if (obj.is_dict()) {
    const Value* v = obj.find(name);
    return v ? *v : Value();
  }
  return Value();  // undefined, also for attributes of undefined
}

Value Evaluator::getitem(const Value& obj, const Value& key) {
  if (obj.is_dict() || obj.is(Value::Type::ns)) {
    if (!key.is_string()) return Value();
    if (obj.is_dict()) {
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
    std::vector<std::string> chars = utf8_chars(obj.as_string());
    auto n = static_cast<std::int64_t>(chars.size());
    if (i < 0) i += n;
    return i >= 0 && i < n ? Value::string(chars[static_cast<std::size_t>(i)]) : Value();
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
  std::vector<std::string> chars;
  std::int64_t n;
  if (obj.is_list()) n = static_cast<std::int64_t>(obj.as_list().size());
  else if (obj.is_string()) chars = utf8_chars(obj.as_string()), n = static_cast<std::int64_t>(chars.size());
  else if (obj.is_undefined()) return Value();
  else type_error("'" + obj.type_name() + "' object is not subscriptable");
  // Python's slice.indices().
  std::int64_t lower = st > 0 ? 0 : -1, upper = st > 0 ? n : n - 1;
  auto clamp = [&](std::optional<std::int64_t> v, std::int64_t dflt) {
    if (!v) return dflt;
    return *v < 0 ? std::max(*v + n, lower) : std::min(*v, upper);
  };
  std::int64_t b = clamp(opt(start, "start"), st > 0 ? lower : upper), e = clamp(opt(stop, "stop"), st > 0 ? upper : lower);
  List items;
  std::string text;
  for (std::int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (obj.is_list()) items.push_back(obj.as_list()[static_cast<std::size_t>(i)]);
    else text += chars[static_cast<std::size_t>(i)];
  }
  return obj.is_list() ? make_list(std::move(items)) : make_string(std::move(text));
}

bool Evaluator::is_global(const std::string& name) {
  return name == "range" || name == "namespace" || name == "dict" || name == "raise_exception" || name == "strftime_now";
}

Value Evaluator::call_global(const std::string& name, Args args, Kwargs kwargs) {
  if (name == "raise_exception") {
    fail(ErrorKind::invalid_input, args.empty() ? "raise_exception() called" : args[0].str());
  }
  if (name == "namespace" || name == "dict") {
    Dict attrs;
    if (!args.empty() && args[0].is_dict()) attrs = args[0].as_dict();
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
    List items;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (items.size() >= limits_.max_loop_iterations)
        fail(ErrorKind::out_of_memory, "range() longer than " + std::to_string(limits_.max_loop_iterations) + " items");
      items.push_back(Value::integer(i));
      if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
    }
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
