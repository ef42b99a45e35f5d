// Test helper: places every tensor of a graph that owns memory in one zeroed
// host buffer (zero is a valid value of every dtype, and a valid index), and
// points the views at their sources. Tensors must not be bound yet.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "weft/backend/backend.h"
#include "weft/core/graph.h"

namespace weft::testing {

inline std::unique_ptr<Buffer> bind_graph(Device& cpu, const Graph& g) {
  std::vector<Tensor*> owners;
  size_t total = 0;
  auto visit = [&](Tensor* t) {
    if (t->view_src == nullptr && t->data == nullptr) {
      owners.push_back(t);
      t->data = reinterpret_cast<void*>(1);  // marked; set below
      total += (t->nbytes() + 63) / 64 * 64;
    }
  };
  for (Tensor* t : g.leafs()) visit(t);
  for (Tensor* t : g.nodes()) visit(t);
  std::unique_ptr<Buffer> buffer = cpu.default_buffer_type().allocate(total + 64);
  buffer->clear(0);
  size_t offset = 0;
  for (Tensor* t : owners) {
    t->buffer = buffer.get();
    t->data = static_cast<uint8_t*>(buffer->base()) + offset;
    offset += (t->nbytes() + 63) / 64 * 64;
  }
  for (Tensor* t : g.nodes()) {
    if (t->view_src != nullptr) t->data = static_cast<uint8_t*>(t->view_src->data) + t->view_offs;
  }
  return buffer;
}

}  // namespace weft::testing
