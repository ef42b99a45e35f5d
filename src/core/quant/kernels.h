// Per-type block codecs behind include/weft/core/quant.h. Each works on whole
// blocks (the caller has checked the row size): `dequantize_*` decodes
// nblocks blocks into nblocks * block_values floats, `quantize_*` encodes
// nblocks * block_values finite floats with ggml's reference quantizer.
#pragma once

#include <cstdint>

namespace weft::quant {

using DequantizeFn = void (*)(const void* blocks, float* out, int64_t nblocks);
using QuantizeFn = void (*)(const float* in, void* blocks, int64_t nblocks);

// legacy.cpp: 32-value blocks.
void dequantize_q4_1(const void* blocks, float* out, int64_t nblocks);
void quantize_q4_1(const float* in, void* blocks, int64_t nblocks);
void dequantize_q5_0(const void* blocks, float* out, int64_t nblocks);
void quantize_q5_0(const float* in, void* blocks, int64_t nblocks);
void dequantize_q5_1(const void* blocks, float* out, int64_t nblocks);
void quantize_q5_1(const float* in, void* blocks, int64_t nblocks);

// k_quants_2_3.cpp
void dequantize_q2_K(const void* blocks, float* out, int64_t nblocks);
void quantize_q2_K(const float* in, void* blocks, int64_t nblocks);
void dequantize_q3_K(const void* blocks, float* out, int64_t nblocks);
void quantize_q3_K(const float* in, void* blocks, int64_t nblocks);

// k_quants_4_6.cpp
void dequantize_q4_K(const void* blocks, float* out, int64_t nblocks);
void quantize_q4_K(const float* in, void* blocks, int64_t nblocks);
void dequantize_q5_K(const void* blocks, float* out, int64_t nblocks);
void quantize_q5_K(const float* in, void* blocks, int64_t nblocks);
void dequantize_q6_K(const void* blocks, float* out, int64_t nblocks);
void quantize_q6_K(const float* in, void* blocks, int64_t nblocks);

// k_quants_8.cpp: the activation type.
void dequantize_q8_K(const void* blocks, float* out, int64_t nblocks);
void quantize_q8_K(const float* in, void* blocks, int64_t nblocks);

// iq4.cpp
void dequantize_iq4_nl(const void* blocks, float* out, int64_t nblocks);
void quantize_iq4_nl(const float* in, void* blocks, int64_t nblocks);
void dequantize_iq4_xs(const void* blocks, float* out, int64_t nblocks);
void quantize_iq4_xs(const float* in, void* blocks, int64_t nblocks);

// mxfp4.cpp
void dequantize_mxfp4(const void* blocks, float* out, int64_t nblocks);
void quantize_mxfp4(const float* in, void* blocks, int64_t nblocks);

}  // namespace weft::quant
