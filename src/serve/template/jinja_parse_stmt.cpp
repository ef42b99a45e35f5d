// Parser, statements: the template's block structure ({% if %}, {% for %},
// {% set %}, {% macro %}, {% break %}, {% continue %}, {% generation %}),
// text and {{ }} output, and the parse_template() entry point. Expressions
// are parsed in jinja_parse_expr.cpp; the Parser class is in jinja_parser.h.
#include <set>

#include "serve/template/jinja_parser.h"

namespace weft::serve::detail {

TemplateBody Parser::run() {
  TemplateBody out;
  std::string end = parse_body(out.body, {}, 0);
  (void)end;
  return out;
}

// Parses statements until a block tag named in `stops` (consumed up to and
// including its name, which is returned) or, when stops is empty, eof.
std::string Parser::parse_body(Body& body, const std::set<std::string>& stops, int opened_at) {
  if (++statements_ > kMaxParseDepth)
    error_at(ErrorKind::out_of_memory, peek().line, "statements nest deeper than " + std::to_string(kMaxParseDepth));
  while (true) {
    const Token& tok = next();
    if (tok.kind == K::eof) {
      if (!stops.empty()) error_at(ErrorKind::invalid_input, opened_at, "missing {% " + *stops.rbegin() + " %}");
      --statements_;
      return "";
    }
    if (tok.kind == K::text) {
      auto s = node_stmt(Stmt::Kind::text, tok.line);
      s->text = tok.text;
      body.push_back(std::move(s));
    } else if (tok.kind == K::var_begin) {
      auto s = node_stmt(Stmt::Kind::output, tok.line);
      s->expr = parse_expression(true);
      expect(K::var_end, "}}");
      body.push_back(std::move(s));
    } else if (tok.kind == K::block_begin) {
      const Token& name = expect(K::name, "a statement name");
      if (stops.count(name.text)) {
        --statements_;
        return name.text;
      }
      body.push_back(parse_statement(name));
    } else {
      error_at(ErrorKind::invalid_input, tok.line, "unexpected token");
    }
  }
}

std::unique_ptr<Stmt> Parser::parse_statement(const Token& name) {
  const std::string& n = name.text;
  int line = name.line;
  if (n == "if") return parse_if(line);
  if (n == "for") return parse_for(line);
  if (n == "set") return parse_set(line);
  if (n == "macro") return parse_macro(line);
  if (n == "break" || n == "continue" || n == "generation") {
    auto s = node_stmt(n == "break" ? Stmt::Kind::break_ : n == "continue" ? Stmt::Kind::continue_ : Stmt::Kind::block, line);
    expect(K::block_end, "%}");
    if (n == "generation") {  // transformers' assistant-mask marker: renders its body
      parse_body(s->body, {"endgeneration"}, line);
      expect(K::block_end, "%}");
    }
    return s;
  }
  static const std::set<std::string> unsupported = {"include", "extends", "block", "import", "from", "call",
                                                    "filter", "with", "do", "autoescape", "trans", "cycle"};
  if (unsupported.count(n)) error_at(ErrorKind::unsupported, line, "statement not supported: {% " + n + " %}");
  error_at(ErrorKind::invalid_input, line, "unexpected {% " + n + " %}");
}

std::unique_ptr<Stmt> Parser::parse_if(int line) {
  auto s = node_stmt(Stmt::Kind::if_, line);
  ExprPtr cond = parse_expression(true);
  while (true) {
    expect(K::block_end, "%}");
    Body body;
    std::string end = parse_body(body, {"elif", "else", "endif"}, line);
    s->branches.emplace_back(std::move(cond), std::move(body));
    if (end == "elif") {
      cond = parse_expression(true);
      continue;
    }
    expect(K::block_end, "%}");
    if (end == "else") {
      parse_body(s->else_body, {"endif"}, line);
      expect(K::block_end, "%}");
    }
    return s;
  }
}

std::unique_ptr<Stmt> Parser::parse_for(int line) {
  auto s = node_stmt(Stmt::Kind::for_, line);
  s->targets = parse_targets();
  expect_name("in");
  s->expr = parse_expression(false);
  if (accept_name("if")) s->cond = parse_expression(false);
  if (accept_name("recursive")) error_at(ErrorKind::unsupported, line, "not supported: recursive for loops");
  expect(K::block_end, "%}");
  std::string end = parse_body(s->body, {"else", "endfor"}, line);
  expect(K::block_end, "%}");
  if (end == "else") {
    parse_body(s->else_body, {"endfor"}, line);
    expect(K::block_end, "%}");
  }
  return s;
}

std::unique_ptr<Stmt> Parser::parse_set(int line) {
  auto s = node_stmt(Stmt::Kind::set, line);
  s->targets = parse_targets();
  if (s->targets.size() == 1 && accept_op(".")) {
    s->text = s->targets[0];
    s->attr = expect(K::name, "an attribute name").text;
  }
  if (s->targets.size() == 1 && s->attr.empty() && peek().kind == K::block_end) {
    next();
    s->kind = Stmt::Kind::set_block;
    parse_body(s->body, {"endset"}, line);
    expect(K::block_end, "%}");
    return s;
  }
  if (!accept_op("=")) error_at(ErrorKind::invalid_input, peek().line, "expected '=' in {% set %}");
  s->expr = parse_expression(true);
  expect(K::block_end, "%}");
  return s;
}

std::unique_ptr<Stmt> Parser::parse_macro(int line) {
  auto s = node_stmt(Stmt::Kind::macro, line);
  s->text = expect(K::name, "a macro name").text;
  expect_op("(");
  while (!accept_op(")")) {
    if (!s->params.empty()) expect_op(",");
    if (accept_op(")")) break;
    std::string param = expect(K::name, "a parameter name").text;
    ExprPtr def = accept_op("=") ? parse_expression(true) : nullptr;
    s->params.emplace_back(std::move(param), std::move(def));
  }
  expect(K::block_end, "%}");
  parse_body(s->body, {"endmacro"}, line);
  accept_name(s->text);
  expect(K::block_end, "%}");
  return s;
}

std::vector<std::string> Parser::parse_targets() {
  std::vector<std::string> names;
  bool paren = accept_op("(");
  do {
    names.push_back(expect(K::name, "a variable name").text);
  } while (accept_op(","));
  if (paren) expect_op(")");
  return names;
}

std::unique_ptr<Stmt> Parser::node_stmt(Stmt::Kind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

std::string Parser::describe(const Token& t) {
  switch (t.kind) {
    case K::eof: return "end of template";
    case K::var_end: return "'}}'";
    case K::block_end: return "'%}'";
    case K::name: return "'" + t.text + "'";
    case K::op: return "'" + t.text + "'";
    case K::string: return "string";
    default: return "token";
  }
}

TemplateBody parse_template(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace weft::serve::detail
