// The evaluator: runs a parsed template over variables and produces the text.
// One Evaluator serves one render: it owns the render's scopes, namespaces and
// budgets (steps, output bytes, loop iterations, work, depth; the caller's
// deadline and cancel check), and every value it hands out lives no longer
// than it. Filters, tests and methods (jinja_filters.cpp, jinja_methods.cpp)
// and operators (jinja_ops.cpp) are members so that they can charge the
// budgets and report errors with the line being evaluated.
//
// The budgets' contract, which every operation keeps: it charges steps for
// the work it is about to do (step(), or step_over() by the bytes and items
// it will touch) before doing it, and it checks the size of a string or list
// it will build (expect_string(), expect_work()) before allocating it; what
// it builds is then charged to the work budget (make_string(), make_list()).
// So a render's time is bounded by max_steps and its memory by
// max_output_bytes and max_work_bytes, whatever the template.
//
//   Evaluator ev(limits, now, control);
//   std::string text = ev.render(body, Value::from_json(vars, limits.max_depth));
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "serve/template/jinja_ast.h"
#include "weft/core/error.h"
#include "weft/serve/chat_template.h"

namespace weft::serve::detail {

using Args = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;

class Evaluator {
 public:
  Evaluator(const ChatTemplateLimits& limits, std::chrono::system_clock::time_point now, const RenderControl& control)
      : limits_(limits), now_(now), control_(control) {}
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // variables: a dict (the render's top-level names).
  std::string render(const TemplateBody& body, const Value& variables);

  // --- for operators, filters, tests and methods ---------------------------
  // Throws Error(kind, "[chat_template] line N: what") for the line being evaluated.
  [[noreturn]] void fail(ErrorKind kind, const std::string& what) const;
  [[noreturn]] void type_error(const std::string& what) const { fail(ErrorKind::invalid_input, what); }

  // Charges n steps against max_steps; every kPollSteps steps, also looks at
  // the deadline and the cancel check (Error(disconnected) when either says stop).
  void step(std::size_t n = 1);
  // Steps for an operation that touches `units` bytes or items: 1 + units / 64.
  void step_over(std::size_t units);
  // Steps for searching a haystack of n bytes for a needle of m bytes, as
  // std::string::find may compare every position with the whole needle.
  void step_search(std::size_t n, std::size_t m);

  // Charges bytes of work (strings built, list items) against max_work_bytes.
  void charge(std::size_t bytes);
  // Throws Error(out_of_memory) naming `what` unless `bytes` more work fits
  // the budget left; charges nothing (the values built then charge themselves).
  void expect_work(std::size_t bytes, const std::string& what);
  // The same for a string of `bytes`, which must also fit max_output_bytes.
  // Call it before building the string.
  void expect_string(std::size_t bytes, const std::string& what);
  // The longest string a result may still be: max_output_bytes, or the work
  // budget's rest when that is smaller.
  std::size_t output_cap() const {
    return std::min(limits_.max_output_bytes, limits_.max_work_bytes - std::min(work_, limits_.max_work_bytes));
  }
  Value make_string(std::string s);  // charges string_work(s.size()) and caps the size
  Value make_list(List items);       // charges list_work(items.size()) and caps the depth
  Value make_tuple(List items);      // a list that prints as a Python tuple
  Value make_dict(Dict entries);

  // Python's str(v), within the output limit and the work left, its steps
  // charged by its length (the walk itself stops at the cap: jinja_value.h).
  std::string text(const Value& v);
  // Python's ==: 1 == 1.0 == True, deep for containers; a step per element compared.
  bool equal(const Value& a, const Value& b);

  Value binary(const std::string& op, const Value& a, const Value& b);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
  bool contains(const Value& container, const Value& item);
  List iterate(const Value& v);  // the items a for loop or filter sees: list items, dict keys, characters
  bool less(const Value& a, const Value& b);

  Value call(const Value& callee, Args args, Kwargs kwargs);
  Value apply_filter(const std::string& name, const Value& v, Args args, Kwargs kwargs);
  bool apply_test(const std::string& name, const Value& v, const Args& args);
  Value call_method(const Value& self, const std::string& name, Args args, Kwargs kwargs);
  Value strip(const std::string& s, const Value& chars, bool left, bool right);  // py_strip_bounds, charged
  Value call_global(const std::string& name, Args args, Kwargs kwargs);
  static bool is_global(const std::string& name);
  static bool is_method(const Value& self, const std::string& name);

 private:
  enum class Flow { normal, break_, continue_ };
  struct Scope {
    Dict vars;
    bool barrier = false;  // a macro's scope: lookups skip to the root from here
  };
  struct Depth {  // counts nesting of compound statements and macro calls
    explicit Depth(Evaluator& ev);
    ~Depth() { --ev_.depth_; }
    Evaluator& ev_;
  };

  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_set(const Stmt& s, Value v);
  Value eval(const Expr& e);
  Value eval_call(const Expr& e);
  Value call_macro(const Stmt& macro, Args args, Kwargs kwargs);
  std::string capture(const Body& body);

  Value lookup(const std::string& name);
  void assign(const std::string& name, Value v);
  void emit(const std::string& s);

  static constexpr std::size_t kPollSteps = 4096;  // steps between looks at the deadline and the cancel check
  void poll();                                     // those looks

  const ChatTemplateLimits& limits_;
  std::chrono::system_clock::time_point now_;
  const RenderControl& control_;
  std::vector<Scope> scopes_;
  std::vector<std::unique_ptr<Namespace>> namespaces_;  // every namespace() of this render
  std::string* out_ = nullptr;                          // where output goes (the result or a capture)
  std::size_t iterations_ = 0, work_ = 0, steps_ = 0, next_poll_ = 0;
  int depth_ = 0;
  int line_ = 0;

  friend struct Depth;
};

// The work a value is charged: roughly the heap it holds. A string is a
// shared std::string (object, control block, bytes); a list its Value slots.
inline constexpr std::size_t kSharedObjectBytes = 2 * sizeof(void*) + sizeof(std::string);
constexpr std::size_t string_work(std::size_t bytes) {
  return kSharedObjectBytes + bytes;
}
constexpr std::size_t list_work(std::size_t items) {
  return kSharedObjectBytes + items * sizeof(Value);
}

// a * b, or SIZE_MAX when that overflows (sizes compared against a limit).
constexpr std::size_t saturating_mul(std::size_t a, std::size_t b) {
  return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

// Python-style string helpers shared by filters and methods (jinja_methods.cpp).
// None allocates more than its result.
std::size_t utf8_length(std::string_view s);
std::size_t utf8_char_size(std::string_view s, std::size_t at);  // bytes of the character at byte `at`
// Python's strip(chars) (chars not a string: whitespace): the bounds of what stays.
std::pair<std::size_t, std::size_t> py_strip_bounds(const std::string& s, const Value& chars, bool left, bool right);
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);

}  // namespace weft::serve::detail
