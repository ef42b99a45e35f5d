// Element types and their storage layout. Quantized types store blocks of
// kBlockSize values (the GGUF layouts, see FACTS.md); all others store one
// value per element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace weft {

enum class DType : uint8_t { f32, f16, bf16, i32, q8_0, q4_0 };
inline constexpr int kDTypeCount = 6;

inline constexpr int kQuantBlock = 32;  // values per q8_0 / q4_0 block

struct DTypeTraits {
  std::string_view name;
  int64_t block_size;  // elements per storage unit (1 or 32)
  size_t unit_bytes;   // bytes per storage unit
  bool quantized;
};

const DTypeTraits& traits(DType t);
inline std::string_view dtype_name(DType t) { return traits(t).name; }
std::optional<DType> dtype_from_name(std::string_view name);

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

// Converts n contiguous elements. For quantized types n is a multiple of 32.
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
