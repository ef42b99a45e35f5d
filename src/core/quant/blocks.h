// Storage blocks of the GGUF quantized types, field for field as ggml lays
// them out (ggml-common.h), little-endian. `uint16_t` fields named d / dmin /
// m hold IEEE half floats. The sizes are part of the file format.
#pragma once

#include <cstdint>

namespace weft::quant {

inline constexpr int kLegacyBlock = 32;  // values per q4_1 / q5_x / iq4_nl / mxfp4 block
inline constexpr int kSuperBlock = 256;  // values per K-quant / iq4_xs block (QK_K)
inline constexpr int kScaleBytesK = 12;  // packed 6-bit scales of q3_K...q5_K

struct BlockQ4_1 {
  uint16_t d;                    // scale
  uint16_t m;                    // minimum: value = q * d + m
  uint8_t qs[kLegacyBlock / 2];  // value j in the low nibble of byte j, j + 16 in the high
};

struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // bit j: the fifth bit of value j
  uint8_t qs[kLegacyBlock / 2];
};

struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kLegacyBlock / 2];
};

// 16 groups of 16 values: value = d * scale - dmin * min, 4-bit scale / min.
struct BlockQ2_K {
  uint8_t scales[kSuperBlock / 16];  // low nibble scale, high nibble min
  uint8_t qs[kSuperBlock / 4];       // 2-bit quants
  uint16_t d;
  uint16_t dmin;
};

// 16 groups of 16 values, signed 6-bit scales packed into 12 bytes.
struct BlockQ3_K {
  uint8_t hmask[kSuperBlock / 8];  // high bit of each 3-bit quant
  uint8_t qs[kSuperBlock / 4];     // low 2 bits
  uint8_t scales[kScaleBytesK];
  uint16_t d;
};

// 8 groups of 32 values, 6-bit scales and mins packed into 12 bytes.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kScaleBytesK];
  uint8_t qs[kSuperBlock / 2];
};

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kScaleBytesK];
  uint8_t qh[kSuperBlock / 8];  // fifth bit
  uint8_t qs[kSuperBlock / 2];  // low 4 bits
};

// 16 groups of 16 values, signed 8-bit scales.
struct BlockQ6_K {
  uint8_t ql[kSuperBlock / 2];  // low 4 bits
  uint8_t qh[kSuperBlock / 4];  // high 2 bits
  int8_t scales[kSuperBlock / 16];
  uint16_t d;
};

// The activation type of the K-quant dot products: a float scale, 8-bit
// quants and the sums of each group of 16 quants.
struct BlockQ8_K {
  float d;
  int8_t qs[kSuperBlock];
  int16_t bsums[kSuperBlock / 16];
};

// Indices into the 16 non-linear levels kIq4Levels.
struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[kLegacyBlock / 2];
};

// 8 groups of 32 values with 6-bit scales (low 4 bits in scales_l, high 2
// bits in scales_h), each group coded like iq4_nl.
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kSuperBlock / 64];
  uint8_t qs[kSuperBlock / 2];
};

// MXFP4 (OCP microscaling): 32 four-bit E2M1 codes under one E8M0 scale
// byte, codes as in iq4_nl (value j in the low nibble of qs[j], j + 16 in
// the high). Value = kMxfp4Levels[code] * 2^(e - 128): the levels are twice
// E2M1, the scale half of E8M0's 2^(e - 127).
struct BlockMxfp4 {
  uint8_t e;
  uint8_t qs[kLegacyBlock / 2];
};

static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockIq4Xs) == 136);
static_assert(sizeof(BlockMxfp4) == 17);

// The iq4_nl / iq4_xs levels (kvalues_iq4nl), ascending.
inline constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The mxfp4 levels (kvalues_mxfp4): twice the E2M1 values, codes 0-7
// positive, 8-15 their negatives (code 8 is -0, stored as 0).
inline constexpr int8_t kMxfp4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

}  // namespace weft::quant
