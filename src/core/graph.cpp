#include "weft/core/graph.h"

#include <utility>

namespace weft {

// Iterative post-order DFS: a hostile or very deep graph cannot overflow the
// stack. Sources are visited in index order, then the view source.
void Graph::expand(Tensor* root) {
  if (root == nullptr || visited_.count(root)) return;
  std::vector<std::pair<Tensor*, int>> stack;  // tensor, next dependency to visit
  stack.emplace_back(root, 0);
  visited_.insert(root);
  while (!stack.empty()) {
    auto& [t, next] = stack.back();
    Tensor* dep = nullptr;
    while (next <= kMaxSrc && dep == nullptr) {
      Tensor* candidate = next < kMaxSrc ? t->src[next] : t->view_src;
      ++next;
      if (candidate != nullptr && !visited_.count(candidate)) dep = candidate;
    }
    if (dep != nullptr) {
      visited_.insert(dep);
      stack.emplace_back(dep, 0);
      continue;
    }
    (t->op == Op::none ? leafs_ : nodes_).push_back(t);
    stack.pop_back();
  }
}

void Graph::append(Tensor* t) {
  if (t == nullptr || !visited_.insert(t).second) return;
  (t->op == Op::none ? leafs_ : nodes_).push_back(t);
}

}  // namespace weft
