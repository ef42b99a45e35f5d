// The evaluator: runs a parsed template over variables and produces the text.
// One Evaluator serves one render: it owns the render's scopes, namespaces and
// counters (output bytes, loop iterations, work, depth), and every value it
// hands out lives no longer than it. Filters, tests and methods
// (jinja_filters.cpp, jinja_methods.cpp) and operators (jinja_ops.cpp) are
// members so that they can charge the counters and report errors with the
// line being evaluated.
//
//   Evaluator ev(limits, now);
//   std::string text = ev.render(body, Value::from_json(vars, limits.max_depth));
#pragma once

#include <chrono>
#include <memory>
#include <string>
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
  Evaluator(const ChatTemplateLimits& limits, std::chrono::system_clock::time_point now)
      : limits_(limits), now_(now) {}
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // variables: a dict (the render's top-level names).
  std::string render(const TemplateBody& body, const Value& variables);

  // --- for operators, filters, tests and methods ---------------------------
  // Throws Error(kind, "[chat_template] line N: what") for the line being evaluated.
  [[noreturn]] void fail(ErrorKind kind, const std::string& what) const;
  [[noreturn]] void type_error(const std::string& what) const { fail(ErrorKind::invalid_input, what); }
  // Charges bytes of work (strings built, list items) against max_work_bytes.
  void charge(std::size_t bytes);
  Value make_string(std::string s);  // charges and caps the size
  Value make_list(List items);       // charges and caps the depth
  Value make_tuple(List items);      // a list that prints as a Python tuple
  Value make_dict(Dict entries);

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

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
  void emit(const std::string& s);

  const ChatTemplateLimits& limits_;
  std::chrono::system_clock::time_point now_;
  std::vector<Scope> scopes_;
  std::vector<std::unique_ptr<Namespace>> namespaces_;  // every namespace() of this render
  std::string* out_ = nullptr;                          // where output goes (the result or a capture)
  std::size_t iterations_ = 0, work_ = 0;
  int depth_ = 0;
  int line_ = 0;

  friend struct Depth;
};

// Python-style string helpers shared by filters and methods (jinja_methods.cpp).
std::size_t utf8_length(const std::string& s);
std::vector<std::string> utf8_chars(const std::string& s);
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);

}  // namespace weft::serve::detail
