// Internals of the scheduler: the placement passes and the split builder.
#pragma once

#include <unordered_map>
#include <vector>

#include "weft/backend/backend.h"
#include "weft/core/context.h"
#include "weft/core/graph.h"

namespace weft::detail {

// The scheduler's backends and their buffer types (deduplicated: backends
// sharing a buffer type share one physical buffer per memory set).
struct BackendSet {
  std::vector<Backend*> backends;       // priority order
  std::vector<BufferType*> buffer_types;
  std::vector<int> buffer_of_backend;   // backend index -> buffer_types index

  int size() const { return static_cast<int>(backends.size()); }
  bool supports(int b, const Tensor& t) const { return backends[static_cast<size_t>(b)]->device().supports_op(t); }
  bool can_read(int b, const BufferType& bt) const {
    return backends[static_cast<size_t>(b)]->device().supports_buffer_type(bt);
  }
  // The backend whose memory bt is (its default buffer type), else the first
  // that can read it; -1 if none can.
  int backend_for_buffer(const BufferType& bt) const;
};

// Tensor (of the caller's graph) -> backend index.
using Assignment = std::unordered_map<const Tensor*, int>;

// Passes 1-4 (assign.cpp). Every node and leaf of g gets a backend; throws
// Error(unsupported) when no backend can run a node or a pin is impossible.
Assignment assign_backends(const Graph& g, const BackendSet& set, const Assignment& pins);

// An input copy: src (memory another backend wrote, or a leaf in memory the
// split's backend cannot read) copied into `copy` at the split's start.
struct InputCopy {
  Tensor* src = nullptr;
  Tensor* copy = nullptr;
  int src_backend = 0;
  int producer = -1;  // split that wrote src, or -1 for data set before compute
};

struct Split {
  int backend = 0;
  std::vector<InputCopy> copies;
  Graph graph;                 // the clones this split's backend computes, in order
  std::vector<int> producers;  // splits on other backends whose results it reads directly
};

// Pass 5 (split.cpp): the graph as the scheduler runs it. Nodes are cloned
// (the caller's graph is never modified) with sources redirected to input
// copies where a backend cannot read another's memory.
struct ExecPlan {
  Context ctx;                    // clones, copies, views of copies
  Graph graph;                    // everything, in execution order: what the planner sees
  std::vector<Split> splits;
  std::unordered_map<const Tensor*, Tensor*> clone_of;  // caller's node -> clone
  std::unordered_map<const Tensor*, int> split_of;      // exec tensor -> split (-1: before compute)
  std::unordered_map<const Tensor*, int> buffer_of;     // exec tensor -> buffer index
};

void build_exec_plan(const Graph& g, const Assignment& a, const BackendSet& set, ExecPlan& plan);

}  // namespace weft::detail
