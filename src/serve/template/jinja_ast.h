// The parsed template: expression and statement trees, built by parse_template()
// and read by the evaluator. Nodes are immutable after parsing and owned by
// their parent; the whole tree by TemplateBody, which ChatTemplate owns.
//
//   TemplateBody body = parse_template(lex(source));
//   Evaluator(limits, clock).render(body, variables);
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "serve/template/jinja_lexer.h"
#include "serve/template/jinja_value.h"

namespace weft::serve::detail {

// Parse-time caps: the nesting of expressions and of statements.
inline constexpr int kMaxParseDepth = 64;

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    literal,  // value
    name,     // name
    list,     // args: items
    dict,     // args: key, value, key, value, ...
    attr,     // args[0].name
    item,     // args[0][args[1]]
    slice,    // args[0][args[1]:args[2]:args[3]], absent parts null
    call,     // args[0](args[1..], kwargs)
    filter,   // args[0] | name(args[1..], kwargs)
    test,     // args[0] is [not] name(args[1..]); negated for "is not"
    unary,    // name ("-", "+", "not") args[0]
    binary,   // args[0] name args[1]: arithmetic, comparison, "in", "not in", "and", "or", "~"
    ternary,  // args[0] if args[1] else args[2] (args[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  int depth = 1;  // 1 + the deepest child; capped by kMaxParseDepth
  std::string name;
  Value value;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    text,        // text
    output,      // {{ expr }}
    if_,         // branches (cond, body); else_body
    for_,        // for targets in expr [if cond]: body [else else_body]
    set,         // set targets = expr, or set ns_name.attr = expr
    set_block,   // set targets[0] %} body {% endset
    macro,       // macro name(params) body
    break_,      // {% break %}
    continue_,   // {% continue %}
    block,       // a body run in place ({% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;                  // text; macro name; ns name for "set ns.attr"
  std::string attr;                  // "set ns.attr": the attribute
  std::vector<std::string> targets;  // loop or set targets (several: tuple unpacking)
  ExprPtr expr;                      // output, set value, for iterable
  ExprPtr cond;                      // for-loop filter
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters, default or null
};

struct TemplateBody {
  Body body;
};

// Throws Error(invalid_input) for a syntax error, Error(unsupported) for a
// construct outside the subset, Error(out_of_memory) past kMaxParseDepth.
TemplateBody parse_template(const std::vector<Token>& tokens);

// The filters and tests the evaluator knows (the parser checks names against them).
bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

}  // namespace weft::serve::detail
