// Constrained sampling: a GBNF grammar (the notation of llama.cpp's
// grammars/README.md) compiled into rules over Unicode code points, a
// matcher that follows one sequence through it, and the vocabulary's
// token -> bytes trie that the matcher walks to find, in one pass, every
// token the grammar allows next (docs/serve.md, "Constrained output").
//
//   auto g = weft::model::Grammar::parse(R"(root ::= "yes" | "no")");   // throws Error(invalid_input)
//   auto trie = weft::model::TokenTrie::from_tokenizer(*tokenizer);     // once per model
//   weft::model::GrammarMatcher m(g, trie);                             // once per sequence
//   std::vector<uint8_t> allowed;
//   m.allowed_tokens(allowed);            // allowed[id] != 0: id may come next
//   ... sample among them ...
//   m.accept_token(id);                   // throws when id was not allowed
//   if (m.finished()) ...                 // nothing but the end may follow
//
// Grammar and TokenTrie are immutable once built and may be shared by
// threads (std::shared_ptr<const ...>); a GrammarMatcher belongs to one
// sequence and is not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft::model {

class Tokenizer;

// Bounds on what a grammar may cost; a text beyond them is refused with an
// error naming the bound (a stranger's grammar must not exhaust the server).
struct GrammarLimits {
  size_t max_text_bytes = 1 << 20;   // the GBNF text
  size_t max_elements = 1 << 20;     // compiled elements over all rules (after repetitions are expanded)
  int max_repeat = 10000;            // n in x{m,n}
  int max_nesting = 64;              // parentheses inside one another
  size_t max_stacks = 4096;          // parse states followed at once (an ambiguous grammar's cost)
};

// A compiled grammar: rules of alternatives, each a sequence of code point
// classes and rule references (repetitions become helper rules). Immutable.
class Grammar {
 public:
  // One element of a rule's alternative.
  struct Element {
    enum Kind : uint8_t { end, chars, rule } kind = end;
    int32_t index = 0;  // chars: a class in classes_; rule: a rule id; end: the alternative's rule
  };
  // A set of code points: sorted, disjoint, non-adjacent [lo, hi] ranges,
  // negated when `negated` (then it holds every code point outside them).
  struct CharClass {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    bool negated = false;
    uint64_t ascii[2] = {0, 0};  // membership of code points < 128, for speed
    bool contains(uint32_t cp) const;
    bool intersects(uint32_t lo, uint32_t hi) const;  // some code point of [lo, hi] is in the set
  };

  // Parses GBNF text (the root rule is `root`). Throws Error(invalid_input)
  // naming the fault and where it is ("line 3, column 7: ..."): a syntax
  // error, an undefined or doubly defined rule, no root, left recursion (a
  // rule that can reach itself before reading a character), a bound of
  // `limits` passed.
  static std::shared_ptr<const Grammar> parse(std::string_view gbnf, const GrammarLimits& limits = {});

  size_t rule_count() const { return rule_alts_.size(); }
  size_t element_count() const { return elements_.size(); }
  const GrammarLimits& limits() const { return limits_; }

  // For the matcher (grammar_match.cpp).
  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<CharClass>& classes() const { return classes_; }
  // Positions in elements() where each alternative of rule r starts.
  const std::vector<int32_t>& alternatives(int32_t r) const { return rule_alts_[static_cast<size_t>(r)]; }
  int32_t root() const { return root_; }

 private:
  friend class GrammarBuilder;
  Grammar() = default;
  std::vector<Element> elements_;
  std::vector<CharClass> classes_;
  std::vector<std::vector<int32_t>> rule_alts_;
  int32_t root_ = 0;
  GrammarLimits limits_;
};

// Every token's bytes arranged as a trie (one node per distinct prefix),
// built once per vocabulary. Tokens whose bytes are empty (control tokens)
// are not in it: they are the end tokens or never allowed.
class TokenTrie {
 public:
  // token_bytes[id] is token id's text; end_tokens are the ids that end a
  // generation (allowed only where the grammar may end).
  TokenTrie(std::span<const std::string> token_bytes, std::vector<int32_t> end_tokens);
  // The tokenizer's decode_token bytes, its end-of-generation tokens.
  static std::shared_ptr<const TokenTrie> from_tokenizer(const Tokenizer& tok);

  struct Node {
    uint32_t first_edge = 0, n_edges = 0;    // into edges()
    uint32_t first_token = 0, n_tokens = 0;  // into tokens(): the ids whose bytes end here
  };
  struct Edge {
    uint8_t byte;
    uint32_t child;
  };
  const std::vector<Node>& nodes() const { return nodes_; }  // nodes()[0] is the root (the empty prefix)
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  size_t vocab_size() const { return vocab_size_; }
  const std::string& bytes(int32_t id) const;  // throws Error(invalid_input) for an id outside the vocabulary

 private:
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> end_tokens_;
  std::vector<std::string> bytes_;
  size_t vocab_size_ = 0;
};

// One sequence's place in a grammar: the set of parse stacks that the text
// accepted so far leaves (each a persistent list of return positions in
// an arena), plus an unfinished UTF-8 character when a token ended inside
// one.
class GrammarMatcher {
 public:
  // trie may be null for a matcher fed bytes alone (accept_bytes).
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie);

  // allowed resized to the vocabulary: 1 for every token whose bytes the
  // grammar accepts from here (a partial UTF-8 character is accepted when
  // some character it may begin is), and for the end tokens when
  // can_end(); 0 elsewhere. Walks the trie once, sharing each prefix's
  // work among the tokens below it; a state met in the last few calls
  // reuses its mask. Returns how many are allowed. Throws
  // Error(invalid_input) when the grammar is ambiguous beyond
  // GrammarLimits::max_stacks here.
  size_t allowed_tokens(std::vector<uint8_t>& allowed);
  // Whether token id may come next (one entry of allowed_tokens, without
  // walking the trie); the state is unchanged.
  bool allows(int32_t id);
  // Advances over token id's bytes (an end token: nothing to advance).
  // Throws Error(invalid_input) naming the token when the grammar rejects it.
  void accept_token(int32_t id);
  // Advances over bytes; false (the state unchanged) when rejected.
  bool accept_bytes(std::string_view bytes);
  // The text so far is a whole sentence of the grammar.
  bool can_end() const;
  // can_end() and nothing else may follow.
  bool finished() const;

 private:
  struct Utf8 {  // a character being decoded: its bits so far, the bytes it still needs
    uint32_t cp = 0;
    int need = 0;
    int len = 0;  // its total length in bytes
  };
  // Steps `from` (stacks) over byte b into `to`; false when nothing survives.
  bool step(const std::vector<int32_t>& from, const Utf8& u, uint8_t b, std::vector<int32_t>& to, Utf8& out);
  void advance(const std::vector<int32_t>& from, uint32_t cp, std::vector<int32_t>& to);
  void expand(int32_t pos, int32_t parent, std::vector<int32_t>& out, int depth);
  int32_t node(int32_t pos, int32_t parent);
  void add_stack(int32_t id, std::vector<int32_t>& out);

  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const TokenTrie> trie_;
  // Arena of stack nodes: (position of the element to match or to return
  // to, parent node or -1). A stack is a node id; kAccept is the empty
  // stack (the root rule is complete).
  std::vector<std::pair<int32_t, int32_t>> arena_;
  std::vector<int32_t> stacks_;  // the current set
  Utf8 utf8_;
  // Masks of recent states (the stacks' contents and the unfinished
  // character): inside a JSON string or a repetition the same state comes
  // back at every step, and its mask is then a copy, not a walk.
  struct CachedMask {
    std::vector<int32_t> key;
    std::vector<uint8_t> allowed;
    size_t count = 0;
  };
  std::vector<int32_t> state_key() const;
  size_t walk(std::vector<uint8_t>& allowed);  // allowed_tokens without the cache
  std::vector<CachedMask> cache_;
  size_t cache_next_ = 0;  // the entry to replace next
  // Scratch of allowed_tokens, kept between calls.
  std::vector<std::vector<int32_t>> level_stacks_;
  std::vector<Utf8> level_utf8_;
};

}  // namespace weft::model
