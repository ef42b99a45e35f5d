// Parser, expressions: tokens -> expression trees, following Jinja2's
// grammar and operator precedence (low to high: if-else, or, and, not,
// comparisons and in, + -, ~, * / // %, **, unary - +, then primaries with
// attribute, subscript, call, filter and test postfixes). Statements are
// parsed in jinja_parse_stmt.cpp; the Parser class is in jinja_parser.h.
#include <algorithm>

#include "serve/template/jinja_parser.h"

namespace weft::serve::detail {

// --- node builders --------------------------------------------------

template <class... Children>
ExprPtr Parser::make(Expr::Kind kind, int line, std::string name, Children&&... children) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  e->name = std::move(name);
  (e->args.push_back(std::forward<Children>(children)), ...);
  for (const auto& c : e->args)
    if (c) e->depth = std::max(e->depth, c->depth + 1);
  check_depth(*e);
  return e;
}

void Parser::add_arg(Expr& e, ExprPtr child) {
  e.depth = std::max(e.depth, child->depth + 1);
  e.args.push_back(std::move(child));
  check_depth(e);
}

void Parser::check_depth(const Expr& e) {
  if (e.depth > kMaxParseDepth)
    error_at(ErrorKind::out_of_memory, e.line, "expression nests deeper than " + std::to_string(kMaxParseDepth));
}

ExprPtr Parser::literal(int line, Value v) {
  auto e = make(Expr::Kind::literal, line, "");
  e->value = std::move(v);
  return e;
}

// --- grammar, lowest precedence first -------------------------------

ExprPtr Parser::parse_expression(bool with_condexpr) {
  Nest guard(this);
  ExprPtr e = parse_or();
  while (with_condexpr && peek_name("if")) {
    int line = next().line;
    ExprPtr cond = parse_or();
    ExprPtr other = accept_name("else") ? parse_expression(true) : nullptr;
    e = make(Expr::Kind::ternary, line, "", std::move(e), std::move(cond), std::move(other));
  }
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr e = parse_and();
  while (peek_name("or")) {
    int line = next().line;  // consumed before the right operand is parsed
    ExprPtr rhs = parse_and();
    e = make(Expr::Kind::binary, line, "or", std::move(e), std::move(rhs));
  }
  return e;
}

ExprPtr Parser::parse_and() {
  ExprPtr e = parse_not();
  while (peek_name("and")) {
    int line = next().line;
    ExprPtr rhs = parse_not();
    e = make(Expr::Kind::binary, line, "and", std::move(e), std::move(rhs));
  }
  return e;
}

ExprPtr Parser::parse_not() {
  if (!peek_name("not")) return parse_compare();
  Nest guard(this);
  int line = next().line;
  return make(Expr::Kind::unary, line, "not", parse_not());
}

ExprPtr Parser::parse_compare() {
  ExprPtr e = parse_math1();
  bool compared = false;
  while (true) {
    int line = peek().line;
    std::string op;
    if (peek().kind == K::op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                 peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
      op = next().text;
    } else if (accept_name("in")) {
      op = "in";
    } else if (peek_name("not") && pos_ + 1 < t_.size() && t_[pos_ + 1].kind == K::name && t_[pos_ + 1].text == "in") {
      pos_ += 2;
      op = "not in";
    } else {
      return e;
    }
    // Python chains a < b < c as (a < b) and (b < c); templates do not use it.
    if (compared) error_at(ErrorKind::unsupported, line, "not supported: chained comparisons");
    compared = true;
    e = make(Expr::Kind::binary, line, op, std::move(e), parse_math1());
  }
}

ExprPtr Parser::parse_math1() {
  ExprPtr e = parse_concat();
  while (peek_op("+") || peek_op("-")) {
    const Token& op = next();
    e = make(Expr::Kind::binary, op.line, op.text, std::move(e), parse_concat());
  }
  return e;
}

ExprPtr Parser::parse_concat() {
  ExprPtr e = parse_math2();
  while (peek_op("~")) {
    int line = next().line;
    ExprPtr rhs = parse_math2();
    e = make(Expr::Kind::binary, line, "~", std::move(e), std::move(rhs));
  }
  return e;
}

ExprPtr Parser::parse_math2() {
  ExprPtr e = parse_pow();
  while (peek_op("*") || peek_op("/") || peek_op("//") || peek_op("%")) {
    const Token& op = next();
    e = make(Expr::Kind::binary, op.line, op.text, std::move(e), parse_pow());
  }
  return e;
}

ExprPtr Parser::parse_pow() {
  ExprPtr e = parse_unary(true);
  while (peek_op("**")) {
    int line = next().line;
    ExprPtr rhs = parse_unary(true);
    e = make(Expr::Kind::binary, line, "**", std::move(e), std::move(rhs));
  }
  return e;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  Nest guard(this);
  ExprPtr e;
  if (peek_op("-") || peek_op("+")) {
    const Token& op = next();
    e = make(Expr::Kind::unary, op.line, op.text, parse_unary(false));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  return with_filter ? parse_filters(std::move(e)) : std::move(e);
}

ExprPtr Parser::parse_primary() {
  const Token& tok = next();
  switch (tok.kind) {
    case K::name: {
      const std::string& n = tok.text;
      if (n == "true" || n == "True") return literal(tok.line, Value::boolean(true));
      if (n == "false" || n == "False") return literal(tok.line, Value::boolean(false));
      if (n == "none" || n == "None") return literal(tok.line, Value::none());
      auto e = make(Expr::Kind::name, tok.line, n);
      return e;
    }
    case K::string: {
      std::string s = tok.text;
      while (peek().kind == K::string) s += next().text;  // adjacent literals concatenate
      return literal(tok.line, Value::string(std::move(s)));
    }
    case K::integer: return literal(tok.line, Value::integer(tok.integer));
    case K::floating: return literal(tok.line, Value::floating(tok.floating));
    case K::op:
      if (tok.text == "(") {
        if (accept_op(")")) return make(Expr::Kind::list, tok.line, "tuple");
        ExprPtr first = parse_expression(true);
        if (!peek_op(",")) {
          expect_op(")");
          return first;
        }
        auto tuple = make(Expr::Kind::list, tok.line, "tuple", std::move(first));
        while (accept_op(",") && !peek_op(")")) add_arg(*tuple, parse_expression(true));
        expect_op(")");
        return tuple;
      }
      if (tok.text == "[") {
        auto list = make(Expr::Kind::list, tok.line, "");
        while (!accept_op("]")) {
          if (!list->args.empty()) expect_op(",");
          if (accept_op("]")) break;
          add_arg(*list, parse_expression(true));
        }
        return list;
      }
      if (tok.text == "{") {
        auto dict = make(Expr::Kind::dict, tok.line, "");
        while (!accept_op("}")) {
          if (!dict->args.empty()) expect_op(",");
          if (accept_op("}")) break;
          add_arg(*dict, parse_expression(true));
          expect_op(":");
          add_arg(*dict, parse_expression(true));
        }
        return dict;
      }
      break;
    default: break;
  }
  error_at(ErrorKind::invalid_input, tok.line, "unexpected " + describe(tok));
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    if (peek_op(".")) {
      int line = next().line;
      const Token& attr = next();
      if (attr.kind == K::name) {
        e = make(Expr::Kind::attr, line, attr.text, std::move(e));
      } else if (attr.kind == K::integer) {
        e = make(Expr::Kind::item, line, "", std::move(e), literal(line, Value::integer(attr.integer)));
      } else {
        error_at(ErrorKind::invalid_input, line, "expected an attribute name after '.'");
      }
    } else if (peek_op("[")) {
      e = parse_subscript(std::move(e));
    } else if (peek_op("(")) {
      e = parse_call(make(Expr::Kind::call, peek().line, "", std::move(e)));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr e) {
  int line = next().line;
  ExprPtr parts[3];
  int colons = 0;
  while (!accept_op("]")) {
    if (accept_op(":")) {
      if (++colons > 2) error_at(ErrorKind::invalid_input, line, "too many ':' in a slice");
      continue;
    }
    if (parts[colons]) error_at(ErrorKind::invalid_input, line, "expected ']'");
    parts[colons] = parse_expression(true);
  }
  if (colons == 0) {
    if (!parts[0]) error_at(ErrorKind::invalid_input, line, "empty subscript");
    return make(Expr::Kind::item, line, "", std::move(e), std::move(parts[0]));
  }
  return make(Expr::Kind::slice, line, "", std::move(e), std::move(parts[0]), std::move(parts[1]), std::move(parts[2]));
}

// Reads "(args, name=value)" into call (whose args already hold the callee or subject).
ExprPtr Parser::parse_call(ExprPtr call) {
  expect_op("(");
  bool first = true;
  while (!accept_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (accept_op(")")) break;
    if (peek_op("*") || peek_op("**")) error_at(ErrorKind::unsupported, peek().line, "not supported: *args in calls");
    if (peek().kind == K::name && pos_ + 1 < t_.size() && t_[pos_ + 1].kind == K::op && t_[pos_ + 1].text == "=") {
      std::string key = next().text;
      next();
      ExprPtr v = parse_expression(true);
      call->depth = std::max(call->depth, v->depth + 1);
      call->kwargs.emplace_back(std::move(key), std::move(v));
    } else {
      add_arg(*call, parse_expression(true));
    }
  }
  check_depth(*call);
  return call;
}

ExprPtr Parser::parse_filters(ExprPtr e) {
  while (true) {
    if (accept_op("|")) {
      const Token& name = expect(K::name, "a filter name");
      if (!is_known_filter(name.text)) error_at(ErrorKind::unsupported, name.line, "filter not supported: " + name.text);
      e = make(Expr::Kind::filter, name.line, name.text, std::move(e));
      if (peek_op("(")) e = parse_call(std::move(e));
    } else if (peek_name("is")) {
      int line = next().line;
      bool negated = accept_name("not");
      const Token& name = expect(K::name, "a test name");
      if (!is_known_test(name.text)) error_at(ErrorKind::unsupported, name.line, "test not supported: " + name.text);
      e = make(Expr::Kind::test, line, name.text, std::move(e));
      e->negated = negated;
      if (peek_op("(")) {
        e = parse_call(std::move(e));
      } else if ((peek().kind == K::string || peek().kind == K::integer || peek().kind == K::floating ||
                  peek_op("[") || peek_op("{") ||
                  (peek().kind == K::name && !peek_name("else") && !peek_name("or") && !peek_name("and") &&
                   !peek_name("if") && !peek_name("is") && !peek_name("in") && !peek_name("not")))) {
        add_arg(*e, parse_postfix(parse_primary()));
      }
    } else if (peek_op("(")) {
      e = parse_call(make(Expr::Kind::call, peek().line, "", std::move(e)));
    } else {
      return e;
    }
  }
}

}  // namespace weft::serve::detail
