// AVX2 kernels of the quantized dot products (qdot.h) for the 32-value
// types (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4), as ggml's x86
// kernels compute them: weight quants unpacked to bytes, multiplied with the
// 8-bit activations by maddubs (unsigned x signed bytes -> i16 pairs) and
// summed to i32 by madd, exactly; floats only once per block. Signed
// weights go through the sign trick (|w| * sign(x, w)); unsigned ones with
// an offset take it from the sums of the activations. The i16 pair sums
// never saturate: |q| <= 127 for every activation our quantizers write.
//
// Decode (nx = 1) is memory-bound: four weight rows per pass share each
// activation block's work, and the weights are prefetched 16 KiB ahead
// into L2. Wider tiles unpack each weight block once for all their
// activation rows. The super-block types are in qdot_avx2_k.cpp, the
// shared helpers in qdot_avx2_common.h, the activation quantizers of this
// level in qdot_act_avx2.cpp. (Prompts of 16 or more rows take qgemm.h.)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "qdot_avx2_common.h"

namespace weft::cpu {
namespace {

// ---------------------------------------------------------------------------
// 32-value blocks against q8_0 activations, two blocks b, b + 1 per
// register: "lo" holds values 0..15 of b (low lane) and of b + 1 (high
// lane), "hi" values 16..31, which is how the nibbles come out of 16 bytes
// each. The activations are rearranged to match (once for all weight rows);
// a pair then takes one convert and FMA (and, for the unsigned forms, one
// madd: both halves are summed in i16).
// Each type gives its quants in one of three forms: signed (value = d * q,
// the sign trick), unsigned with an offset (value = d * (q - kOffset), taken
// off through the sums of the activations) or unsigned with a minimum
// (value = d * q + m).

enum class Form { signed_q, offset_q, min_q };

// 16 bytes of blocks b and b + 1 (at p0, p1) in the two lanes.
WEFT_INLINE __m256i lanes(const void* p0, const void* p1) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(load16(p0)), load16(p1), 1);
}

struct Halves {
  __m256i lo, hi;
};

WEFT_INLINE Halves nibbles2(const uint8_t* q0, const uint8_t* q1) {
  const __m256i q = lanes(q0, q1), m4 = _mm256_set1_epi8(0x0F);
  return {_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4)};
}

// 16 where bit j of the fifth bits (qh0 of block b, qh1 of b + 1) is set,
// in the Halves order.
WEFT_INLINE Halves fifth_bits2(const uint8_t* qh0, const uint8_t* qh1) {
  uint32_t h0, h1;
  std::memcpy(&h0, qh0, sizeof h0);
  std::memcpy(&h1, qh1, sizeof h1);
  const __m256i bits = _mm256_set1_epi64x(static_cast<int64_t>(static_cast<uint64_t>(h1) << 32 | h0));
  // Byte i of a lane takes byte i / 8 of its 16 bits (bits 0-15 or 16-31).
  const __m256i lo =
      _mm256_shuffle_epi8(bits, _mm256_set_epi64x(0x0505050505050505, 0x0404040404040404, 0x0101010101010101, 0));
  const __m256i hi = _mm256_shuffle_epi8(
      bits, _mm256_set_epi64x(0x0707070707070707, 0x0606060606060606, 0x0303030303030303, 0x0202020202020202));
  const __m256i mask = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  const __m256i b4 = _mm256_set1_epi8(16);
  return {_mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(lo, mask), mask), b4),
          _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hi, mask), mask), b4)};
}

struct Q8_0 {
  using Block = BlockQ8_0;
  static constexpr Form kForm = Form::signed_q;
  WEFT_INLINE static Halves quants(const Block& b0, const Block& b1) {
    return {lanes(b0.q, b1.q), lanes(b0.q + 16, b1.q + 16)};
  }
  WEFT_INLINE static __m256i quants32(const Block& b) { return load32(b.q); }
};
struct Q4_0 {
  using Block = BlockQ4_0;
  static constexpr Form kForm = Form::offset_q;
  static constexpr int kOffset = 8;
  WEFT_INLINE static Halves quants(const Block& b0, const Block& b1) { return nibbles2(b0.q, b1.q); }
};
struct Q5_0 {
  using Block = wq::BlockQ5_0;
  static constexpr Form kForm = Form::offset_q;
  static constexpr int kOffset = 16;
  WEFT_INLINE static Halves quants(const Block& b0, const Block& b1) {
    const Halves n = nibbles2(b0.qs, b1.qs), h = fifth_bits2(b0.qh, b1.qh);
    return {_mm256_or_si256(n.lo, h.lo), _mm256_or_si256(n.hi, h.hi)};
  }
};
struct Iq4Nl {
  using Block = wq::BlockIq4Nl;
  static constexpr Form kForm = Form::signed_q;
  WEFT_INLINE static Halves quants(const Block& b0, const Block& b1) {
    const Halves n = nibbles2(b0.qs, b1.qs);
    const __m256i levels = iq4_levels();
    return {_mm256_shuffle_epi8(levels, n.lo), _mm256_shuffle_epi8(levels, n.hi)};
  }
};
// mxfp4: iq4_nl's layout with its own levels (at most 12 in magnitude, so
// both halves' products add up in i16) under an E8M0 scale byte.
struct Mxfp4 {
  using Block = wq::BlockMxfp4;
  static constexpr Form kForm = Form::signed_q;
  static constexpr bool kE8M0 = true, kSmallLevels = true;
  WEFT_INLINE static Halves quants(const Block& b0, const Block& b1) {
    const Halves n = nibbles2(b0.qs, b1.qs);
    const __m256i levels = _mm256_broadcastsi128_si256(load16(wq::kMxfp4Levels));
    return {_mm256_shuffle_epi8(levels, n.lo), _mm256_shuffle_epi8(levels, n.hi)};
  }
};
struct Q4_1 {
  using Block = wq::BlockQ4_1;
  static constexpr Form kForm = Form::min_q;
  WEFT_INLINE static Halves quants(const Block& b0, const Block& b1) { return nibbles2(b0.qs, b1.qs); }
};
struct Q5_1 {
  using Block = wq::BlockQ5_1;
  static constexpr Form kForm = Form::min_q;
  WEFT_INLINE static Halves quants(const Block& b0, const Block& b1) {
    const Halves n = nibbles2(b0.qs, b1.qs), h = fifth_bits2(b0.qh, b1.qh);
    return {_mm256_or_si256(n.lo, h.lo), _mm256_or_si256(n.hi, h.hi)};
  }
};

// The f16 at p and at the 7 places stride bytes apart after it, as floats:
// the scales of 8 consecutive blocks, gathered with scalar loads (cheaper
// than one conversion per block).
WEFT_INLINE __m256 halves8(const void* p, size_t stride) {
  const auto* c = static_cast<const uint8_t*>(p);
  uint64_t lo = 0, hi = 0;
  for (int k = 0; k < 4; ++k) {
    uint16_t a, b;
    std::memcpy(&a, c + k * stride, sizeof a);
    std::memcpy(&b, c + (k + 4) * stride, sizeof b);
    lo |= static_cast<uint64_t>(a) << (16 * k);
    hi |= static_cast<uint64_t>(b) << (16 * k);
  }
  return _mm256_cvtph_ps(from_u64(lo, hi));
}

// E8M0 bytes e as 2^(e - 128) (ggml_e8m0_to_fp32_half, the half that the
// doubled mxfp4 levels need): e << 23 is 2^(e - 127) for e >= 1, halved
// exactly (to a subnormal for e = 1); e = 0 is 2^-128.
WEFT_INLINE __m256 e8m0_half8(__m256i e) {
  const __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(e, 23)), _mm256_set1_ps(0.5f));
  return _mm256_blendv_ps(f, _mm256_set1_ps(0x1p-128f), _mm256_castsi256_ps(_mm256_cmpeq_epi32(e, _mm256_setzero_si256())));
}
WEFT_INLINE float e8m0_half(uint8_t e) {
  return _mm256_cvtss_f32(e8m0_half8(_mm256_set1_epi32(e)));
}

// Weight scales of type T: 8 consecutive blocks' (halves8), or one block's.
template <class T>
inline constexpr bool kE8M0Scale = requires { T::kE8M0; };
template <class T>
WEFT_INLINE __m256 weight_scales8(const typename T::Block* w) {
  if constexpr (kE8M0Scale<T>) {
    uint64_t e = 0;
    for (int k = 0; k < 8; ++k) e |= static_cast<uint64_t>(w[k].e) << (8 * k);
    return e8m0_half8(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(e))));
  } else {
    return halves8(&w->d, sizeof(*w));
  }
}
template <class T>
WEFT_INLINE float weight_scale(const typename T::Block& w) {
  if constexpr (kE8M0Scale<T>) {
    return e8m0_half(w.e);
  } else {
    return f16(w.d);
  }
}

// The scales of a pair: lanes 0-3 from lane k of v, lanes 4-7 from lane k + 1.
WEFT_INLINE __m256 pair_scale(__m256 v, int k) {
  return _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(k, k, k, k, k + 1, k + 1, k + 1, k + 1));
}
// Lanes 0-3 a, lanes 4-7 b.
WEFT_INLINE __m256 pair_scale(float a, float b) {
  return _mm256_set_m128(_mm_set1_ps(b), _mm_set1_ps(a));
}

// One pair of blocks, b0 and b1, of legacy_tile: NW weight rows against NX
// activation rows into acc; s (sm) hold their d * dx (m * dx) in lanes 0-3
// and 4-7. Each pair of activation blocks is rearranged (with its sums for
// the offset and minimum forms) once for all NW rows.
template <class T, int NW, int NX>
WEFT_INLINE void legacy_pair(const typename T::Block* const (&w)[NW], const BlockQ8_0* const* x, int64_t b0, int64_t b1,
                             const __m256 (&s)[NW][NX], const __m256 (&sm)[NW][NX], __m256 (&acc)[NW][NX]) {
  constexpr Form kForm = T::kForm;
  constexpr bool kSmall = requires { T::kSmallLevels; };
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i xa[NX], xb[NX], xs[NX];
  __m256 sum_x[NX];
  for (int j = 0; j < NX; ++j) {
    xa[j] = lanes(x[j][b0].q, x[j][b1].q);
    xb[j] = lanes(x[j][b0].q + 16, x[j][b1].q + 16);
    if constexpr (kForm == Form::offset_q) {
      const __m256i o = _mm256_set1_epi8(T::kOffset);
      xs[j] = _mm256_add_epi16(_mm256_maddubs_epi16(o, xa[j]), _mm256_maddubs_epi16(o, xb[j]));
    }
    if constexpr (kForm == Form::min_q) {
      const __m256i one = _mm256_set1_epi8(1);
      const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(one, xa[j]), _mm256_maddubs_epi16(one, xb[j]));
      sum_x[j] = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones));
    }
  }
  for (int r = 0; r < NW; ++r) {
    const Halves q = T::quants(w[r][b0], w[r][b1]);
    for (int j = 0; j < NX; ++j) {
      __m256i p;
      if constexpr (kForm == Form::signed_q && kSmall) {  // pair sums of up to 2 * 2 * 12 * 127
        const __m256i lo = _mm256_maddubs_epi16(_mm256_sign_epi8(q.lo, q.lo), _mm256_sign_epi8(xa[j], q.lo));
        const __m256i hi = _mm256_maddubs_epi16(_mm256_sign_epi8(q.hi, q.hi), _mm256_sign_epi8(xb[j], q.hi));
        p = _mm256_madd_epi16(_mm256_add_epi16(lo, hi), ones);
      } else if constexpr (kForm == Form::signed_q) {  // two maddubs of up to 2 * 128 * 127 each: madd them apart
        p = _mm256_add_epi32(dot_us(_mm256_sign_epi8(q.lo, q.lo), _mm256_sign_epi8(xa[j], q.lo)),
                             dot_us(_mm256_sign_epi8(q.hi, q.hi), _mm256_sign_epi8(xb[j], q.hi)));
      } else {  // |pair sums| <= 4 * 31 * 127 + 4 * 16 * 127: fits in i16
        __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(q.lo, xa[j]), _mm256_maddubs_epi16(q.hi, xb[j]));
        if constexpr (kForm == Form::offset_q) p16 = _mm256_sub_epi16(p16, xs[j]);
        p = _mm256_madd_epi16(p16, ones);
      }
      acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s[r][j], acc[r][j]);
      if constexpr (kForm == Form::min_q) acc[r][j] = _mm256_fmadd_ps(sum_x[j], sm[r][j], acc[r][j]);
    }
  }
}

// NW weight rows against NX activation rows (NW * NX <= 4 accumulators),
// 8 blocks (4 pairs) at a time: their scales are converted together, and
// each pair of activation blocks serves all NW rows (legacy_pair). Decode
// runs 4 x 1.
template <class T, int NW, int NX>
void legacy_tile(const uint8_t* wp, size_t stride, const BlockQ8_0* const* x, int64_t nb, float* out) {
  using Block = typename T::Block;
  constexpr Form kForm = T::kForm;
  const Block* w[NW];
  for (int r = 0; r < NW; ++r) w[r] = reinterpret_cast<const Block*>(wp + r * stride);
  __m256 acc[NW][NX], s[NW][NX], sm[NW][NX];
  for (int r = 0; r < NW; ++r)
    for (int j = 0; j < NX; ++j) acc[r][j] = _mm256_setzero_ps();
  auto pair = [&](int64_t b0, int64_t b1) WEFT_LAMBDA_INLINE { legacy_pair<T, NW, NX>(w, x, b0, b1, s, sm, acc); };

  const size_t ahead = prefetch_distance(NW * stride);
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    for (int r = 0; r < NW; ++r) prefetch(w[r] + b, ahead, 8 * sizeof(Block));
    __m256 dx[NX], s8[NW][NX], sm8[NW][NX];
    for (int j = 0; j < NX; ++j) dx[j] = halves8(&x[j][b].d, sizeof(BlockQ8_0));
    for (int r = 0; r < NW; ++r) {
      const __m256 dw = weight_scales8<T>(w[r] + b);
      for (int j = 0; j < NX; ++j) s8[r][j] = _mm256_mul_ps(dw, dx[j]);
      if constexpr (kForm == Form::min_q) {
        const __m256 m = halves8(&w[r][b].m, sizeof(Block));
        for (int j = 0; j < NX; ++j) sm8[r][j] = _mm256_mul_ps(m, dx[j]);
      }
    }
#pragma GCC unroll 4
    for (int k = 0; k < 8; k += 2) {
      for (int r = 0; r < NW; ++r)
        for (int j = 0; j < NX; ++j) {
          s[r][j] = pair_scale(s8[r][j], k);
          if constexpr (kForm == Form::min_q) sm[r][j] = pair_scale(sm8[r][j], k);
        }
      pair(b + k, b + k + 1);
    }
  }
  for (; b < nb; b += 2) {  // the last blocks; an odd one pairs with itself, scaled by 0 in lanes 4-7
    const bool odd = b + 1 == nb;
    const int64_t b1 = odd ? b : b + 1;
    for (int r = 0; r < NW; ++r)
      for (int j = 0; j < NX; ++j) {
        const float dx0 = f16(x[j][b].d), dx1 = f16(x[j][b1].d);
        s[r][j] = pair_scale(weight_scale<T>(w[r][b]) * dx0, odd ? 0.0f : weight_scale<T>(w[r][b1]) * dx1);
        if constexpr (kForm == Form::min_q)
          sm[r][j] = pair_scale(f16(w[r][b].m) * dx0, odd ? 0.0f : f16(w[r][b1].m) * dx1);
      }
    pair(b, b1);
  }
  for (int r = 0; r < NW; ++r)
    for (int j = 0; j < NX; ++j) out[r * kTileCols + j] = hsum(acc[r][j]);
}

// d_w * d_x of block b of each of the NW (<= 4) rows, in lanes 0..NW-1: the
// f16 scales packed in a scalar register (the scalar ports are idle here)
// and converted together.
template <class T, int NW>
WEFT_INLINE __m256 row_scales(const typename T::Block* const (&w)[NW], int64_t b, float dx) {
  if constexpr (kE8M0Scale<T>) {
    // The lanes past NW hold 127 (a scale of 0.5), not 0: 2^-128 is
    // subnormal, and every product with it took a microcode assist (3x
    // slower decode on AVX2).
    uint64_t e = 0x7F7F7F7F7F7F7F7F;
    for (int r = 0; r < NW; ++r) e = (e & ~(uint64_t{0xFF} << (8 * r))) | static_cast<uint64_t>(w[r][b].e) << (8 * r);
    return _mm256_mul_ps(e8m0_half8(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(e)))),
                         _mm256_set1_ps(dx));
  } else {
    uint64_t h = 0;
    for (int r = 0; r < NW; ++r) h |= static_cast<uint64_t>(w[r][b].d) << (16 * r);
    const __m128 d = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(h))), _mm_set1_ps(dx));
    return _mm256_castps128_ps256(d);
  }
}

// Decode (one activation row) over NW weight rows, a block per row at a
// time (its 32 quants one load), its scale applied as its quants are read.
// (Gathering 8 blocks' scales ahead, as legacy_tile does for wider tiles,
// puts scalar loads from 8 cache lines in front of every 8 blocks: at one
// row it halved the speed of q8_0.) The sums are grouped and added in
// legacy_tile's order, so that a row's product is the same float in any
// tile (a request batched with others gets the text it gets alone;
// QuantDotAtLevel.ARowsProductDoesNotDependOnTheTileShape): blocks b, b + 1
// share one register, lane i (0-3) of b's half the sum of its values
// 4i..4i+3 and 16+4i..19+4i, which are lanes i and i + 4 of b's dot
// product in value order; an odd last block pairs with itself, its second
// half scaled by 0. Signed quants only (q8_0, the one type with quants32).
template <class T, int NW>
void decode_rows(const uint8_t* wp, size_t stride, const BlockQ8_0* x, int64_t nb, float* out) {
  static_assert(T::kForm == Form::signed_q);
  using Block = typename T::Block;
  const Block* w[NW];
  for (int r = 0; r < NW; ++r) w[r] = reinterpret_cast<const Block*>(wp + r * stride);
  __m256 acc[NW];
  for (int r = 0; r < NW; ++r) acc[r] = _mm256_setzero_ps();
  auto dot = [&](int r, int64_t b, __m256i xv) WEFT_LAMBDA_INLINE {
    const __m256i q = T::quants32(w[r][b]);
    return dot_us(_mm256_sign_epi8(q, q), _mm256_sign_epi8(xv, q));
  };
  auto add = [&](int r, __m256i p0, __m256i p1, __m256 scale) WEFT_LAMBDA_INLINE {
    const __m256i p =
        _mm256_add_epi32(_mm256_permute2x128_si256(p0, p1, 0x20), _mm256_permute2x128_si256(p0, p1, 0x31));
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale, acc[r]);
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    for (int r = 0; r < NW; ++r) prefetch_l2(w[r] + b, 2 * sizeof(Block));
    const __m256i x0 = load32(x[b].q), x1 = load32(x[b + 1].q);
    const __m256 s0 = row_scales<T, NW>(w, b, f16(x[b].d)), s1 = row_scales<T, NW>(w, b + 1, f16(x[b + 1].d));
    for (int r = 0; r < NW; ++r) {
      const __m256 scale = _mm256_set_m128(_mm256_castps256_ps128(_mm256_permutevar8x32_ps(s1, _mm256_set1_epi32(r))),
                                           _mm256_castps256_ps128(_mm256_permutevar8x32_ps(s0, _mm256_set1_epi32(r))));
      add(r, dot(r, b, x0), dot(r, b + 1, x1), scale);
    }
  }
  if (b < nb) {
    const __m256i x0 = load32(x[b].q);
    const __m256 s0 = row_scales<T, NW>(w, b, f16(x[b].d));
    for (int r = 0; r < NW; ++r) {
      const __m256i p0 = dot(r, b, x0);
      const __m128 s = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(s0, _mm256_set1_epi32(r)));
      add(r, p0, p0, _mm256_set_m128(_mm_setzero_ps(), s));
    }
  }
  for (int r = 0; r < NW; ++r) out[r * kTileCols] = hsum(acc[r]);
}

// Decode over row pairs: rows r and r + 1 of block b in the two lanes of a
// register (T::quants of the two rows' blocks), the activation block's
// halves in both lanes. Every product then serves two rows, and the two
// rows' scales form one vector (pair_scale) with no gather across blocks.
// A row's lanes hold the sums legacy_tile's do (values 4i..4i+3 and
// 16+4i..19+4i of a block in lane i); even and odd blocks go to separate
// accumulators, which legacy_tile keeps in a register's two halves, and
// are added in its order at the end, so that a row's product is the same
// float in any tile (decode_rows says why). An odd last block adds 0 times
// its sums to the odd accumulator, as legacy_tile's self-pairing does.
template <class T, int NW>
void decode_pairs(const uint8_t* wp, size_t stride, const BlockQ8_0* x, int64_t nb, float* out) {
  static_assert(NW % 2 == 0);
  using Block = typename T::Block;
  constexpr Form kForm = T::kForm;
  constexpr bool kSmall = requires { T::kSmallLevels; };
  const Block* w[NW];
  for (int r = 0; r < NW; ++r) w[r] = reinterpret_cast<const Block*>(wp + r * stride);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc_even[NW / 2], acc_odd[NW / 2];
  for (int i = 0; i < NW / 2; ++i) acc_even[i] = acc_odd[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256* acc = b % 2 == 0 ? acc_even : acc_odd;
    const bool odd_last = b % 2 == 0 && b + 1 == nb;
    if (b % 2 == 0)
      for (int r = 0; r < NW; ++r) prefetch_l2(w[r] + b, 2 * sizeof(Block));
    const __m256i xa = _mm256_broadcastsi128_si256(load16(x[b].q));
    const __m256i xb = _mm256_broadcastsi128_si256(load16(x[b].q + 16));
    const float dx = f16(x[b].d);
    const __m256 scales = row_scales<T, NW>(w, b, dx);
    __m256i x_off;  // offset form: kOffset * x in i16 pair sums, both halves
    __m256 x_sum;   // minimum form: the block's sum of x, over each half's 4 lanes
    if constexpr (kForm == Form::offset_q) {
      const __m256i o = _mm256_set1_epi8(T::kOffset);
      x_off = _mm256_add_epi16(_mm256_maddubs_epi16(o, xa), _mm256_maddubs_epi16(o, xb));
    }
    if constexpr (kForm == Form::min_q) {
      const __m256i one = _mm256_set1_epi8(1);
      const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(one, xa), _mm256_maddubs_epi16(one, xb));
      x_sum = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones));  // the 4 lanes of each half add up to the sum
    }
    for (int r = 0; r < NW; r += 2) {
      const Halves q = T::quants(w[r][b], w[r + 1][b]);
      __m256i p;
      if constexpr (kForm == Form::signed_q && kSmall) {
        const __m256i lo = _mm256_maddubs_epi16(_mm256_sign_epi8(q.lo, q.lo), _mm256_sign_epi8(xa, q.lo));
        const __m256i hi = _mm256_maddubs_epi16(_mm256_sign_epi8(q.hi, q.hi), _mm256_sign_epi8(xb, q.hi));
        p = _mm256_madd_epi16(_mm256_add_epi16(lo, hi), ones);
      } else if constexpr (kForm == Form::signed_q) {
        p = _mm256_add_epi32(dot_us(_mm256_sign_epi8(q.lo, q.lo), _mm256_sign_epi8(xa, q.lo)),
                             dot_us(_mm256_sign_epi8(q.hi, q.hi), _mm256_sign_epi8(xb, q.hi)));
      } else {
        __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(q.lo, xa), _mm256_maddubs_epi16(q.hi, xb));
        if constexpr (kForm == Form::offset_q) p16 = _mm256_sub_epi16(p16, x_off);
        p = _mm256_madd_epi16(p16, ones);
      }
      acc[r / 2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), pair_scale(scales, r), acc[r / 2]);
      if (odd_last) acc_odd[r / 2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_setzero_ps(), acc_odd[r / 2]);
      if constexpr (kForm == Form::min_q) {
        const __m256 m = pair_scale(f16(w[r][b].m), f16(w[r + 1][b].m));
        acc[r / 2] = _mm256_fmadd_ps(x_sum, _mm256_mul_ps(m, _mm256_set1_ps(dx)), acc[r / 2]);
        if (odd_last) acc_odd[r / 2] = _mm256_fmadd_ps(x_sum, _mm256_setzero_ps(), acc_odd[r / 2]);
      }
    }
  }
  for (int r = 0; r < NW; r += 2) {
    const __m256 sum = _mm256_add_ps(acc_even[r / 2], acc_odd[r / 2]);  // rows r | r + 1
    out[r * kTileCols] = hsum4(_mm256_castps256_ps128(sum));
    out[(r + 1) * kTileCols] = hsum4(_mm256_extractf128_ps(sum, 1));
  }
}

template <class T>
struct Legacy {
  template <int NW, int NX>
  static void rows(const uint8_t* w, size_t stride, const void* const* xq, int64_t n, float* out) {
    const BlockQ8_0* x[NX];
    for (int j = 0; j < NX; ++j) x[j] = static_cast<const BlockQ8_0*>(xq[j]);
    legacy_tile<T, NW, NX>(w, stride, x, n / kQuantBlock, out);
  }

  // Decode: q8_0 a block per row at a time (its 32 bytes are one load);
  // the nibble types two rows per register, an odd row last by the general
  // tile (measured faster for each).
  template <int NW>
  static void decode(const uint8_t* w, size_t stride, const BlockQ8_0* x, int64_t nb, float* out) {
    if constexpr (requires { T::quants32; }) {
      decode_rows<T, NW>(w, stride, x, nb, out);
    } else if constexpr (NW % 2 == 1) {
      if constexpr (NW > 1) decode_pairs<T, NW - 1>(w, stride, x, nb, out);
      legacy_tile<T, 1, 1>(w + (NW - 1) * stride, stride, &x, nb, out + (NW - 1) * kTileCols);
    } else {
      decode_pairs<T, NW>(w, stride, x, nb, out);
    }
  }

  // Decode takes the rows four at a time; wider tiles go in blocks of two
  // rows by two columns (the fewest loads and unpacks per product that the
  // 16 registers hold).
  static void tile(const void* wv, size_t stride, int nw, const void* const* xq, int nx, int64_t n, float* out) {
    const auto* w = static_cast<const uint8_t*>(wv);
    if (nx == 1) {
      const auto* x = static_cast<const BlockQ8_0*>(xq[0]);
      switch (nw) {
        case 4: decode<4>(w, stride, x, n / kQuantBlock, out); break;
        case 3: decode<3>(w, stride, x, n / kQuantBlock, out); break;
        case 2: decode<2>(w, stride, x, n / kQuantBlock, out); break;
        default: decode<1>(w, stride, x, n / kQuantBlock, out); break;
      }
      return;
    }
    for (int r = 0; r < nw; r += 2)
      for (int j = 0; j < nx; j += 2) {
        const uint8_t* wr = w + r * stride;
        float* o = out + r * kTileCols + j;
        switch ((nw - r >= 2 ? 2 : 0) + (nx - j >= 2 ? 1 : 0)) {
          case 3: rows<2, 2>(wr, stride, xq + j, n, o); break;
          case 2: rows<2, 1>(wr, stride, xq + j, n, o); break;
          case 1: rows<1, 2>(wr, stride, xq + j, n, o); break;
          default: rows<1, 1>(wr, stride, xq + j, n, o); break;
        }
      }
  }
};

constexpr QuantDotTable make_table() {
  QuantDotTable t{};
  auto set = [&t](DType d, QuantDot q) { t.by_type[static_cast<int>(d)] = q; };
  set(DType::q8_0, {ActType::q8_0, Legacy<Q8_0>::tile});
  set(DType::q4_0, {ActType::q8_0, Legacy<Q4_0>::tile});
  set(DType::q4_1, {ActType::q8_0, Legacy<Q4_1>::tile});
  set(DType::q5_0, {ActType::q8_0, Legacy<Q5_0>::tile});
  set(DType::q5_1, {ActType::q8_0, Legacy<Q5_1>::tile});
  set(DType::iq4_nl, {ActType::q8_0, Legacy<Iq4Nl>::tile});
  set(DType::mxfp4, {ActType::q8_0, Legacy<Mxfp4>::tile});
  t.quantize_q8_0 = quantize_q8_0_avx2;
  t.quantize_q8_K = quantize_q8_K_avx2;
  return t;
}

constinit const QuantDotTable kAvx2Legacy = make_table();

}  // namespace

// The 32-value types' kernels from here, the super-block types' from
// qdot_avx2_k.cpp.
const QuantDotTable& avx2_quant_table() {
  static const QuantDotTable table = [] {
    QuantDotTable t = kAvx2Legacy;
    const QuantDotTable& k = avx2_super_block_table();
    for (int i = 0; i < kDTypeCount; ++i)
      if (k.by_type[i].tile != nullptr) t.by_type[i] = k.by_type[i];
    return t;
  }();
  return table;
}

}  // namespace weft::cpu

#undef WEFT_INLINE
#undef WEFT_LAMBDA_INLINE
