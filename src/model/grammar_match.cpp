// GrammarMatcher (grammar.h): the parse stacks of one sequence, advanced a
// code point at a time, and the allowed-token mask found by walking the
// vocabulary's trie once with the stacks of each prefix.
//
// A stack is a persistent list in arena_: node (pos, parent) says "match
// the character class at elements[pos], then return to parent" for a stack
// top, and "continue at elements[pos]" for a node below it. Stacks share
// their tails, so advancing one copies nothing but its new top. A rule
// reference last in its alternative returns straight to the caller's
// parent (a tail call), so x* over a long text keeps its stacks shallow.
#include <algorithm>
#include <string>

#include "weft/core/error.h"
#include "weft/model/grammar.h"

namespace weft::model {

namespace {
constexpr int32_t kAccept = -2;  // the empty stack: the root rule is complete
constexpr size_t kCachedMasks = 8;  // per matcher: 8 x vocabulary bytes at most
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie)
    : g_(std::move(grammar)), trie_(std::move(trie)) {
  if (!g_) fail(ErrorKind::invalid_input, "grammar", "a matcher without a grammar");
  for (int32_t alt : g_->alternatives(g_->root())) expand(alt, -1, stacks_, 0);
}

int32_t GrammarMatcher::node(int32_t pos, int32_t parent) {
  arena_.emplace_back(pos, parent);
  return static_cast<int32_t>(arena_.size() - 1);
}

void GrammarMatcher::add_stack(int32_t id, std::vector<int32_t>& out) {
  // Equal stacks (the same top over the same tail) are kept once; past 64
  // the scan would cost more than the copies it saves (max_stacks bounds them).
  if (out.size() <= 64)
  for (int32_t other : out) {
    if (other == id) return;
    if (id >= 0 && other >= 0 && arena_[static_cast<size_t>(other)] == arena_[static_cast<size_t>(id)]) {
      arena_.pop_back();  // id was the newest node (created for this call)
      return;
    }
  }
  if (out.size() >= g_->limits().max_stacks)
    fail(ErrorKind::invalid_input, "grammar",
         "the grammar is ambiguous beyond " + std::to_string(g_->limits().max_stacks) + " parse states at once");
  out.push_back(id);
}

// Pushes onto out every stack whose top is a character class reachable
// from "continue at pos, then return to parent" without reading anything.
void GrammarMatcher::expand(int32_t pos, int32_t parent, std::vector<int32_t>& out, int depth) {
  // Left recursion is refused by the parser, so this ends; the bound keeps
  // a long chain of rules completing at once off the end of the stack.
  if (depth > 20000)
    fail(ErrorKind::invalid_input, "grammar", "more than 20000 rules begin or end at one character");
  const auto& els = g_->elements();
  const Grammar::Element& e = els[static_cast<size_t>(pos)];
  switch (e.kind) {
    case Grammar::Element::chars:
      add_stack(node(pos, parent), out);
      return;
    case Grammar::Element::end:
      if (parent < 0) {
        add_stack(kAccept, out);
      } else {
        const auto [ppos, pparent] = arena_[static_cast<size_t>(parent)];
        expand(ppos, pparent, out, depth + 1);
      }
      return;
    case Grammar::Element::rule: {
      // The caller resumes after the reference; at an alternative's end it
      // would only return further: a tail call.
      const bool tail = els[static_cast<size_t>(pos) + 1].kind == Grammar::Element::end;
      const int32_t ret = tail ? parent : node(pos + 1, parent);
      for (int32_t alt : g_->alternatives(e.index)) expand(alt, ret, out, depth + 1);
      return;
    }
  }
}

void GrammarMatcher::advance(const std::vector<int32_t>& from, uint32_t cp, std::vector<int32_t>& to) {
  const auto& els = g_->elements();
  const auto& classes = g_->classes();
  for (int32_t id : from) {
    if (id == kAccept) continue;
    const auto [pos, parent] = arena_[static_cast<size_t>(id)];
    if (classes[static_cast<size_t>(els[static_cast<size_t>(pos)].index)].contains(cp))
      expand(pos + 1, parent, to, 0);
  }
}

bool GrammarMatcher::step(const std::vector<int32_t>& from, const Utf8& u, uint8_t b, std::vector<int32_t>& to,
                          Utf8& out) {
  to.clear();
  out = u;
  if (out.need == 0) {
    if (b < 0x80) {
      advance(from, b, to);
      return !to.empty();
    }
    if (b >= 0xC2 && b <= 0xDF) out = {static_cast<uint32_t>(b & 0x1F), 1, 2};
    else if (b >= 0xE0 && b <= 0xEF) out = {static_cast<uint32_t>(b & 0x0F), 2, 3};
    else if (b >= 0xF0 && b <= 0xF4) out = {static_cast<uint32_t>(b & 0x07), 3, 4};
    else return false;  // a continuation byte without a lead, or never valid
  } else {
    if ((b & 0xC0) != 0x80) return false;
    out.cp = (out.cp << 6) | (b & 0x3Fu);
    --out.need;
  }
  if (out.need == 0) {
    constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (out.cp < kMin[out.len] || out.cp > 0x10FFFF || (out.cp >= 0xD800 && out.cp <= 0xDFFF)) return false;
    advance(from, out.cp, to);
    return !to.empty();
  }
  // Inside a character: go on while some stack accepts a character that
  // starts with these bytes (they form the range [lo, hi]) and is a code
  // point at all: ED A0..BF can only end in a surrogate (U+D800..DFFF),
  // which no completion makes valid, so it must stop here.
  const int shift = 6 * out.need;
  constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  const uint32_t lo = std::max(out.cp << shift, kMin[out.len]);
  const uint32_t hi = std::min((out.cp << shift) | ((1u << shift) - 1), 0x10FFFFu);
  if (lo > hi) return false;
  const auto& els = g_->elements();
  const auto& classes = g_->classes();
  auto valid_in = [&](const Grammar::CharClass& c) {
    return (lo <= 0xD7FF && c.intersects(lo, std::min(hi, 0xD7FFu))) ||
           (hi >= 0xE000 && c.intersects(std::max(lo, 0xE000u), hi));
  };
  for (int32_t id : from) {
    if (id == kAccept) continue;
    const int32_t pos = arena_[static_cast<size_t>(id)].first;
    if (valid_in(classes[static_cast<size_t>(els[static_cast<size_t>(pos)].index)])) {
      to = from;
      return true;
    }
  }
  return false;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  const size_t mark = arena_.size();
  std::vector<int32_t> cur = stacks_, next;
  Utf8 u = utf8_, v;
  for (char c : bytes) {
    if (!step(cur, u, static_cast<uint8_t>(c), next, v)) {
      arena_.resize(mark);
      return false;
    }
    cur.swap(next);
    u = v;
  }
  stacks_ = std::move(cur);
  utf8_ = u;
  return true;
}

bool GrammarMatcher::allows(int32_t id) {
  if (!trie_) fail(ErrorKind::invalid_input, "grammar", "allows on a matcher without a vocabulary");
  const auto& ends = trie_->end_tokens();
  if (std::find(ends.begin(), ends.end(), id) != ends.end()) return can_end();
  const std::string& b = trie_->bytes(id);
  if (b.empty()) return false;
  const size_t mark = arena_.size();
  if (level_stacks_.size() < 2) level_stacks_.resize(2);
  std::vector<int32_t>& cur = level_stacks_[0];
  std::vector<int32_t>& next = level_stacks_[1];
  cur = stacks_;
  Utf8 u = utf8_, v;
  bool ok = true;
  for (char c : b) {
    if (!step(cur, u, static_cast<uint8_t>(c), next, v)) {
      ok = false;
      break;
    }
    cur.swap(next);
    u = v;
  }
  arena_.resize(mark);
  return ok;
}

void GrammarMatcher::accept_token(int32_t id) {
  if (!trie_) fail(ErrorKind::invalid_input, "grammar", "accept_token on a matcher without a vocabulary");
  const auto& ends = trie_->end_tokens();
  if (std::find(ends.begin(), ends.end(), id) != ends.end()) {
    if (!can_end())
      fail(ErrorKind::invalid_input, "grammar", "end token " + std::to_string(id) + " before the grammar is complete");
    return;
  }
  const std::string& b = trie_->bytes(id);
  if (b.empty() || !accept_bytes(b))
    fail(ErrorKind::invalid_input, "grammar", "token " + std::to_string(id) + " is not allowed by the grammar here");
}

bool GrammarMatcher::can_end() const {
  return utf8_.need == 0 && std::find(stacks_.begin(), stacks_.end(), kAccept) != stacks_.end();
}

bool GrammarMatcher::finished() const { return can_end() && stacks_.size() == 1; }

// The state's contents: the unfinished character, then each stack's
// positions from its top down, -1 after each (node ids differ between
// equal stacks; their contents do not).
std::vector<int32_t> GrammarMatcher::state_key() const {
  std::vector<int32_t> key{static_cast<int32_t>(utf8_.cp), utf8_.need, utf8_.len};
  for (int32_t id : stacks_) {
    for (int32_t n = id; n >= 0; n = arena_[static_cast<size_t>(n)].second) key.push_back(arena_[static_cast<size_t>(n)].first);
    key.push_back(id == kAccept ? kAccept : -1);
  }
  return key;
}

size_t GrammarMatcher::allowed_tokens(std::vector<uint8_t>& allowed) {
  if (!trie_) fail(ErrorKind::invalid_input, "grammar", "allowed_tokens on a matcher without a vocabulary");
  std::vector<int32_t> key = state_key();
  for (const CachedMask& c : cache_)
    if (c.key == key) {
      allowed = c.allowed;
      return c.count;
    }
  const size_t n = walk(allowed);
  if (cache_.size() < kCachedMasks) cache_.emplace_back();
  CachedMask& slot = cache_[cache_next_];
  cache_next_ = (cache_next_ + 1) % kCachedMasks;
  slot.key = std::move(key);
  slot.allowed = allowed;
  slot.count = n;
  return n;
}

size_t GrammarMatcher::walk(std::vector<uint8_t>& allowed) {
  const TokenTrie& t = *trie_;
  allowed.assign(t.vocab_size(), 0);
  size_t n = 0;
  if (can_end())
    for (int32_t e : t.end_tokens()) n += allowed[static_cast<size_t>(e)] == 0 ? (allowed[static_cast<size_t>(e)] = 1) : 0;

  // Depth-first over the trie; level d holds the stacks after the d bytes
  // of the current path, and the arena size when they were made (what the
  // next sibling at d + 1 truncates back to).
  const size_t mark0 = arena_.size();
  if (level_stacks_.empty()) level_stacks_.resize(1);
  level_stacks_[0] = stacks_;
  level_utf8_.assign(1, utf8_);
  std::vector<size_t> level_mark{arena_.size()};
  struct Frame {
    uint32_t node, edge;
  };
  std::vector<Frame> frames{{0, 0}};
  const auto& nodes = t.nodes();
  const auto& edges = t.edges();
  const auto& tokens = t.tokens();
  while (!frames.empty()) {
    Frame& f = frames.back();
    const TokenTrie::Node& nd = nodes[f.node];
    if (f.edge == nd.n_edges) {
      frames.pop_back();
      continue;
    }
    const TokenTrie::Edge& e = edges[nd.first_edge + f.edge++];
    const size_t d = frames.size();  // the child's level
    if (level_stacks_.size() <= d) level_stacks_.resize(d + 1);
    if (level_utf8_.size() <= d) level_utf8_.resize(d + 1);
    if (level_mark.size() <= d) level_mark.resize(d + 1);
    arena_.resize(level_mark[d - 1]);
    if (!step(level_stacks_[d - 1], level_utf8_[d - 1], e.byte, level_stacks_[d], level_utf8_[d])) continue;
    level_mark[d] = arena_.size();
    const TokenTrie::Node& child = nodes[e.child];
    for (uint32_t i = 0; i < child.n_tokens; ++i) {
      uint8_t& a = allowed[static_cast<size_t>(tokens[child.first_token + i])];
      if (!a) a = 1, ++n;
    }
    if (child.n_edges) frames.push_back({e.child, 0});
  }
  arena_.resize(mark0);
  return n;
}

}  // namespace weft::model
