// What computing a graph costs, from shapes alone (nothing is read): the
// multiply-adds of its products and the bytes its nodes read and write,
// counted as the elements they address (a zero-stride view of one row read
// 2^20 times counts 2^20 rows). A worker checks a received graph's cost
// against its limit before running it (docs/security.md).
//
//   const weft::GraphCost c = weft::graph_cost(g);
//   if (c.total() > limit) refuse(...);
//
// Sums saturate at UINT64_MAX instead of wrapping.
#pragma once

#include <cstdint>

#include "weft/core/graph.h"

namespace weft {

struct GraphCost {
  uint64_t multiply_adds = 0;  // products; other arithmetic counts one per element written
  uint64_t bytes = 0;          // read and written, as addressed
  uint64_t total() const;      // multiply_adds + bytes, saturating
};

GraphCost node_cost(const Tensor& node);  // zero for leafs and views
GraphCost graph_cost(const Graph& g);

}  // namespace weft
