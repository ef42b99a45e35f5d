// One row through weft's codec for a GGUF type id, whichever API holds it:
// q4_0 and q8_0 are weft dtypes (the KV cache's and the weights' codecs),
// every other type goes through quant.h. Shared by the exactness tests
// (test_quant_types.cpp) and the edge cases (test_quant_edge_cases.cpp).
#pragma once

#include <cstdint>

#include "weft/core/dtype.h"
#include "weft/core/quant.h"

namespace weft::test {

inline void dequantize_any(uint32_t id, const void* blocks, float* out, int64_t n) {
  if (id == 2) return to_f32(DType::q4_0, blocks, out, n);
  if (id == 8) return to_f32(DType::q8_0, blocks, out, n);
  dequantize_row(id, blocks, out, n);
}

inline void quantize_any(uint32_t id, const float* in, void* blocks, int64_t n) {
  if (id == 2) return from_f32(DType::q4_0, in, blocks, n);
  if (id == 8) return from_f32(DType::q8_0, in, blocks, n);
  quantize_row_reference(id, in, blocks, n);
}

}  // namespace weft::test
