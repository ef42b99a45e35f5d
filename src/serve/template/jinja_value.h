// The values a chat template computes with: Python's types as Jinja2 sees
// them (undefined, None, bool, int, float, str, list, dict), plus namespaces
// and callables. Strings, lists and dicts are immutable and shared (copying a
// Value is O(1)); a namespace is the one mutable object, owned by the render
// that created it. Lists and dicts record their nesting depth so that no
// value can grow deeper than the render's cap (printing and tojson recurse).
//
//   Value v = Value::from_json(json["messages"], /*max_depth=*/64);
//   if (v.truthy()) out += v.str(/*max_bytes=*/1 << 20).value_or("(too long)");
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace weft::serve::detail {

class Value;
struct Expr;
struct Stmt;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, unique keys

// A mutable attribute bag made by namespace(...); lives as long as the render.
struct Namespace {
  Dict attrs;
};

// Something callable: a global function, a macro, or a method bound to a value.
struct Callable {
  enum class Kind { global, macro, method };
  Kind kind;
  std::string name;             // the function or method name
  const Stmt* macro = nullptr;  // for macros: the definition, owned by the template
  std::shared_ptr<const Value> self;  // for methods: the receiver
};

struct Undefined {};
struct None {};

class Value {
 public:
  enum class Type { undefined, none, boolean, integer, floating, string, list, dict, ns, callable };

  Value() = default;  // undefined
  static Value none() { return Value(None{}); }
  static Value boolean(bool b) { return Value(b); }
  static Value integer(std::int64_t i) { return Value(i); }
  static Value floating(double d) { return Value(d); }
  static Value string(std::string s) { return Value(std::make_shared<const std::string>(std::move(s))); }
  // Throws Error(out_of_memory) when the result would nest deeper than max_depth.
  static Value list(List items, int max_depth);
  static Value tuple(List items, int max_depth);  // a list that prints as (a, b): items(), (a, b) literals
  static Value dict(Dict entries, int max_depth);
  static Value ns(Namespace* ns) { return Value(ns); }
  static Value callable(Callable c) { return Value(std::make_shared<const Callable>(std::move(c))); }
  // JSON -> Value; objects keep the json's iteration order.
  template <class Json>
  static Value from_json(const Json& j, int max_depth);

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is(Type t) const { return type() == t; }
  bool is_undefined() const { return is(Type::undefined); }
  bool is_none() const { return is(Type::none); }
  bool is_string() const { return is(Type::string); }
  bool is_number() const { return is(Type::integer) || is(Type::floating) || is(Type::boolean); }
  bool is_list() const { return is(Type::list); }
  bool is_dict() const { return is(Type::dict); }
  bool is_tuple() const { return is_list() && std::get<ListPtr>(v_).tuple; }  // a list that prints as (a, b)

  bool as_bool() const { return std::get<bool>(v_); }
  std::int64_t as_int() const;  // bool or integer
  double as_double() const;     // bool, integer or float
  const std::string& as_string() const { return *std::get<StrPtr>(v_); }
  const List& as_list() const { return *std::get<ListPtr>(v_).items; }
  const Dict& as_dict() const { return *std::get<DictPtr>(v_).entries; }
  Namespace* as_ns() const { return std::get<Namespace*>(v_); }
  const Callable& as_callable() const { return *std::get<CallPtr>(v_); }
  int depth() const;  // 0 for scalars; 1 + the deepest element for lists and dicts

  bool truthy() const;  // Python's bool(): empty, zero, None and undefined are false
  // Python's str() (list and dict elements as repr() shows them); undefined
  // renders as "". nullopt when the text would be longer than max_bytes: the
  // walk stops there, and as every element prints at least one byte, its time
  // and memory stay within the cap however many times a list shares an element.
  std::optional<std::string> str(std::size_t max_bytes) const;
  // json.dumps(v, ensure_ascii, indent, separators, sort_keys), within max_bytes
  // as str(); throws Error(invalid_input) for values JSON cannot hold. indent < 0 means none.
  std::optional<std::string> to_json(int indent, bool ensure_ascii, bool sort_keys, const std::string& item_sep,
                                     const std::string& key_sep, std::size_t max_bytes) const;
  const Value* find(std::string_view key) const;  // a dict's entry or nullptr
  std::string type_name() const;                 // Python's name for the type: "str", "dict", ...

 private:
  using StrPtr = std::shared_ptr<const std::string>;
  struct ListPtr {
    std::shared_ptr<const List> items;
    int depth;
    bool tuple;
  };
  struct DictPtr {
    std::shared_ptr<const Dict> entries;
    int depth;
  };
  using CallPtr = std::shared_ptr<const Callable>;
  template <class T>
  explicit Value(T v) : v_(std::move(v)) {}

  std::variant<Undefined, None, bool, std::int64_t, double, StrPtr, ListPtr, DictPtr, Namespace*, CallPtr> v_;
};

[[noreturn]] void fail_too_deep();  // Error(out_of_memory): a value nests deeper than the cap

// Python float repr: 0.1 -> "0.1", 1.0 -> "1.0", 1e16 -> "1e+16".
std::string format_double(double d);

// Converts nlohmann json (either flavour) recursively; depth capped.
template <class Json>
Value Value::from_json(const Json& j, int max_depth) {
  if (max_depth < 0) fail_too_deep();
  switch (j.type()) {
    case Json::value_t::null: return none();
    case Json::value_t::boolean: return boolean(j.template get<bool>());
    case Json::value_t::number_integer: return integer(j.template get<std::int64_t>());
    case Json::value_t::number_unsigned: {
      auto u = j.template get<std::uint64_t>();
      return u > static_cast<std::uint64_t>(INT64_MAX) ? floating(static_cast<double>(u))
                                                       : integer(static_cast<std::int64_t>(u));
    }
    case Json::value_t::number_float: return floating(j.template get<double>());
    case Json::value_t::string: return string(j.template get<std::string>());
    case Json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, max_depth - 1));
      return list(std::move(items), max_depth);
    }
    case Json::value_t::object: {
      Dict entries;
      entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) entries.emplace_back(it.key(), from_json(it.value(), max_depth - 1));
      return dict(std::move(entries), max_depth);
    }
    default: return none();  // binary and discarded values have no template meaning
  }
}

}  // namespace weft::serve::detail
