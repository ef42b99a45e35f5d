// The reference's GGUF block decoders beyond q8_0 / q4_0, written from the
// ggml block definitions (ggml-common.h) and dequantizers (ggml-quants.c),
// not from weft's src/core/quant. Every value is computed in double and is
// exact: scales are f16 (multiples of 2^-24 below 2^16), quants and sub-block
// scales integers whose products are at most 2^12, so each product is a
// multiple of 2^-24 below 2^28 and a product minus a min one below 2^29: at
// most 53 significant bits. Rounded to float once, such a value is what
// ggml's float dequantizer gives, whose steps are exact but the last.
//
// Layouts, byte offsets from the block start (all little-endian):
//   q4_1    20: d f16 @0, m f16 @2, qs[16] @4           x = q * d + m
//   q5_0    22: d @0, qh u32 @2, qs[16] @6              x = (q - 16) * d
//   q5_1    24: d @0, m @2, qh u32 @4, qs[16] @8        x = q * d + m
//   iq4_nl  18: d @0, qs[16] @2                         x = d * kv[q]
//   q2_K    84: scales[16] @0, qs[64] @16, d @80, dmin @82
//   q3_K   110: hmask[32] @0, qs[64] @32, scales[12] @96, d @108
//   q4_K   144: d @0, dmin @2, scales[12] @4, qs[128] @16
//   q5_K   176: d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48
//   q6_K   210: ql[128] @0, qh[64] @128, scales i8[16] @192, d @208
//   iq4_xs 136: d @0, scales_h u16 @2, scales_l[4] @4, qs[128] @8
//   mxfp4   17: e u8 @0, qs[16] @1                       x = e2m1(q) * 2^(e - 127)
#include <cmath>
#include <string>

#include "conformance/reference.h"
#include "weft/core/error.h"

namespace weft::conformance {
namespace {

uint16_t u16_at(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

uint32_t u32_at(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

double f16_at(const uint8_t* p) {
  return decode_f16(u16_at(p));
}

// The 16 levels of iq4_nl and iq4_xs (ggml's kvalues_iq4nl).
constexpr int kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Nibble r of 32 packed as in q4_0: values 0..15 are the low nibbles of
// qs[0..15], values 16..31 the high nibbles.
int nibble32(const uint8_t* qs, int r) {
  return r < 16 ? qs[r] & 0x0F : qs[r - 16] >> 4;
}

// Scale and min of sub-block j (of 8) in the 12 packed bytes of q4_K / q5_K:
// j < 4: the low 6 bits of bytes j and j + 4; j >= 4: a nibble of byte j + 4
// joined with the top 2 bits of bytes j - 4 (scale) and j (min).
void k4_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Signed scale of sub-block j (of 16) in the 12 packed bytes of q3_K: low 4
// bits from byte j (j < 8, low nibble) or j - 8 (high nibble), high 2 bits
// from byte 8 + j % 4 at bit 2 * (j / 4); stored with an offset of 32.
int q3k_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? s[j] & 0x0F : s[j - 8] >> 4;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

}  // namespace

void decode_q4_1(const uint8_t* b, double out[32]) {
  const double d = f16_at(b), m = f16_at(b + 2);
  for (int i = 0; i < 32; ++i) out[i] = nibble32(b + 4, i) * d + m;
}

void decode_q5_0(const uint8_t* b, double out[32]) {
  const double d = f16_at(b);
  const uint32_t qh = u32_at(b + 2);  // bit i: the fifth bit of value i
  for (int i = 0; i < 32; ++i) out[i] = ((nibble32(b + 6, i) | static_cast<int>(((qh >> i) & 1) << 4)) - 16) * d;
}

void decode_q5_1(const uint8_t* b, double out[32]) {
  const double d = f16_at(b), m = f16_at(b + 2);
  const uint32_t qh = u32_at(b + 4);
  for (int i = 0; i < 32; ++i) out[i] = (nibble32(b + 8, i) | static_cast<int>(((qh >> i) & 1) << 4)) * d + m;
}

void decode_iq4_nl(const uint8_t* b, double out[32]) {
  const double d = f16_at(b);
  for (int i = 0; i < 32; ++i) out[i] = d * kIq4Levels[nibble32(b + 2, i)];
}

// K-quants: 256 values in 16 sub-blocks of 16 (q2_K, q3_K, q6_K) or 8 of 32
// (q4_K, q5_K, iq4_xs). The 2-bit fields of q2_K / q3_K: value i lies in
// half h = i / 128; within it, value r = i % 128 takes bits 2 * (r / 32) of
// byte 32 * h + r % 32.
void decode_q2_K(const uint8_t* b, double out[256]) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const double d = f16_at(b + 80), dmin = f16_at(b + 82);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, r = i % 128;
    const int q = (qs[32 * h + r % 32] >> (2 * (r / 32))) & 3;
    const int sc = scales[i / 16];
    out[i] = d * (sc & 0x0F) * q - dmin * (sc >> 4);
  }
}

void decode_q3_K(const uint8_t* b, double out[256]) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* scales = b + 96;
  const double d = f16_at(b + 108);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, r = i % 128;
    const int low = (qs[32 * h + r % 32] >> (2 * (r / 32))) & 3;
    // The high bit of value i is bit i / 32 of hmask[i % 32]; a clear bit
    // subtracts 4 (the quant is low - 4 + 4 * bit).
    const bool high = (hmask[i % 32] >> (i / 32)) & 1;
    out[i] = d * q3k_scale(scales, i / 16) * (low - (high ? 0 : 4));
  }
}

void decode_q4_K(const uint8_t* b, double out[256]) {
  const double d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int i = 0; i < 256; ++i) {
    // Values 64c .. 64c + 63 share qs[32c .. 32c + 31]: low nibbles first.
    const int c = i / 64, r = i % 64;
    const int q = r < 32 ? qs[32 * c + r] & 0x0F : qs[32 * c + r - 32] >> 4;
    int sc = 0, m = 0;
    k4_scale_min(scales, i / 32, &sc, &m);
    out[i] = d * sc * q - dmin * m;
  }
}

void decode_q5_K(const uint8_t* b, double out[256]) {
  const double d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int i = 0; i < 256; ++i) {
    const int c = i / 64, r = i % 64, j = i / 32;
    const int low = r < 32 ? qs[32 * c + r] & 0x0F : qs[32 * c + r - 32] >> 4;
    const int high = (qh[i % 32] >> j) & 1;  // bit j of qh[i % 32], j the sub-block
    int sc = 0, m = 0;
    k4_scale_min(scales, j, &sc, &m);
    out[i] = d * sc * (low + 16 * high) - dmin * m;
  }
}

void decode_q6_K(const uint8_t* b, double out[256]) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const uint8_t* scales = b + 192;
  const double d = f16_at(b + 208);
  for (int i = 0; i < 256; ++i) {
    // Half h = i / 128 uses ql[64h ..], qh[32h ..]; its quarter g = r / 32
    // takes nibble g / 2 of ql[64h + 32 (g % 2) + l] and bits 2g of qh[32h + l].
    const int h = i / 128, r = i % 128, g = r / 32, l = r % 32;
    const int low = (ql[64 * h + 32 * (g % 2) + l] >> (4 * (g / 2))) & 0x0F;
    const int high = (qh[32 * h + l] >> (2 * g)) & 3;
    const int sc = static_cast<int8_t>(scales[i / 16]);
    out[i] = d * sc * ((low | (high << 4)) - 32);
  }
}

void decode_iq4_xs(const uint8_t* b, double out[256]) {
  const double d = f16_at(b);
  const uint16_t scales_h = u16_at(b + 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 8; ++j) {
    // 6-bit scale: a nibble of scales_l[j / 2], 2 bits of scales_h; offset 32.
    const int ls = ((scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | (((scales_h >> (2 * j)) & 3) << 4);
    for (int r = 0; r < 32; ++r) out[32 * j + r] = d * (ls - 32) * kIq4Levels[nibble32(qs + 16 * j, r)];
  }
}

// mxfp4, read from the OCP microscaling spec rather than ggml's tables: code
// q is an E2M1 float (sign bit 3, exponent bits 2-1 with bias 1, mantissa
// bit 0; exponent 0 is subnormal: 0 or 0.5), scaled by the E8M0 byte e as
// 2^(e - 127). Two departures follow ggml: e = 255 is 2^128, not NaN, and
// -0 (code 8) decodes as +0 (ggml keeps the levels as integers). Exact in
// double: at most 2 significant bits times a power of two.
void decode_mxfp4(const uint8_t* b, double out[32]) {
  const int e = b[0];
  for (int i = 0; i < 32; ++i) {
    const int q = nibble32(b + 1, i);
    const int exponent = (q >> 1) & 3, mantissa = q & 1;
    const double magnitude = exponent == 0 ? 0.5 * mantissa : std::ldexp(1.0 + 0.5 * mantissa, exponent - 1);
    if (magnitude == 0) {
      out[i] = 0.0;
      continue;
    }
    out[i] = std::ldexp(q & 8 ? -magnitude : magnitude, e - 127);
  }
}

namespace {

constexpr RefQuantFormat kFormats[] = {
    {2, "q4_0", 32, 18, decode_q4_0},    {3, "q4_1", 32, 20, decode_q4_1},      {6, "q5_0", 32, 22, decode_q5_0},
    {7, "q5_1", 32, 24, decode_q5_1},    {8, "q8_0", 32, 34, decode_q8_0},      {10, "q2_K", 256, 84, decode_q2_K},
    {11, "q3_K", 256, 110, decode_q3_K}, {12, "q4_K", 256, 144, decode_q4_K},   {13, "q5_K", 256, 176, decode_q5_K},
    {14, "q6_K", 256, 210, decode_q6_K}, {20, "iq4_nl", 32, 18, decode_iq4_nl}, {23, "iq4_xs", 256, 136, decode_iq4_xs},
    {39, "mxfp4", 32, 17, decode_mxfp4},
};

}  // namespace

std::span<const RefQuantFormat> ref_gguf_formats() {
  return kFormats;
}

const RefQuantFormat* ref_gguf_format(uint32_t gguf_id) {
  for (const RefQuantFormat& f : kFormats) {
    if (f.gguf_id == gguf_id) return &f;
  }
  return nullptr;
}

const RefQuantFormat* ref_quant_format(DType t) {
  // The reference's own dtype -> GGUF id table (FACTS.md), not weft's traits.
  switch (t) {
    case DType::q8_0: return ref_gguf_format(8);
    case DType::q4_0: return ref_gguf_format(2);
    case DType::q4_1: return ref_gguf_format(3);
    case DType::q5_0: return ref_gguf_format(6);
    case DType::q5_1: return ref_gguf_format(7);
    case DType::q2_K: return ref_gguf_format(10);
    case DType::q3_K: return ref_gguf_format(11);
    case DType::q4_K: return ref_gguf_format(12);
    case DType::q5_K: return ref_gguf_format(13);
    case DType::q6_K: return ref_gguf_format(14);
    case DType::iq4_nl: return ref_gguf_format(20);
    case DType::iq4_xs: return ref_gguf_format(23);
    case DType::mxfp4: return ref_gguf_format(39);
    case DType::f32:
    case DType::f16:
    case DType::bf16:
    case DType::i32: return nullptr;
  }
  return nullptr;
}

}  // namespace weft::conformance
