#include <algorithm>
#include <string>

#include "weft/backend/alloc.h"
#include "weft/core/error.h"

namespace weft {

GraphAllocator::GraphAllocator(std::vector<BufferType*> buffer_types)
    : buffer_types_(std::move(buffer_types)), buffers_(buffer_types_.size()) {
  if (buffer_types_.empty()) fail(ErrorKind::invalid_input, "GraphAllocator", "no buffer types");
}

size_t GraphAllocator::buffer_size(int i) const {
  const auto& b = buffers_.at(static_cast<size_t>(i));
  return b ? b->size() : 0;
}

MemoryPlan GraphAllocator::plan(const Graph& g, const GraphLayout& layout) const {
  std::vector<size_t> alignments;
  for (BufferType* bt : buffer_types_) alignments.push_back(bt->alignment());
  // Tensors bound to our own buffers by an earlier allocate() are planned
  // again: a new plan may move them.
  auto ours = [this](const Buffer* b) {
    return std::any_of(buffers_.begin(), buffers_.end(), [b](const auto& own) { return own.get() == b; });
  };
  return plan_memory(
      g, layout, alignments,
      [this](const Tensor& t, int b) { return buffer_types_[static_cast<size_t>(b)]->alloc_size(t); },
      [&ours](const Tensor& t) { return t.buffer == nullptr || ours(t.buffer); });
}

void GraphAllocator::ensure_sizes(const std::vector<size_t>& sizes) {
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0 || (buffers_[i] && buffers_[i]->size() >= sizes[i])) continue;
    if (sizes[i] > buffer_types_[i]->max_size()) {
      fail(ErrorKind::out_of_memory, "GraphAllocator",
           "graph needs " + std::to_string(sizes[i]) + " bytes in " + buffer_types_[i]->name() + ", more than its max of " +
               std::to_string(buffer_types_[i]->max_size()));
    }
    buffers_[i].reset();  // free first: the old and new buffer need not both fit
    buffers_[i] = buffer_types_[i]->allocate(sizes[i]);
    buffers_[i]->set_usage(BufferUsage::compute);
    ++reallocations_;
  }
}

void GraphAllocator::reserve(const Graph& g, const GraphLayout& layout) { ensure_sizes(plan(g, layout).buffer_sizes); }

const MemoryPlan& GraphAllocator::allocate(Graph& g, const GraphLayout& layout) {
  last_plan_ = plan(g, layout);
  ensure_sizes(last_plan_.buffer_sizes);
  for (const auto& [tensor, slot] : last_plan_.slots) {
    bind_tensor(const_cast<Tensor&>(*tensor), *buffers_[static_cast<size_t>(slot.buffer)], slot.offset);
  }
  auto bind_views = [](std::span<Tensor* const> list) {
    for (Tensor* t : list) {
      if (t->is_view() && t->view_src->buffer != nullptr) bind_view(*t);
    }
  };
  bind_views(g.leafs());
  bind_views(g.nodes());
  return last_plan_;
}

}  // namespace weft
