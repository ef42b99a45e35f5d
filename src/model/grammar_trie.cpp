// TokenTrie (grammar.h): the vocabulary's token bytes as a trie with each
// node's edges contiguous and sorted, built once per model.
#include <algorithm>
#include <numeric>

#include "weft/core/error.h"
#include "weft/model/grammar.h"
#include "weft/model/tokenizer.h"

namespace weft::model {

TokenTrie::TokenTrie(std::span<const std::string> token_bytes, std::vector<int32_t> end_tokens)
    : end_tokens_(std::move(end_tokens)), bytes_(token_bytes.begin(), token_bytes.end()),
      vocab_size_(token_bytes.size()) {
  for (int32_t e : end_tokens_)
    if (e < 0 || static_cast<size_t>(e) >= vocab_size_)
      fail(ErrorKind::invalid_input, "token trie", "end token " + std::to_string(e) + " is outside the vocabulary");
  // Insert in byte order: each token shares the path of its longest common
  // prefix with the one before, so the current path is all that is needed.
  std::vector<int32_t> order(vocab_size_);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)] || (bytes_[static_cast<size_t>(a)] == bytes_[static_cast<size_t>(b)] && a < b);
  });
  struct Building {
    std::vector<Edge> kids;  // in byte order (insertion is sorted)
    std::vector<int32_t> ids;
  };
  std::vector<Building> b(1);
  std::vector<uint32_t> path{0};  // path[i]: the node after i bytes of prev
  std::string prev;
  for (int32_t id : order) {
    const std::string& s = bytes_[static_cast<size_t>(id)];
    if (s.empty()) continue;  // control tokens: the end tokens, or never allowed
    size_t common = 0;
    while (common < s.size() && common < prev.size() && s[common] == prev[common]) ++common;
    path.resize(common + 1);
    for (size_t i = common; i < s.size(); ++i) {
      const auto child = static_cast<uint32_t>(b.size());
      b.push_back({});
      b[path.back()].kids.push_back({static_cast<uint8_t>(s[i]), child});
      path.push_back(child);
    }
    b[path.back()].ids.push_back(id);
    prev = s;
  }
  nodes_.resize(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    nodes_[i].first_edge = static_cast<uint32_t>(edges_.size());
    nodes_[i].n_edges = static_cast<uint32_t>(b[i].kids.size());
    edges_.insert(edges_.end(), b[i].kids.begin(), b[i].kids.end());
    nodes_[i].first_token = static_cast<uint32_t>(tokens_.size());
    nodes_[i].n_tokens = static_cast<uint32_t>(b[i].ids.size());
    tokens_.insert(tokens_.end(), b[i].ids.begin(), b[i].ids.end());
  }
}

const std::string& TokenTrie::bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_size_)
    fail(ErrorKind::invalid_input, "token trie", "token " + std::to_string(id) + " is outside the vocabulary");
  return bytes_[static_cast<size_t>(id)];
}

std::shared_ptr<const TokenTrie> TokenTrie::from_tokenizer(const Tokenizer& tok) {
  const auto n = static_cast<int32_t>(tok.vocab_size());
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<int32_t> ends;
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_end_of_generation(id)) {
      ends.push_back(id);  // never text: only where the grammar may end
      continue;
    }
    bytes[static_cast<size_t>(id)] = tok.decode_token(id);
  }
  return std::make_shared<const TokenTrie>(bytes, std::move(ends));
}

}  // namespace weft::model
