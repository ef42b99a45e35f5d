// Graph: a topologically ordered, non-owning list of tensors. Leafs are
// tensors with no op (inputs, weights); nodes are everything computed,
// views included, in an order where every source precedes its users.
#pragma once

#include <span>
#include <unordered_set>
#include <vector>

#include "weft/core/tensor.h"

namespace weft {

class Graph {
 public:
  // Adds t and, first, everything it depends on (sources and view sources)
  // that is not in the graph yet. Calling it for several outputs builds one
  // graph computing all of them.
  void expand(Tensor* t);

  // Adds t alone (a node if it has an op, else a leaf), not its
  // dependencies: for callers that build an order themselves (the
  // scheduler's per-split graphs). Adding a tensor twice does nothing.
  void append(Tensor* t);

  std::span<Tensor* const> nodes() const { return nodes_; }
  std::span<Tensor* const> leafs() const { return leafs_; }
  bool contains(const Tensor* t) const { return visited_.count(t) != 0; }

 private:
  std::vector<Tensor*> nodes_;
  std::vector<Tensor*> leafs_;
  std::unordered_set<const Tensor*> visited_;
};

}  // namespace weft
