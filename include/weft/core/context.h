// Context: the arena that owns tensor metadata. It allocates no tensor data;
// data lives in backend buffers. Tensors stay at stable addresses until the
// Context is destroyed.
//
//   weft::Context ctx;
//   Tensor* w = ctx.new_tensor(DType::q8_0, {4096, 4096});
//   Tensor* x = ctx.new_tensor(DType::f32, {4096, 8});
//   Tensor* y = ops::mul_mat(ctx, w, x);   // shape checked here
//   Graph g; g.expand(y);
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <span>

#include "weft/core/tensor.h"

namespace weft {

class Context {
 public:
  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // A packed tensor of the given shape (1 to 4 dims; missing dims are 1).
  // Throws invalid_input for a negative size, more than 4 dims, or a row that
  // is not a whole number of blocks.
  Tensor* new_tensor(DType type, std::span<const int64_t> ne);
  Tensor* new_tensor(DType type, std::initializer_list<int64_t> ne) {
    return new_tensor(type, std::span<const int64_t>(ne.begin(), ne.size()));
  }
  // A blank tensor for op constructors to fill in.
  Tensor* new_node();

  size_t size() const { return tensors_.size(); }
  std::deque<Tensor>& tensors() { return tensors_; }

 private:
  std::deque<Tensor> tensors_;  // deque: stable addresses on growth
};

}  // namespace weft
