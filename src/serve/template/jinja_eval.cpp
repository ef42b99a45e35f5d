// Evaluator: statements, expressions, scopes, macro calls and the render's budgets.
#include "serve/template/jinja_eval.h"

#include <algorithm>

namespace weft::serve::detail {

void Evaluator::fail(ErrorKind kind, const std::string& what) const {
  weft::fail(kind, "chat_template", "line " + std::to_string(line_) + ": " + what);
}

void Evaluator::step(std::size_t n) {
  if (n > limits_.max_steps - std::min(steps_, limits_.max_steps))
    fail(ErrorKind::out_of_memory,
         "more than " + std::to_string(limits_.max_steps) + " steps: the template runs too long");
  steps_ += n;
  if (steps_ >= next_poll_) poll();
}

void Evaluator::poll() {
  next_poll_ = steps_ + kPollSteps;
  const bool late = control_.deadline != std::chrono::steady_clock::time_point::max() &&
                    std::chrono::steady_clock::now() >= control_.deadline;
  if (late || (control_.cancelled && control_.cancelled()))
    fail(ErrorKind::disconnected,
         std::string(late ? "rendering passed its deadline" : "rendering cancelled by its caller") + " (after " +
             std::to_string(steps_) + " steps)");
}

void Evaluator::step_over(std::size_t units) {
  step(1 + units / 64);
}

void Evaluator::step_search(std::size_t n, std::size_t m) {
  step(1 + saturating_mul(n / 64, 1 + std::min(m, n) / 64));
}

void Evaluator::charge(std::size_t bytes) {
  if (bytes > limits_.max_work_bytes - std::min(work_, limits_.max_work_bytes))
    fail(ErrorKind::out_of_memory, "work limit exceeded (" + std::to_string(limits_.max_work_bytes) + " bytes)");
  work_ += bytes;
}

void Evaluator::expect_work(std::size_t bytes, const std::string& what) {
  if (bytes > limits_.max_work_bytes - std::min(work_, limits_.max_work_bytes))
    fail(ErrorKind::out_of_memory, what + " would need " + std::to_string(bytes) +
                                       " bytes, more than the work limit leaves (" +
                                       std::to_string(limits_.max_work_bytes) + " bytes per render)");
}

void Evaluator::expect_string(std::size_t bytes, const std::string& what) {
  if (bytes > limits_.max_output_bytes)
    fail(ErrorKind::out_of_memory, what + " would build a string of " + std::to_string(bytes) +
                                       " bytes, longer than the output limit (" +
                                       std::to_string(limits_.max_output_bytes) + " bytes)");
  expect_work(string_work(bytes), what);
}

Value Evaluator::make_string(std::string s) {
  if (s.size() > limits_.max_output_bytes)
    fail(ErrorKind::out_of_memory, "a string longer than the output limit (" + std::to_string(limits_.max_output_bytes) + " bytes)");
  charge(string_work(s.size()));
  return Value::string(std::move(s));
}

Value Evaluator::make_list(List items) {
  charge(list_work(items.size()));
  return Value::list(std::move(items), limits_.max_depth);
}

Value Evaluator::make_tuple(List items) {
  charge(list_work(items.size()));
  return Value::tuple(std::move(items), limits_.max_depth);
}

Value Evaluator::make_dict(Dict entries) {
  charge(kSharedObjectBytes + entries.size() * sizeof(Dict::value_type));
  return Value::dict(std::move(entries), limits_.max_depth);
}

std::string Evaluator::text(const Value& v) {
  if (v.is_string()) {  // a copy of a string that exists: no bigger than what the limits let through
    step_over(v.as_string().size());
    return v.as_string();
  }
  const std::size_t work_left = limits_.max_work_bytes - std::min(work_, limits_.max_work_bytes);
  const std::size_t cap = std::min(limits_.max_output_bytes, work_left);
  std::optional<std::string> s = v.str(cap);
  if (!s)
    fail(ErrorKind::out_of_memory, "the text of a " + v.type_name() + " would be longer than " + std::to_string(cap) +
                                       " bytes (the output limit, or the work limit's rest)");
  step_over(s->size());
  return std::move(*s);
}

Evaluator::Depth::Depth(Evaluator& ev) : ev_(ev) {
  if (++ev_.depth_ > ev_.limits_.max_depth) {
    --ev_.depth_;
    ev_.fail(ErrorKind::out_of_memory, "statements and macro calls nest deeper than " + std::to_string(ev_.limits_.max_depth));
  }
}

std::string Evaluator::render(const TemplateBody& body, const Value& variables) {
  std::string out;
  out_ = &out;
  scopes_.assign(1, Scope{});
  if (variables.is_dict()) scopes_[0].vars = variables.as_dict();
  Flow flow = exec_body(body.body);
  if (flow != Flow::normal) fail(ErrorKind::invalid_input, "break or continue outside a for loop");
  return out;
}

void Evaluator::emit(const std::string& s) {
  step_over(s.size());
  if (s.size() > limits_.max_output_bytes - std::min(out_->size(), limits_.max_output_bytes))
    fail(ErrorKind::out_of_memory, "output longer than " + std::to_string(limits_.max_output_bytes) + " bytes");
  out_->append(s);
}

Value Evaluator::lookup(const std::string& name) {
  std::size_t scanned = 0;  // names compared: the top level holds every variable the caller passed
  for (std::size_t i = scopes_.size(); i-- > 0;) {
    for (const auto& [k, v] : scopes_[i].vars) {
      if (k == name) {
        step_over(scanned);
        return v;
      }
    }
    scanned += scopes_[i].vars.size();
    if (scopes_[i].barrier && i > 0) i = 1;  // a macro sees its own scopes, then the template's top level
  }
  step_over(scanned);
  if (is_global(name)) return Value::callable(Callable{Callable::Kind::global, name, nullptr, nullptr});
  return Value();
}

void Evaluator::assign(const std::string& name, Value v) {
  auto& vars = scopes_.back().vars;
  step_over(vars.size());
  for (auto& [k, old] : vars)
    if (k == name) {
      old = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

std::string Evaluator::capture(const Body& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    Flow flow = exec_body(body);
    out_ = saved;
    if (flow != Flow::normal) fail(ErrorKind::invalid_input, "break or continue outside a for loop");
  } catch (...) {
    out_ = saved;
    throw;
  }
  return buf;
}

Evaluator::Flow Evaluator::exec_body(const Body& body) {
  for (const auto& s : body) {
    Flow f = exec(*s);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

Evaluator::Flow Evaluator::exec(const Stmt& s) {
  line_ = s.line;
  step();
  switch (s.kind) {
    case Stmt::Kind::text: emit(s.text); return Flow::normal;
    case Stmt::Kind::output: {
      Value v = eval(*s.expr);
      emit(v.is_string() ? v.as_string() : text(v));
      return Flow::normal;
    }
    case Stmt::Kind::if_: {
      Depth d(*this);
      for (const auto& [cond, body] : s.branches)
        if (eval(*cond).truthy()) return exec_body(body);
      return exec_body(s.else_body);
    }
    case Stmt::Kind::for_: {
      Depth d(*this);
      return exec_for(s);
    }
    case Stmt::Kind::set: exec_set(s, eval(*s.expr)); return Flow::normal;
    case Stmt::Kind::set_block: {
      Depth d(*this);
      std::string text = capture(s.body);
      exec_set(s, make_string(std::move(text)));
      return Flow::normal;
    }
    case Stmt::Kind::macro:
      assign(s.text, Value::callable(Callable{Callable::Kind::macro, s.text, &s, nullptr}));
      return Flow::normal;
    case Stmt::Kind::break_: return Flow::break_;
    case Stmt::Kind::continue_: return Flow::continue_;
    case Stmt::Kind::block: {
      Depth d(*this);
      return exec_body(s.body);
    }
  }
  return Flow::normal;
}

void Evaluator::exec_set(const Stmt& s, Value v) {
  line_ = s.line;
  if (!s.attr.empty()) {
    Value target = lookup(s.text);
    if (!target.is(Value::Type::ns)) type_error("cannot set attribute '" + s.attr + "' of " + target.type_name() + " '" + s.text + "': only namespace() objects can be assigned to");
    Dict& attrs = target.as_ns()->attrs;
    step_over(attrs.size());
    for (auto& [k, old] : attrs)
      if (k == s.attr) {
        old = std::move(v);
        return;
      }
    charge(sizeof(Dict::value_type));
    attrs.emplace_back(s.attr, std::move(v));
    return;
  }
  if (s.targets.size() == 1) return assign(s.targets[0], std::move(v));
  List items = iterate(v);
  if (items.size() != s.targets.size())
    type_error("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(s.targets.size()) + " names");
  for (std::size_t i = 0; i < items.size(); ++i) assign(s.targets[i], items[i]);
}

Evaluator::Flow Evaluator::exec_for(const Stmt& s) {
  Value iterable = eval(*s.expr);
  line_ = s.line;
  List all = iterate(iterable);
  List items;
  if (!s.cond) {
    items = std::move(all);
  } else {  // the loop filter sees each item bound to the targets, but no loop variable
    for (auto& item : all) {
      scopes_.push_back(Scope{});
      try {
        exec_set(s, item);
        bool keep = eval(*s.cond).truthy();
        scopes_.pop_back();
        if (keep) items.push_back(std::move(item));
      } catch (...) {
        scopes_.pop_back();
        throw;
      }
    }
  }
  if (items.empty()) return exec_body(s.else_body);
  const std::size_t n = items.size();
  for (std::size_t i = 0; i < n; ++i) {
    line_ = s.line;
    if (++iterations_ > limits_.max_loop_iterations)
      fail(ErrorKind::out_of_memory, "more than " + std::to_string(limits_.max_loop_iterations) + " loop iterations");
    step();
    auto idx = static_cast<std::int64_t>(i), len = static_cast<std::int64_t>(n);
    Dict loop = {{"index", Value::integer(idx + 1)},
                 {"index0", Value::integer(idx)},
                 {"revindex", Value::integer(len - idx)},
                 {"revindex0", Value::integer(len - idx - 1)},
                 {"first", Value::boolean(i == 0)},
                 {"last", Value::boolean(i + 1 == n)},
                 {"length", Value::integer(len)},
                 {"previtem", i > 0 ? items[i - 1] : Value()},
                 {"nextitem", i + 1 < n ? items[i + 1] : Value()},
                 {"depth", Value::integer(1)},
                 {"depth0", Value::integer(0)}};
    scopes_.push_back(Scope{});
    Flow flow;
    try {
      assign("loop", Value::dict(std::move(loop), limits_.max_depth));
      exec_set(s, items[i]);
      flow = exec_body(s.body);
      scopes_.pop_back();
    } catch (...) {
      scopes_.pop_back();
      throw;
    }
    if (flow == Flow::break_) break;
  }
  return Flow::normal;
}

Value Evaluator::eval(const Expr& e) {
  line_ = e.line;
  step();
  switch (e.kind) {
    case Expr::Kind::literal: return e.value;
    case Expr::Kind::name: return lookup(e.name);
    case Expr::Kind::list: {
      List items;
      for (const auto& a : e.args) items.push_back(eval(*a));
      return e.name == "tuple" ? make_tuple(std::move(items)) : make_list(std::move(items));
    }
    case Expr::Kind::dict: {
      Dict entries;
      for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = eval(*e.args[i]);
        Value v = eval(*e.args[i + 1]);
        line_ = e.line;
        if (!k.is_string()) fail(ErrorKind::unsupported, "not supported: dict keys that are not strings");
        step_over(entries.size());
        bool replaced = false;
        for (auto& [key, old] : entries)
          if (key == k.as_string()) old = v, replaced = true;
        if (!replaced) entries.emplace_back(k.as_string(), std::move(v));
      }
      return make_dict(std::move(entries));
    }
    case Expr::Kind::attr: {
      Value obj = eval(*e.args[0]);
      line_ = e.line;
      return getattr(obj, e.name);
    }
    case Expr::Kind::item: {
      Value obj = eval(*e.args[0]);
      Value key = eval(*e.args[1]);
      line_ = e.line;
      return getitem(obj, key);
    }
    case Expr::Kind::slice: {
      Value obj = eval(*e.args[0]);
      Value parts[3];
      for (int i = 0; i < 3; ++i)
        if (e.args[static_cast<std::size_t>(i) + 1]) parts[i] = eval(*e.args[static_cast<std::size_t>(i) + 1]);
      line_ = e.line;
      return slice(obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::call:
    case Expr::Kind::filter:
    case Expr::Kind::test: return eval_call(e);
    case Expr::Kind::unary: {
      Value v = eval(*e.args[0]);
      line_ = e.line;
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (v.is(Value::Type::floating)) return Value::floating(e.name == "-" ? -v.as_double() : v.as_double());
      if (!v.is_number()) type_error("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
      if (e.name == "+") return Value::integer(v.as_int());
      if (v.as_int() == INT64_MIN) type_error("integer overflow");
      return Value::integer(-v.as_int());
    }
    case Expr::Kind::binary: {
      Value a = eval(*e.args[0]);
      if (e.name == "and") return a.truthy() ? eval(*e.args[1]) : a;
      if (e.name == "or") return a.truthy() ? a : eval(*e.args[1]);
      Value b = eval(*e.args[1]);
      line_ = e.line;
      return binary(e.name, a, b);
    }
    case Expr::Kind::ternary:
      if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
      return e.args[2] ? eval(*e.args[2]) : Value();
  }
  return Value();
}

Value Evaluator::eval_call(const Expr& e) {
  Value subject = eval(*e.args[0]);
  Args args;
  for (std::size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
  Kwargs kwargs;
  for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v));
  line_ = e.line;
  if (e.kind == Expr::Kind::filter) return apply_filter(e.name, subject, std::move(args), std::move(kwargs));
  if (e.kind == Expr::Kind::test) return Value::boolean(apply_test(e.name, subject, args) != e.negated);
  if (!subject.is(Value::Type::callable)) {
    const Expr& callee = *e.args[0];
    std::string what = callee.kind == Expr::Kind::name ? "'" + callee.name + "'"
                       : callee.kind == Expr::Kind::attr ? "'" + callee.name + "'"
                                                         : "the expression";
    if (subject.is_undefined()) fail(ErrorKind::unsupported, what + " is undefined: not supported or not defined, cannot call it");
    type_error(what + " (" + subject.type_name() + ") is not callable");
  }
  return call(subject, std::move(args), std::move(kwargs));
}

Value Evaluator::call(const Value& callee, Args args, Kwargs kwargs) {
  const Callable& c = callee.as_callable();
  switch (c.kind) {
    case Callable::Kind::global: return call_global(c.name, std::move(args), std::move(kwargs));
    case Callable::Kind::method: return call_method(*c.self, c.name, std::move(args), std::move(kwargs));
    case Callable::Kind::macro: return call_macro(*c.macro, std::move(args), std::move(kwargs));
  }
  return Value();
}

Value Evaluator::call_macro(const Stmt& macro, Args args, Kwargs kwargs) {
  Depth d(*this);
  step(1 + macro.params.size() * (1 + kwargs.size()));
  if (args.size() > macro.params.size())
    type_error("macro '" + macro.text + "' takes " + std::to_string(macro.params.size()) + " arguments, got " + std::to_string(args.size()));
  int call_line = line_;
  scopes_.push_back(Scope{{}, true});
  try {
    for (std::size_t i = 0; i < macro.params.size(); ++i) {
      const auto& [name, def] = macro.params[i];
      Value v;
      if (i < args.size()) {
        v = std::move(args[i]);
      } else {
        bool found = false;
        for (auto& [k, kv] : kwargs)
          if (k == name) v = kv, found = true;
        if (!found && def) v = eval(*def);
      }
      assign(name, std::move(v));
    }
    for (const auto& [k, kv] : kwargs) {
      bool known = false;
      for (const auto& p : macro.params) known |= p.first == k;
      if (!known) line_ = call_line, type_error("macro '" + macro.text + "' has no parameter '" + k + "'");
    }
    std::string text = capture(macro.body);
    scopes_.pop_back();
    line_ = call_line;
    return make_string(std::move(text));
  } catch (...) {
    scopes_.pop_back();
    throw;
  }
}

}  // namespace weft::serve::detail
