// Internal to the parser: the Parser class shared by jinja_parse_stmt.cpp
// (statements, blocks and parse_template) and jinja_parse_expr.cpp
// (expressions), plus the token-cursor helpers both use. Not for callers:
// they use parse_template() from jinja_ast.h.
//
// A Parser reads one token stream once; it holds a reference to the tokens,
// which must outlive it, and is not thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "serve/template/jinja_ast.h"
#include "weft/core/error.h"

namespace weft::serve::detail {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  TemplateBody run();

 private:
  using K = Token::Kind;

  // --- statements (jinja_parse_stmt.cpp) --------------------------------
  std::string parse_body(Body& body, const std::set<std::string>& stops, int opened_at);
  std::unique_ptr<Stmt> parse_statement(const Token& name);
  std::unique_ptr<Stmt> parse_if(int line);
  std::unique_ptr<Stmt> parse_for(int line);
  std::unique_ptr<Stmt> parse_set(int line);
  std::unique_ptr<Stmt> parse_macro(int line);
  std::vector<std::string> parse_targets();
  std::unique_ptr<Stmt> node_stmt(Stmt::Kind kind, int line);

  // --- expressions (jinja_parse_expr.cpp) -------------------------------
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr e);
  ExprPtr parse_call(ExprPtr call);
  ExprPtr parse_filters(ExprPtr e);

  // Node builders; they enforce kMaxParseDepth on the tree's depth. make() is
  // defined and used only in jinja_parse_expr.cpp.
  template <class... Children>
  ExprPtr make(Expr::Kind kind, int line, std::string name, Children&&... children);
  void add_arg(Expr& e, ExprPtr child);
  void check_depth(const Expr& e);
  ExprPtr literal(int line, Value v);

  // --- shared helpers ---------------------------------------------------

  [[noreturn]] static void error_at(ErrorKind kind, int line, const std::string& what) {
    fail(kind, "chat_template", "line " + std::to_string(line) + ": " + what);
  }

  struct Nest {  // bounds the parser's recursion
    explicit Nest(Parser* p) : p_(p) {
      if (++p_->nesting_ > kMaxParseDepth)
        error_at(ErrorKind::out_of_memory, p_->peek().line, "expression nests deeper than " + std::to_string(kMaxParseDepth));
    }
    ~Nest() { --p_->nesting_; }
    Parser* p_;
  };

  static std::string describe(const Token& t);

  const Token& peek() const { return t_[pos_]; }
  const Token& next() { return pos_ + 1 < t_.size() ? t_[pos_++] : t_[pos_]; }
  bool peek_op(const char* op) const { return peek().kind == K::op && peek().text == op; }
  bool peek_name(const char* n) const { return peek().kind == K::name && peek().text == n; }
  bool accept_op(const char* op) { return peek_op(op) ? (next(), true) : false; }
  bool accept_name(const std::string& n) { return peek().kind == K::name && peek().text == n ? (next(), true) : false; }
  const Token& expect(K kind, const char* what) {
    if (peek().kind != kind) error_at(ErrorKind::invalid_input, peek().line, std::string("expected ") + what + ", got " + describe(peek()));
    return next();
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) error_at(ErrorKind::invalid_input, peek().line, std::string("expected '") + op + "', got " + describe(peek()));
  }
  void expect_name(const char* n) {
    if (!accept_name(n)) error_at(ErrorKind::invalid_input, peek().line, std::string("expected '") + n + "', got " + describe(peek()));
  }

  const std::vector<Token>& t_;
  std::size_t pos_ = 0;
  int nesting_ = 0;     // recursion of the expression parser
  int statements_ = 0;  // open blocks
};

}  // namespace weft::serve::detail
