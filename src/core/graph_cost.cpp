#include "weft/core/graph_cost.h"

#include <algorithm>
#include <bit>

namespace weft {
namespace {

uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

uint64_t count(int64_t n) { return n > 0 ? static_cast<uint64_t>(n) : 0; }

uint64_t elements(const Tensor& t) {
  uint64_t n = 1;
  for (int64_t d : t.ne) n = sat_mul(n, count(d));
  return n;
}

// Bytes a kernel addresses in t: whole rows, whatever the strides.
uint64_t addressed_bytes(const Tensor& t) {
  const DTypeTraits& tr = traits(t.type);
  const uint64_t row = sat_mul(count(t.ne[0]) / tr.block_size, tr.unit_bytes);
  return sat_mul(row, sat_mul(count(t.ne[1]), sat_mul(count(t.ne[2]), count(t.ne[3]))));
}

uint64_t log2_ceil(uint64_t n) { return n <= 1 ? 1 : static_cast<uint64_t>(std::bit_width(n - 1)); }

}  // namespace

uint64_t GraphCost::total() const { return sat_add(multiply_adds, bytes); }

namespace detail {

void cost_per_element(const Tensor& n, GraphCost& c) {
  c.multiply_adds = std::max(elements(n), elements(*n.src[0]));
}

void cost_product(const Tensor& n, GraphCost& c) {
  // mul_mat: K * M per output column; mul_mat_id: K per output element
  // (M * n_used * n_tokens of them). Both are K per element written.
  c.multiply_adds = sat_mul(count(n.src[0]->ne[0]), elements(n));
}

void cost_sort(const Tensor& n, GraphCost& c) {
  const Tensor& a = *n.src[0];
  c.multiply_adds = sat_mul(elements(a), log2_ceil(count(a.ne[0])));
}

void cost_set_rows(const Tensor& n, GraphCost& c) { c.multiply_adds = elements(*n.src[1]); }

void cost_attention(const Tensor& n, GraphCost& c) {
  const Tensor& q = *n.src[0];
  const Tensor& k = *n.src[1];
  const Tensor& v = *n.src[2];
  const uint64_t rows = sat_mul(count(q.ne[1]), count(q.ne[2]));  // n_q * H
  const uint64_t per_pair = count(k.ne[0]) + count(v.ne[0]) + 1;  // q.k, p*v, an exp
  c.multiply_adds = sat_mul(sat_mul(rows, count(k.ne[1])), per_pair);
  const uint64_t kv_row_bytes = (addressed_bytes(k) + addressed_bytes(v)) / std::max<uint64_t>(count(k.ne[2]), 1);
  c.bytes = sat_add(c.bytes, sat_mul(rows, kv_row_bytes));
}

}  // namespace detail

GraphCost node_cost(const Tensor& n) {
  GraphCost c;
  const OpInfo& info = op_info(n.op);
  if (info.cost == nullptr) return c;  // a leaf or a view computes nothing
  c.bytes = addressed_bytes(n);
  for (const Tensor* s : n.src) {
    if (s != nullptr) c.bytes = sat_add(c.bytes, addressed_bytes(*s));
  }
  info.cost(n, c);
  return c;
}

GraphCost graph_cost(const Graph& g) {
  GraphCost total;
  for (const Tensor* t : g.nodes()) {
    const GraphCost c = node_cost(*t);
    total.multiply_adds = sat_add(total.multiply_adds, c.multiply_adds);
    total.bytes = sat_add(total.bytes, c.bytes);
  }
  return total;
}

}  // namespace weft
