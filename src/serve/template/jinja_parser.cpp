// Parser: tokens -> statement and expression trees, following Jinja2's
// grammar and operator precedence (low to high: if-else, or, and, not,
// comparisons and in, + -, ~, * / // %, **, unary - +, then primaries with
// attribute, subscript, call, filter and test postfixes).
#include <set>

#include "serve/template/jinja_ast.h"
#include "weft/core/error.h"

namespace weft::serve::detail {
namespace {

using K = Token::Kind;

[[noreturn]] void error_at(ErrorKind kind, int line, const std::string& what) {
  fail(kind, "chat_template", "line " + std::to_string(line) + ": " + what);
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  TemplateBody run() {
    TemplateBody out;
    std::string end = parse_body(out.body, {}, 0);
    (void)end;
    return out;
  }

 private:
  // --- statements -------------------------------------------------------

  // Parses statements until a block tag named in `stops` (consumed up to and
  // including its name, which is returned) or, when stops is empty, eof.
  std::string parse_body(Body& body, const std::set<std::string>& stops, int opened_at) {
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

  std::unique_ptr<Stmt> parse_statement(const Token& name) {
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

  std::unique_ptr<Stmt> parse_if(int line) {
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

  std::unique_ptr<Stmt> parse_for(int line) {
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

  std::unique_ptr<Stmt> parse_set(int line) {
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

  std::unique_ptr<Stmt> parse_macro(int line) {
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

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = accept_op("(");
    do {
      names.push_back(expect(K::name, "a variable name").text);
    } while (accept_op(","));
    if (paren) expect_op(")");
    return names;
  }

  // --- expressions ------------------------------------------------------

  ExprPtr parse_expression(bool with_condexpr) {
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

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (peek_name("or")) {
      int line = next().line;  // consumed before the right operand is parsed
      ExprPtr rhs = parse_and();
      e = make(Expr::Kind::binary, line, "or", std::move(e), std::move(rhs));
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (peek_name("and")) {
      int line = next().line;
      ExprPtr rhs = parse_not();
      e = make(Expr::Kind::binary, line, "and", std::move(e), std::move(rhs));
    }
    return e;
  }

  ExprPtr parse_not() {
    if (!peek_name("not")) return parse_compare();
    Nest guard(this);
    int line = next().line;
    return make(Expr::Kind::unary, line, "not", parse_not());
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (peek_op("+") || peek_op("-")) {
      const Token& op = next();
      e = make(Expr::Kind::binary, op.line, op.text, std::move(e), parse_concat());
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (peek_op("~")) {
      int line = next().line;
      ExprPtr rhs = parse_math2();
      e = make(Expr::Kind::binary, line, "~", std::move(e), std::move(rhs));
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (peek_op("*") || peek_op("/") || peek_op("//") || peek_op("%")) {
      const Token& op = next();
      e = make(Expr::Kind::binary, op.line, op.text, std::move(e), parse_pow());
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (peek_op("**")) {
      int line = next().line;
      ExprPtr rhs = parse_unary(true);
      e = make(Expr::Kind::binary, line, "**", std::move(e), std::move(rhs));
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary() {
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

  ExprPtr parse_postfix(ExprPtr e) {
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

  ExprPtr parse_subscript(ExprPtr e) {
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
  ExprPtr parse_call(ExprPtr call) {
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

  ExprPtr parse_filters(ExprPtr e) {
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

  // --- helpers ----------------------------------------------------------

  struct Nest {  // bounds the parser's recursion
    explicit Nest(Parser* p) : p_(p) {
      if (++p_->nesting_ > kMaxParseDepth)
        error_at(ErrorKind::out_of_memory, p_->peek().line, "expression nests deeper than " + std::to_string(kMaxParseDepth));
    }
    ~Nest() { --p_->nesting_; }
    Parser* p_;
  };

  template <class... Children>
  ExprPtr make(Expr::Kind kind, int line, std::string name, Children&&... children) {
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

  void add_arg(Expr& e, ExprPtr child) {
    e.depth = std::max(e.depth, child->depth + 1);
    e.args.push_back(std::move(child));
    check_depth(e);
  }

  void check_depth(const Expr& e) {
    if (e.depth > kMaxParseDepth)
      error_at(ErrorKind::out_of_memory, e.line, "expression nests deeper than " + std::to_string(kMaxParseDepth));
  }

  ExprPtr literal(int line, Value v) {
    auto e = make(Expr::Kind::literal, line, "");
    e->value = std::move(v);
    return e;
  }

  std::unique_ptr<Stmt> node_stmt(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  static std::string describe(const Token& t) {
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

}  // namespace

TemplateBody parse_template(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace weft::serve::detail
