// The float64 reference of the conformance suite. It evaluates a graph from
// tensor metadata alone (ne, nb, op, op_params, src, view_src, view_offs) and
// decodes stored bytes with its own code written from FACTS.md: it never
// calls weft's kernels or dtype conversions, so a bug there cannot hide by
// also being in the expected values.
//
// Model: every base tensor (one that is not a view) has a "memory" of
// logical element slots held as doubles. An element of any tensor, view or
// not, maps to a slot of its base through its byte offset, so views alias
// exactly as they do in a backend buffer, and set_rows / cpy write into
// their destination's base. Values are never rounded to the storage dtype:
// a node stored as f16 holds its exact result here, and the comparison's
// tolerance accounts for the rounding a backend does.
//
//   Reference ref;
//   for (Tensor* leaf : g.leafs()) ref.load_leaf(*leaf, bytes, size);
//   ref.run(g);
//   std::vector<double> expected = ref.values(*out);
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "weft/graph.h"
#include "weft/tensor.h"

namespace weft::conformance {

// Storage decoders (FACTS.md; IEEE binary16 and bfloat16).
double decode_f16(uint16_t h);
double decode_bf16(uint16_t h);
// One 34-byte q8_0 block / one 18-byte q4_0 block into 32 values.
void decode_q8_0(const uint8_t* block, double out[32]);
void decode_q4_0(const uint8_t* block, double out[32]);

// Block size and bytes per storage unit of t, from the reference's own table.
int64_t ref_block_size(DType t);
size_t ref_unit_bytes(DType t);

// The elements of t in logical order (i0 fastest), decoded from bytes laid
// out as t is: element (i0, i1, i2, i3) lives at i1*nb1 + i2*nb2 + i3*nb3 +
// i0*nb0 (or the (i0/32)th block for quantized types) from bytes[0].
// Throws Error(internal) when an element lies outside size.
std::vector<double> decode_tensor(const Tensor& t, const void* bytes, size_t size);

class Reference {
 public:
  // Sets the memory of base tensor t from the bytes uploaded to it (laid out
  // as t is). Call for every leaf before run().
  void load_leaf(const Tensor& t, const void* bytes, size_t size);
  // Evaluates g's nodes in order. Throws Error(unsupported) for an op it does
  // not know and Error(internal) for an element outside its base.
  void run(const Graph& g);
  // The current values of t's elements in logical order.
  std::vector<double> values(const Tensor& t);

 private:
  // Element access of one tensor into its base's memory.
  struct Accessor {
    std::vector<double>* mem = nullptr;
    const Tensor* t = nullptr;
    size_t offs = 0;
    bool quantized = false;
    size_t unit = 1;

    double& at(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const;
  };

  Accessor access(const Tensor& t);
  std::vector<double>& memory_of(const Tensor& base);
  void eval(const Tensor& node);
  void store(const Tensor& node, const std::vector<double>& values);

  std::unordered_map<const Tensor*, std::vector<double>> mem_;
};

}  // namespace weft::conformance
