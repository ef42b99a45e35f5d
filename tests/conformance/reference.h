// The float64 reference of the conformance suite. It evaluates a graph from
// tensor metadata alone (ne, nb, op, op_params, src, view_src, view_offs) and
// decodes stored bytes with its own code written from FACTS.md and the ggml
// block definitions: it never calls weft's kernels, dtype conversions or
// quant code, so a bug there cannot hide by also being in the expected values.
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
#include <span>
#include <unordered_map>
#include <vector>

#include "weft/core/graph.h"
#include "weft/core/tensor.h"

namespace weft::conformance {

// Storage decoders (FACTS.md; IEEE binary16 and bfloat16).
double decode_f16(uint16_t h);
double decode_bf16(uint16_t h);
// One 34-byte q8_0 block / one 18-byte q4_0 block into 32 values.
void decode_q8_0(const uint8_t* block, double out[32]);
void decode_q4_0(const uint8_t* block, double out[32]);
// The other GGUF block formats (reference_quant.cpp, from the ggml format
// definitions): one block into 32 or 256 exact values.
void decode_q4_1(const uint8_t* block, double out[32]);
void decode_q5_0(const uint8_t* block, double out[32]);
void decode_q5_1(const uint8_t* block, double out[32]);
void decode_iq4_nl(const uint8_t* block, double out[32]);
void decode_q2_K(const uint8_t* block, double out[256]);
void decode_q3_K(const uint8_t* block, double out[256]);
void decode_q4_K(const uint8_t* block, double out[256]);
void decode_q5_K(const uint8_t* block, double out[256]);
void decode_q6_K(const uint8_t* block, double out[256]);
void decode_iq4_xs(const uint8_t* block, double out[256]);
void decode_mxfp4(const uint8_t* block, double out[32]);

// A GGUF block format the reference decodes.
struct RefQuantFormat {
  uint32_t gguf_id;
  const char* name;      // as GGUF spells it: "q4_K"
  int64_t block_values;  // 32 or 256
  size_t block_bytes;
  void (*decode)(const uint8_t* block, double* out);  // block_values values
};
// All of them (the 12 types of tests/data/quant-vectors.json).
std::span<const RefQuantFormat> ref_gguf_formats();
// By GGUF dtype id; nullptr for a type the reference does not decode.
const RefQuantFormat* ref_gguf_format(uint32_t gguf_id);
// The format of a quantized weft dtype; nullptr for f32, f16, bf16, i32.
const RefQuantFormat* ref_quant_format(DType t);

// Block size and bytes per storage unit of t, from the reference's own table.
int64_t ref_block_size(DType t);
size_t ref_unit_bytes(DType t);

// The elements of t in logical order (i0 fastest), decoded from bytes laid
// out as t is: element (i0, i1, i2, i3) lives at i1*nb1 + i2*nb2 + i3*nb3 +
// i0*nb0 (or in the (i0/B)th block for quantized types of B-value blocks)
// from bytes[0].
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
    int64_t block = 1;  // values per storage unit
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
