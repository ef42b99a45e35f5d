// GGUF quantized block formats beyond weft's q8_0 / q4_0 dtypes: the legacy
// 32-value blocks (q4_1, q5_0, q5_1), the 256-value K-quants (q2_K ... q6_K
// and the q8_K activation type) and the non-linear iq4_nl / iq4_xs.
//
// Types are named by their GGUF dtype id (docs/quantization.md, "The types").
// Both directions are bit-exact with the reference implementation in ggml
// (ggml-quants.c): dequantize_row gives exactly the floats ggml's dequantizer
// gives, and quantize_row_reference gives exactly the bytes `llama-quantize`
// writes without an importance matrix. Results do not depend on the CPU or
// the build: these files are compiled without floating-point contraction.
//
// A row is a whole number of blocks; anything else is refused:
//
//   const QuantTypeInfo* q4k = quant_type_info(12);       // q4_K
//   std::vector<uint8_t> blocks(quant_row_bytes(12, n));  // n % 256 == 0
//   quantize_row_reference(12, x, blocks.data(), n);
//   dequantize_row(12, blocks.data(), y, n);
//
// `blocks` must be aligned for the type's block struct: 2 bytes, 4 for q8_K
// (GGUF tensor data always is). All functions are thread-safe (no shared
// mutable state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace weft {

struct QuantTypeInfo {
  uint32_t gguf_id;
  std::string_view name;  // as GGUF / ggml spell it: "q4_K", "iq4_xs"
  int64_t block_values;   // values per block: 32 or 256
  size_t block_bytes;     // bytes per block
};

// Every type this module implements (q4_0 and q8_0 are weft dtypes, not here).
std::span<const QuantTypeInfo> quant_types();

// The type with this GGUF id, or nullptr if this module does not implement it.
const QuantTypeInfo* quant_type_info(uint32_t gguf_id);

// Bytes of a row of n values. Throws Error(unsupported) for an unknown id and
// Error(invalid_input) when n is negative or not a multiple of the block size.
size_t quant_row_bytes(uint32_t gguf_id, int64_t n);

// Decodes n values from quant_row_bytes(gguf_id, n) bytes at `blocks` into
// out[0, n). Same errors as quant_row_bytes; nothing is written on error.
void dequantize_row(uint32_t gguf_id, const void* blocks, float* out, int64_t n);

// Encodes in[0, n) with ggml's standard quantizer without an importance matrix
// into quant_row_bytes(gguf_id, n) bytes at `blocks`. Inputs are expected to
// be finite. Same errors as quant_row_bytes; nothing is written on error.
void quantize_row_reference(uint32_t gguf_id, const float* in, void* blocks, int64_t n);

}  // namespace weft
