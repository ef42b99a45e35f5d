// Graph memory: a planner that gives tensors offsets without touching memory,
// and an allocator that backs a plan with real buffers.
//
//   GraphAllocator galloc({&cpu_buffer_type});
//   galloc.reserve(worst_case_graph, layout);   // size buffers once, for the largest graph
//   galloc.allocate(graph, layout);             // bind tensors; reallocates nothing if it fits
//   ... compute, read outputs ...
//   galloc.allocate(next_graph_of_same_shape, layout);   // reuses the same buffers
//
// What is planned: every tensor of the graph that has no buffer yet and is
// not a view (views are bound to their source afterwards). Leafs flagged
// kFlagInput (and leafs without a split) are placed before any node runs and
// live until their last reader, so that data set before compute is never
// overwritten. Tensors flagged kFlagOutput are never freed. Other tensors are
// freed after their last reader and their memory reused; a few elementwise
// and row-wise ops compute in place over a source that has no other reader.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "weft/backend/backend.h"
#include "weft/core/graph.h"

namespace weft {

// Where and when each tensor lives, supplied by the caller (the scheduler).
struct GraphLayout {
  // Buffer index (into the buffer types) for a non-view tensor.
  std::function<int(const Tensor&)> buffer_of = [](const Tensor&) { return 0; };
  // The split (a unit of execution, numbered in execution order) that
  // computes a node, or for a leaf, the split that first writes it (-1: the
  // leaf is written before compute starts).
  std::function<int(const Tensor&)> split_of = [](const Tensor&) { return 0; };
};

struct Slot {
  int buffer = -1;
  size_t offset = 0;
  size_t size = 0;
};

struct MemoryPlan {
  std::vector<size_t> buffer_sizes;             // high-water mark per buffer
  std::unordered_map<const Tensor*, Slot> slots;  // every planned tensor
  // hazards[s]: earlier splits that read or wrote memory that split s writes
  // (same buffer, overlapping bytes). Sorted, without s itself.
  std::vector<std::vector<int>> hazards;
  int reused = 0;    // tensors placed in memory freed by an earlier tensor
  int in_place = 0;  // tensors computed over one of their sources
};

// alignments[i] and alloc_size describe buffer i; needs_memory says which
// non-view tensors to plan (by default those without a buffer). Pure:
// touches no memory.
MemoryPlan plan_memory(const Graph& g, const GraphLayout& layout, std::span<const size_t> alignments,
                       const std::function<size_t(const Tensor&, int buffer)>& alloc_size,
                       const std::function<bool(const Tensor&)>& needs_memory =
                           [](const Tensor& t) { return t.buffer == nullptr; });

class GraphAllocator {
 public:
  explicit GraphAllocator(std::vector<BufferType*> buffer_types);
  GraphAllocator(const GraphAllocator&) = delete;
  GraphAllocator& operator=(const GraphAllocator&) = delete;

  // Sizes the buffers for g (grows them; never shrinks).
  void reserve(const Graph& g, const GraphLayout& layout);
  // Plans g, grows a buffer only if the plan needs more, and binds every
  // planned tensor and every view. Returns the plan (hazards included).
  const MemoryPlan& allocate(Graph& g, const GraphLayout& layout);

  size_t buffer_size(int i) const;
  Buffer* buffer(int i) const { return buffers_[static_cast<size_t>(i)].get(); }
  int n_buffers() const { return static_cast<int>(buffer_types_.size()); }
  int reallocations() const { return reallocations_; }  // buffer (re)allocations so far

 private:
  MemoryPlan plan(const Graph& g, const GraphLayout& layout) const;
  void ensure_sizes(const std::vector<size_t>& sizes);

  std::vector<BufferType*> buffer_types_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  MemoryPlan last_plan_;
  int reallocations_ = 0;
};

// The ops the planner may compute in place over their first source.
bool op_can_run_in_place(Op op);

}  // namespace weft
