// Element types and their storage layout. Quantized types store blocks of
// 32 or 256 values (the GGUF layouts, see docs/quantization.md);
// all others store one value per element. The enum's values are part of the
// RPC wire format: new types are appended, never inserted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace weft {

enum class DType : uint8_t {
  f32, f16, bf16, i32, q8_0, q4_0,
  q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs,
  mxfp4,
};
inline constexpr int kDTypeCount = 17;

inline constexpr int kQuantBlock = 32;    // values per q8_0 / q4_0 / q4_1 / q5_x / iq4_nl / mxfp4 block
inline constexpr int kSuperBlock = 256;  // values per K-quant / iq4_xs block

struct DTypeTraits {
  std::string_view name;
  int64_t block_size;  // elements per storage unit (1, 32 or 256)
  size_t unit_bytes;   // bytes per storage unit
  bool quantized;
  uint32_t gguf_id;    // the GGUF / ggml type id
};

inline constexpr DTypeTraits kDTypeTraits[kDTypeCount] = {
    {"f32", 1, 4, false, 0},
    {"f16", 1, 2, false, 1},
    {"bf16", 1, 2, false, 30},
    {"i32", 1, 4, false, 26},
    {"q8_0", kQuantBlock, 34, true, 8},
    {"q4_0", kQuantBlock, 18, true, 2},
    {"q4_1", kQuantBlock, 20, true, 3},
    {"q5_0", kQuantBlock, 22, true, 6},
    {"q5_1", kQuantBlock, 24, true, 7},
    {"q2_K", kSuperBlock, 84, true, 10},
    {"q3_K", kSuperBlock, 110, true, 11},
    {"q4_K", kSuperBlock, 144, true, 12},
    {"q5_K", kSuperBlock, 176, true, 13},
    {"q6_K", kSuperBlock, 210, true, 14},
    {"iq4_nl", kQuantBlock, 18, true, 20},
    {"iq4_xs", kSuperBlock, 136, true, 23},
    {"mxfp4", kQuantBlock, 17, true, 39},
};

constexpr const DTypeTraits& traits(DType t) { return kDTypeTraits[static_cast<size_t>(t)]; }
inline std::string_view dtype_name(DType t) { return traits(t).name; }
std::optional<DType> dtype_from_name(std::string_view name);
// The DType of a GGUF / ggml type id, if weft has one.
std::optional<DType> dtype_from_gguf_id(uint32_t id);

// The alignment kernels need for t's data and strides: the element's size
// for plain types, 2 for the blocks that start with an f16 scale, 1 for
// mxfp4 (17-byte blocks led by a scale byte).
constexpr size_t storage_alignment(DType t) {
  const DTypeTraits& tr = traits(t);
  if (!tr.quantized) return tr.unit_bytes;
  return t == DType::mxfp4 ? 1 : 2;
}

// Bytes used by a row of n elements; n must be a multiple of the block size
// (checked by the op constructors, not here).
inline size_t row_bytes(DType t, int64_t n) {
  const DTypeTraits& tr = traits(t);
  return static_cast<size_t>(n / tr.block_size) * tr.unit_bytes;
}

// IEEE half and bfloat16 conversion (round to nearest even).
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

// Converts n contiguous elements. For quantized types n is a multiple of the
// block size; from_f32 into them is the standard reference quantizer (the
// bytes llama.cpp's quantizer writes without an importance matrix).
// i32 converts by value (rounding toward zero on the way in).
void to_f32(DType t, const void* src, float* dst, int64_t n);
void from_f32(DType t, const float* src, void* dst, int64_t n);

// GGUF storage blocks.
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t q[kQuantBlock];
};
struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t q[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);

}  // namespace weft
