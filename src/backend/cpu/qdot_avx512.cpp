// AVX-512 kernels of the quantized dot products (qdot.h), with VNNI.
//
// This file alone is compiled with -mavx512{f,bw,vl,dq,vnni}; qdot.cpp hands
// out its table only when cpu_features() reports all of them. As in
// simd_avx512.cpp, everything is in an anonymous namespace, no inline
// function or template of a shared header is used (an out-of-line copy built
// for AVX-512 could be picked by the linker for other files), and the table
// is constant-initialized.
//
// Scheme: weights are decoded to unsigned byte codes u and multiplied with
// the signed 8-bit activations by VPDPBUSD (4 products per i32 lane). Signed
// weights are shifted to unsigned (w = u - offset) and the offset is taken
// back out with the sums of x: for q8_0 blocks each lane starts at -offset *
// (sum of its x), for q8_K blocks through bsums. The K-quants' per-group
// integer scales are applied by VPDPWSSD after packing the i32 lanes to i16
// (each lane of one VPDPBUSD fits; iq4_xs's do not and use VPMULLD). Integer
// sums are exact; floats enter once per block (32-value types) or
// superblock (256-value types), so results match the generic kernels up to
// float rounding.
//
// Each tile walks its weight rows once for all its activation columns, and
// prefetches them far ahead into L2 (see kPrefetch): at one activation
// column the kernels stream weights at the memory's read bandwidth.
#include <immintrin.h>

#include <cstring>

#include "avx512_diagnostics.h"
#include "../../core/quant/blocks.h"
#include "qdot.h"

namespace weft::cpu {
namespace {

constexpr int kQ8Bytes = sizeof(BlockQ8_0);  // 34
constexpr int kQ8KBytes = sizeof(BlockQ8K);  // 292

float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}
uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
__m512i load512(const uint8_t* p) { return _mm512_loadu_si512(p); }
__m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
__m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// Decode is memory-bound, but the kernels are dense enough that the
// out-of-order window alone keeps only a few cache lines in flight (its
// scheduler fills with uops waiting on loads): each tile prefetches its rows
// this far ahead into L2, which past a row's end is the next rows or the
// next tile. Prefetches never fault; the address is formed as an integer, as
// it may lie beyond the tensor. On the 2-core Emerald Rapids VM this was
// tuned on, 1 KiB into L1 streamed at ~0.6 of the read bandwidth, 16 KiB
// into L2 at ~1.0.
constexpr int kPrefetch = 16384;
template <int Bytes>
void prefetch_ahead(const uint8_t* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) + kPrefetch;
  for (int o = 0; o < Bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(a + o), _MM_HINT_T1);
}

__m512i bytes(int v) { return _mm512_set1_epi8(static_cast<char>(v)); }
__m512i zero() { return _mm512_setzero_si512(); }
// 32 bytes in both halves.
__m512i twice(const uint8_t* p) { return _mm512_broadcast_i64x4(load256(p)); }
// Bytes 0..31 set to a, 32..63 to b.
__m512i halves(int a, int b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(a))),
                            _mm256_set1_epi8(static_cast<char>(b)), 1);
}
__m512i lanes32(const int (&v)[16]) {
  return _mm512_setr_epi32(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13],
                           v[14], v[15]);
}

// ---------------------------------------------------------------------------
// Activation quantizers: the same operations as the scalar ones in qdot.cpp
// (IEEE multiply, round in the current mode, out-of-range and NaN to 0), so
// the bytes are identical. max_ps(|x|, acc) returns acc for a NaN |x|, as
// std::max(acc, |x|) does.

__m512 abs_ps(__m512 v) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7FFFFFFF))); }

__m512i quantize16(__m512 x, __m512 scale) {
  const __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(x, scale), _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC);
  const __mmask16 ok = _mm512_cmp_ps_mask(v, _mm512_set1_ps(-127.0f), _CMP_GE_OQ) &
                       _mm512_cmp_ps_mask(v, _mm512_set1_ps(127.0f), _CMP_LE_OQ);
  return _mm512_maskz_cvtps_epi32(ok, v);
}

void quantize_q8_0(const float* x, void* out, int64_t n) {
  auto* y = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock, y += kQ8Bytes) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const __m512 m = _mm512_max_ps(abs_ps(v1), _mm512_max_ps(abs_ps(v0), _mm512_setzero_ps()));
    const float amax = _mm512_reduce_max_ps(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(y, &h, sizeof h);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 2), _mm512_cvtepi32_epi8(quantize16(v0, _mm512_set1_ps(id))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 18), _mm512_cvtepi32_epi8(quantize16(v1, _mm512_set1_ps(id))));
  }
}

void quantize_q8_K(const float* x, void* out, int64_t n) {
  auto* y = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock, y += kQ8KBytes) {
    __m512 m = _mm512_setzero_ps();
    for (int k = 0; k < 16; ++k) m = _mm512_max_ps(abs_ps(_mm512_loadu_ps(x + 16 * k)), m);
    const float amax = _mm512_reduce_max_ps(m);
    if (amax == 0.0f || !__builtin_isfinite(amax)) {
      std::memset(y, 0, kQ8KBytes);
      continue;
    }
    // The first value of largest magnitude, sign kept.
    int first = 0;
    for (int k = 0; k < 16; ++k) {
      const __mmask16 hit = _mm512_cmp_ps_mask(abs_ps(_mm512_loadu_ps(x + 16 * k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit != 0) {
        first = 16 * k + __builtin_ctz(hit);
        break;
      }
    }
    const float iscale = -127.0f / x[first];
    int16_t bsums[16];
    for (int k = 0; k < 16; ++k) {
      const __m512i q = quantize16(_mm512_loadu_ps(x + 16 * k), _mm512_set1_ps(iscale));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 4 + 16 * k), _mm512_cvtepi32_epi8(q));
      bsums[k] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    std::memcpy(y + 4 + kSuperBlock, bsums, sizeof bsums);
    const float d = 1.0f / iscale;
    std::memcpy(y, &d, sizeof d);
  }
}

// ---------------------------------------------------------------------------
// 32-value types against q8_0 activations, in chunks of 16 blocks, four
// blocks (a quad) at a time: one zmm holds values 0..15 of the quad's blocks
// (block c in 128-bit lane c), another values 16..31, so i32 lanes 4c..4c+3
// belong to block c and are scaled by its d_w * d_x. The scales of a chunk
// are gathered into one vector per row (HalfGather).

constexpr int kChunk = 16;
constexpr int kQuads = kChunk / 4;

// The 16 bytes at `Offset` of each block of a quad, block c in lane c.
template <int Bytes, int Offset>
__m512i quad_qs(const uint8_t* p) {
  __m512i v = _mm512_castsi128_si512(load128(p + Offset));
  v = _mm512_inserti32x4(v, load128(p + Bytes + Offset), 1);
  v = _mm512_inserti32x4(v, load128(p + 2 * Bytes + Offset), 2);
  return _mm512_inserti32x4(v, load128(p + 3 * Bytes + Offset), 3);
}

// The f16 scales (and minima) of 16 consecutive blocks of `Bytes` bytes, d
// at byte 0 and m at byte 2: words 0..15 of the result hold d, 16..31 m.
// Each VPERMT2W picks from a window of two 64-byte loads inside the chunk.
template <int Bytes, bool Min>
struct HalfGather {
  static constexpr int kWords = Bytes / 2;
  static constexpr int kPer = 7 * kWords + (Min ? 1 : 0) <= 63 ? 8 : 4;  // blocks per window
  static constexpr int kWindows = kChunk / kPer;
  static constexpr int kSecond = kPer * Bytes - 64 < 64 ? kPer * Bytes - 64 : 64;  // second load, bytes
  static_assert(kPer * Bytes >= 64 && 3 * kWords + 1 < 64);

  struct Tables {
    uint16_t idx[kWindows][32];
    uint32_t mask[kWindows];
  };
  static constexpr Tables make() {
    Tables t{};
    for (int w = 0; w < kWindows; ++w) {
      for (int o = 0; o < 32; ++o) {
        const int block = o % 16;
        if (block / kPer != w || (o >= 16 && !Min)) continue;
        const int word = (block - w * kPer) * kWords + (o >= 16 ? 1 : 0);
        t.idx[w][o] = static_cast<uint16_t>(word < 32 ? word : 32 + word - kSecond / 2);
        t.mask[w] |= 1u << o;
      }
    }
    return t;
  }
  static constexpr Tables kTables = make();

  static __m512i words(const uint8_t* p) {
    __m512i r = zero();
    for (int w = 0; w < kWindows; ++w) {
      const uint8_t* q = p + w * kPer * Bytes;
      const __m512i idx = _mm512_loadu_si512(kTables.idx[w]);
      r = _mm512_mask_mov_epi16(r, kTables.mask[w], _mm512_permutex2var_epi16(load512(q), idx, load512(q + kSecond)));
    }
    return r;
  }
};

__m512 low_halfs(__m512i words) { return _mm512_cvtph_ps(_mm512_castsi512_si256(words)); }
__m512 high_halfs(__m512i words) { return _mm512_cvtph_ps(_mm512_extracti64x4_epi64(words, 1)); }

// Codes of a quad: lo = values 0..15, hi = values 16..31 of each block.
struct Codes {
  __m512i lo, hi;
};

Codes split_nibbles(__m512i q) {
  return {_mm512_and_si512(q, bytes(0x0F)), _mm512_and_si512(_mm512_srli_epi16(q, 4), bytes(0x0F))};
}

// The 32 int8 values of each block of a quad (q8_0 layout), as lo / hi.
Codes quad_q8(const uint8_t* p) {
  return {quad_qs<kQ8Bytes, 2>(p), quad_qs<kQ8Bytes, 18>(p)};
}

// Weight formats. codes(p) decodes the quad at p to unsigned codes u; the
// weight is d * (u - kOffset) (+ m for kMin types).
struct Q8_0W {
  static constexpr int kBytes = 34, kOffset = 128;
  static constexpr bool kMin = false;
  static Codes codes(const uint8_t* p) {
    const Codes c = quad_q8(p);
    return {_mm512_xor_si512(c.lo, bytes(0x80)), _mm512_xor_si512(c.hi, bytes(0x80))};
  }
};
struct Q4_0W {
  static constexpr int kBytes = 18, kOffset = 8;
  static constexpr bool kMin = false;
  static Codes codes(const uint8_t* p) { return split_nibbles(quad_qs<kBytes, 2>(p)); }
};
struct Iq4NlW {
  static constexpr int kBytes = 18, kOffset = 128;
  static constexpr bool kMin = false;
  static Codes codes(const uint8_t* p) {
    const __m128i levels = _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIq4Levels)),
                                        _mm_set1_epi8(static_cast<char>(0x80)));
    const __m512i table = _mm512_broadcast_i32x4(levels);
    const Codes c = split_nibbles(quad_qs<kBytes, 2>(p));
    return {_mm512_shuffle_epi8(table, c.lo), _mm512_shuffle_epi8(table, c.hi)};
  }
};
// mxfp4: codes as iq4_nl at byte 1 of 17, under an E8M0 scale byte (kE8M0).
struct Mxfp4W {
  static constexpr int kBytes = 17, kOffset = 128;
  static constexpr bool kMin = false, kE8M0 = true;
  static Codes codes(const uint8_t* p) {
    const __m128i levels = _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kMxfp4Levels)),
                                        _mm_set1_epi8(static_cast<char>(0x80)));
    const __m512i table = _mm512_broadcast_i32x4(levels);
    const Codes c = split_nibbles(quad_qs<kBytes, 1>(p));
    return {_mm512_shuffle_epi8(table, c.lo), _mm512_shuffle_epi8(table, c.hi)};
  }
};
// The E8M0 bytes of 16 consecutive blocks as 2^(e - 128)
// (ggml_e8m0_to_fp32_half): e << 23 is 2^(e - 127) for e >= 1, halved
// exactly; e = 0 is 2^-128.
__m512 e8m0_scales(const uint8_t* p) {
  alignas(16) uint8_t e[kChunk];
  for (int i = 0; i < kChunk; ++i) e[i] = p[i * Mxfp4W::kBytes];
  const __m512i v = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(e)));
  const __m512 f = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 23)), _mm512_set1_ps(0.5f));
  return _mm512_mask_blend_ps(_mm512_cmpeq_epi32_mask(v, zero()), f, _mm512_set1_ps(0x1p-128f));
}
template <class T>
constexpr bool kE8M0Scale = requires { T::kE8M0; };  // else an f16 d at byte 0

struct Q4_1W {
  static constexpr int kBytes = 20, kOffset = 0;
  static constexpr bool kMin = true;
  static Codes codes(const uint8_t* p) { return split_nibbles(quad_qs<kBytes, 4>(p)); }
};
// q5: bit j of the 32-bit qh at byte Qh is the fifth bit of value j.
template <int Bytes, int Qh, int Offset, bool Min>
struct Q5W {
  static constexpr int kBytes = Bytes, kOffset = Offset;
  static constexpr bool kMin = Min;
  static uint64_t high_bits(const uint8_t* p, int half) {
    uint64_t m = 0;
    for (int c = 0; c < 4; ++c) {
      uint16_t h;
      std::memcpy(&h, p + c * Bytes + Qh + 2 * half, sizeof h);
      m |= static_cast<uint64_t>(h) << (16 * c);
    }
    return m;
  }
  static Codes codes(const uint8_t* p) {
    Codes c = split_nibbles(quad_qs<Bytes, Qh + 4>(p));
    c.lo = _mm512_mask_add_epi8(c.lo, _cvtu64_mask64(high_bits(p, 0)), c.lo, bytes(16));
    c.hi = _mm512_mask_add_epi8(c.hi, _cvtu64_mask64(high_bits(p, 1)), c.hi, bytes(16));
    return c;
  }
};
using Q5_0W = Q5W<22, 2, 16, false>;
using Q5_1W = Q5W<24, 4, 0, true>;

// One chunk of 16 activation blocks, prepared for weight format T.
struct XChunk {
  Codes v[kQuads];
  __m512i start[kQuads];  // -kOffset * (sum of each lane's 8 x): where each lane's dot product starts
  __m512 d;               // the 16 activation scales
  __m512 sum_d;           // kMin: sum(x) * d per block
};

// Inlined: a call per chunk (with its vzeroupper and spills) costs ~6%.
template <class T>
[[gnu::always_inline]] inline void prepare_x(const uint8_t* xb, XChunk& x) {
  __m512i sums[kQuads];
  for (int q = 0; q < kQuads; ++q) {
    x.v[q] = quad_q8(xb + 4 * q * kQ8Bytes);
    if constexpr (T::kOffset != 0) {
      const __m512i off = bytes(T::kOffset);
      x.start[q] = _mm512_sub_epi32(zero(), _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero(), off, x.v[q].lo), off, x.v[q].hi));
    }
    if constexpr (T::kMin) sums[q] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero(), bytes(1), x.v[q].lo), bytes(1), x.v[q].hi);
  }
  x.d = low_halfs(HalfGather<kQ8Bytes, false>::words(xb));
  if constexpr (T::kMin) {
    // Block 4q + c's sum is spread over lanes 4c..4c+3 of sums[q]: reduce
    // to lane 4c + q, then put block b in lane b.
    const __m512i w0 = _mm512_add_epi32(_mm512_unpacklo_epi32(sums[0], sums[1]), _mm512_unpackhi_epi32(sums[0], sums[1]));
    const __m512i w1 = _mm512_add_epi32(_mm512_unpacklo_epi32(sums[2], sums[3]), _mm512_unpackhi_epi32(sums[2], sums[3]));
    const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(w0, w1), _mm512_unpackhi_epi64(w0, w1));
    const __m512i s = _mm512_permutexvar_epi32(lanes32({0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}), u);
    x.sum_d = _mm512_mul_ps(_mm512_cvtepi32_ps(s), x.d);
  }
}

// acc[r][j] += the chunk's share of w_r . x_j. Rows are interleaved quad by
// quad so that their independent chains overlap.
// valid: the chunk's blocks that count (a row's last blocks: the lanes past
// it are masked off, so whatever weight bytes lie there, an inf or NaN
// scale included, add nothing).
template <class T, int NW, int NX, bool Prefetch = true>
void legacy_chunk(const uint8_t* w, size_t stride, const uint8_t* const* xb, __m512 (&acc)[NW][NX],
                  __mmask16 valid = 0xFFFF) {
  XChunk x[NX];
  for (int j = 0; j < NX; ++j) prepare_x<T>(xb[j], x[j]);
  __m512 ds[NW][NX];
  for (int r = 0; r < NW; ++r) {
    if constexpr (Prefetch) prefetch_ahead<kChunk * T::kBytes>(w + r * stride);
    __m512i dm = zero();  // f16 words: 0..15 the scales, 16..31 the minima (kMin)
    __m512 dw;
    if constexpr (kE8M0Scale<T>) {
      dw = e8m0_scales(w + r * stride);
    } else {
      dm = HalfGather<T::kBytes, T::kMin>::words(w + r * stride);
      dw = low_halfs(dm);
    }
    for (int j = 0; j < NX; ++j) ds[r][j] = _mm512_maskz_mul_ps(valid, dw, x[j].d);
    if constexpr (T::kMin) {
      const __m512 mw = _mm512_maskz_mov_ps(valid, high_halfs(dm));
      for (int j = 0; j < NX; ++j) acc[r][j] = _mm512_fmadd_ps(mw, x[j].sum_d, acc[r][j]);
    }
  }
  for (int q = 0; q < kQuads; ++q) {
    const __m512i quad = _mm512_add_epi32(_mm512_set1_epi32(4 * q), lanes32({0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}));
    for (int r = 0; r < NW; ++r) {
      const Codes u = T::codes(w + r * stride + 4 * q * T::kBytes);
      for (int j = 0; j < NX; ++j) {
        __m512i s = T::kOffset != 0 ? x[j].start[q] : zero();
        s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s, u.lo, x[j].v[q].lo), u.hi, x[j].v[q].hi);
        acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_permutexvar_ps(quad, ds[r][j]), acc[r][j]);
      }
    }
  }
}

template <class T>
struct Legacy {
  template <int NW, int NX>
  static void run(const uint8_t* w, size_t stride, const void* const* xq, int64_t n, float* out) {
    const int64_t nb = n / kQuantBlock;
    __m512 acc[NW][NX];
    for (int r = 0; r < NW; ++r)
      for (int j = 0; j < NX; ++j) acc[r][j] = _mm512_setzero_ps();
    const uint8_t* xb[NX];
    int64_t b = 0;
    for (; b + kChunk <= nb; b += kChunk) {
      for (int j = 0; j < NX; ++j) xb[j] = static_cast<const uint8_t*>(xq[j]) + b * kQ8Bytes;
      legacy_chunk<T, NW, NX>(w + b * T::kBytes, stride, xb, acc);
    }
    if (b < nb) tail_chunk<NW, NX>(w, stride, xq, b, nb - b, acc);
    for (int r = 0; r < NW; ++r)
      for (int j = 0; j < NX; ++j) out[r * kTileCols + j] = _mm512_reduce_add_ps(acc[r][j]);
  }

 private:
  // A row's last `tail` blocks (fewer than a chunk) from block b: the
  // activations zero-padded to a chunk, the lanes past the tail masked off.
  // A chunk read from a row's tail runs on into the rows after it: where
  // those are rows of this tile (every row but the last, when the
  // overhang is within a row's stride) the weights are read in place; the
  // rest are copied, never read past the tile.
  template <int NW, int NX>
  static void tail_chunk(const uint8_t* w, size_t stride, const void* const* xq, int64_t b, int64_t tail,
                         __m512 (&acc)[NW][NX]) {
    const auto n = static_cast<size_t>(tail);
    alignas(64) uint8_t xpad[NX][kChunk * kQ8Bytes];
    const uint8_t* xb[NX];
    for (int j = 0; j < NX; ++j) {
      std::memcpy(xpad[j], static_cast<const uint8_t*>(xq[j]) + b * kQ8Bytes, n * kQ8Bytes);
      std::memset(xpad[j] + n * kQ8Bytes, 0, (kChunk - n) * kQ8Bytes);
      xb[j] = xpad[j];
    }
    const auto valid = static_cast<__mmask16>((1u << n) - 1);
    const uint8_t* wt = w + b * T::kBytes;
    int first_copied = 0;
    if constexpr (NW > 1) {
      if ((kChunk - n) * T::kBytes <= stride) {
        legacy_chunk<T, NW - 1, NX, false>(wt, stride, xb, reinterpret_cast<__m512(&)[NW - 1][NX]>(acc), valid);
        first_copied = NW - 1;
      }
    }
    alignas(64) uint8_t wpad[NW][kChunk * T::kBytes];
    for (int r = first_copied; r < NW; ++r) {
      std::memcpy(wpad[r - first_copied], wt + r * stride, n * T::kBytes);
      std::memset(wpad[r - first_copied] + n * T::kBytes, 0, (kChunk - n) * T::kBytes);
    }
    if (first_copied == NW - 1) {
      legacy_chunk<T, 1, NX, false>(wpad[0], sizeof wpad[0], xb, reinterpret_cast<__m512(&)[1][NX]>(acc[NW - 1]),
                                    valid);
    } else {
      legacy_chunk<T, NW, NX, false>(wpad[0], sizeof wpad[0], xb, acc, valid);
    }
  }
};

// ---------------------------------------------------------------------------
// 256-value types against q8_K activations, one superblock at a time. Each
// format decodes a superblock into four zmm of codes u[k] in the order its
// bytes give them; the activations are rearranged to match (Arrange), once
// per column for all rows of the tile.

struct XSuper {
  __m512i v[4];
  __m256i bsums;  // 16 x i16
  float d;
};

enum class Arrange {
  natural,   // v[k] = x[64k .. 64k + 63]
  pairs32,   // v[k] = 32-value groups (0, 2), (1, 3), (4, 6), (5, 7)
  quarters,  // v[s] = x[32s .. 32s + 31], x[128 + 32s .. 128 + 32s + 31]
  halves16,  // v[2h + i]: values 16i .. 16i + 15 of 32-value groups 4h .. 4h + 3
};

template <Arrange A>
void prepare_super(const uint8_t* xb, XSuper& x) {
  const __m512i x0 = load512(xb + 4), x1 = load512(xb + 68), x2 = load512(xb + 132), x3 = load512(xb + 196);
  if constexpr (A == Arrange::natural) {
    x.v[0] = x0, x.v[1] = x1, x.v[2] = x2, x.v[3] = x3;
  } else if constexpr (A == Arrange::pairs32) {
    x.v[0] = _mm512_shuffle_i64x2(x0, x1, 0x44), x.v[1] = _mm512_shuffle_i64x2(x0, x1, 0xEE);
    x.v[2] = _mm512_shuffle_i64x2(x2, x3, 0x44), x.v[3] = _mm512_shuffle_i64x2(x2, x3, 0xEE);
  } else if constexpr (A == Arrange::quarters) {
    x.v[0] = _mm512_shuffle_i64x2(x0, x2, 0x44), x.v[1] = _mm512_shuffle_i64x2(x0, x2, 0xEE);
    x.v[2] = _mm512_shuffle_i64x2(x1, x3, 0x44), x.v[3] = _mm512_shuffle_i64x2(x1, x3, 0xEE);
  } else {
    x.v[0] = _mm512_shuffle_i64x2(x0, x1, 0x88), x.v[1] = _mm512_shuffle_i64x2(x0, x1, 0xDD);
    x.v[2] = _mm512_shuffle_i64x2(x2, x3, 0x88), x.v[3] = _mm512_shuffle_i64x2(x2, x3, 0xDD);
  }
  x.bsums = load256(xb + 4 + kSuperBlock);
  x.d = load_f32(xb);
}

// A decoded weight superblock.
struct WSuper {
  __m512i u[4];
  __m512i sc[2];   // i16 scales of pack(dot(u0), dot(u1)) and pack(dot(u2), dot(u3))
  __m256i groups;  // i16 per 16-value group: the minimum (kMin) or the signed scale (offset types)
  __m128 dm;       // d, dmin in lanes 0, 1
};

// d and dmin from the f16 pair at p (lanes 0, 1).
__m128 f16_pair(const uint8_t* p) { return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(p)))); }
// The f16 at p + 2 in lane 0 (without reading past it).
__m128 f16_after(const uint8_t* p) { return _mm_movehdup_ps(f16_pair(p)); }

// The integer part of one superblock's product: sum over groups of scale *
// dot(u, x), lanes to be added up. Each i32 lane of one VPDPBUSD fits in 16
// bits, so the four dot products are packed to i16 in pairs and two
// VPDPWSSD apply the scales.
__m512i scaled_dots(const __m512i (&u)[4], const __m512i (&sc)[2], const XSuper& x) {
  __m512i p[4];
  for (int k = 0; k < 4; ++k) p[k] = _mm512_dpbusd_epi32(zero(), u[k], x.v[k]);
  const __m512i s = _mm512_dpwssd_epi32(zero(), _mm512_packs_epi32(p[0], p[1]), sc[0]);
  return _mm512_dpwssd_epi32(s, _mm512_packs_epi32(p[2], p[3]), sc[1]);
}

// acc += s * (d * dx) [- m * (dmin * dx)].
void scale_into(__m512i s, __m256i m, __m128 dm, float dx, __m512& acc) {
  const __m128 f = _mm_mul_ps(dm, _mm_set1_ps(dx));
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_broadcastss_ps(f), acc);
  acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_zextsi256_si512(m)),
                         _mm512_permutexvar_ps(_mm512_set1_epi32(1), _mm512_castps128_ps512(f)), acc);
}

// Types with minima: d * dot - dmin * sum(min * x).
void dot_with_min(const WSuper& w, const XSuper& x, __m512& acc) {
  scale_into(scaled_dots(w.u, w.sc, x), _mm256_madd_epi16(x.bsums, w.groups), w.dm, x.d, acc);
}

// Types with an offset: d * sum(scale * (dot - Offset * bsum)).
template <int Shift>
void dot_with_offset(const WSuper& w, const XSuper& x, __m512& acc) {
  const __m256i c = _mm256_slli_epi32(_mm256_madd_epi16(x.bsums, w.groups), Shift);
  const __m512i s = _mm512_sub_epi32(scaled_dots(w.u, w.sc, x), _mm512_zextsi256_si512(c));
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_broadcastss_ps(_mm_mul_ps(w.dm, _mm_set1_ps(x.d))), acc);
}

// The packed scale vectors from 16 i16 group scales (words 0..15 of s16):
// lane chunk c of u[k] holds group g[k][c]; after packing, chunk c of
// sc[h] takes g[2h][c] in i16 lanes 0..3 and g[2h + 1][c] in 4..7.
void pack_scales(__m512i s16, const int (&g)[4][4], __m512i (&sc)[2]) {
  for (int h = 0; h < 2; ++h) {
    alignas(64) int16_t idx[32];
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 8; ++i) idx[8 * c + i] = static_cast<int16_t>(g[2 * h + i / 4][c]);
    sc[h] = _mm512_permutexvar_epi16(_mm512_load_si512(idx), s16);
  }
}

// VPSHUFB control taking, in every 128-bit lane c, i16 lanes 0..3 from byte
// a[c] and 4..7 from byte b[c] of the same lane, zero-extended.
__m512i widen_ctrl(const int (&a)[4], const int (&b)[4]) {
  alignas(64) int8_t c[64];
  for (int l = 0; l < 4; ++l)
    for (int i = 0; i < 8; ++i) {
      c[16 * l + 2 * i] = static_cast<int8_t>(i < 4 ? a[l] : b[l]);
      c[16 * l + 2 * i + 1] = -128;  // zero
    }
  return _mm512_load_si512(c);
}

// q4_K / q5_K: 8 groups of 32, 6-bit scales and minima. qs byte l of 64-byte
// row half h holds group 2h's value l (low nibble) and group 2h + 1's (high).
// The four dot products are packed to i16 in pairs (each lane fits), so two
// VPDPWSSD apply the eight scales.
template <bool Five>
struct QK45 {
  static constexpr int kBytes = Five ? 176 : 144;
  static constexpr Arrange kArrange = Arrange::pairs32;
  struct W {
    __m512i u[4];
    __m512i sc[2];   // i16 scales of pack(u0, u1) and pack(u2, u3)
    __m256i mins;    // i16: m0 m0 m1 m1 ... per 16 values
    __m128 dm;
  };
  static void decode(const uint8_t* b, W& w) {
    const uint8_t* qs = b + (Five ? 48 : 16);
    const __m512i lo = load512(qs), hi = load512(qs + 64);
    w.u[0] = _mm512_and_si512(lo, bytes(0x0F));  // groups 0 | 2
    w.u[1] = _mm512_and_si512(_mm512_srli_epi16(lo, 4), bytes(0x0F));  // 1 | 3
    w.u[2] = _mm512_and_si512(hi, bytes(0x0F));  // 4 | 6
    w.u[3] = _mm512_and_si512(_mm512_srli_epi16(hi, 4), bytes(0x0F));  // 5 | 7
    if constexpr (Five) {  // bit g of qh[l]: the fifth bit of group g's value l
      const __m512i qh = twice(b + 16);
      const int bit[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
      for (int k = 0; k < 4; ++k) {
        const __mmask64 high = _mm512_test_epi8_mask(qh, halves(1 << bit[k][0], 1 << bit[k][1]));
        w.u[k] = _mm512_mask_add_epi8(w.u[k], high, w.u[k], bytes(16));
      }
    }
    // Unpack the 12 scale bytes p to sc[0..7], m[0..7] (ggml's get_scale_min_k4):
    // dwords out = (p0..3 & 63, p8..11 & 15 | (p0..3 >> 6) << 4, p4..7 & 63, p8..11 >> 4 | (p4..7 >> 6) << 4).
    const __m128i p = load128(b + 4);
    const __m128i a = _mm_srlv_epi32(_mm_shuffle_epi32(p, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4));
    const __m128i top = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(p, _MM_SHUFFLE(1, 1, 0, 0)), 2),
                                      _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    const __m512i s8 = _mm512_broadcast_i32x4(
        _mm_or_si128(_mm_and_si128(a, _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F)), top));
    // pack(P0, P1) lane chunks: P0 then P1 lanes; chunks 0, 1 hold groups 0 and 1, chunks 2, 3 groups 2 and 3.
    w.sc[0] = _mm512_shuffle_epi8(s8, widen_ctrl({0, 0, 2, 2}, {1, 1, 3, 3}));
    w.sc[1] = _mm512_shuffle_epi8(s8, widen_ctrl({4, 4, 6, 6}, {5, 5, 7, 7}));
    w.mins = _mm256_shuffle_epi8(_mm512_castsi512_si256(s8),
                                 _mm256_setr_epi8(8, -128, 8, -128, 9, -128, 9, -128, 10, -128, 10, -128, 11, -128, 11, -128,
                                                  12, -128, 12, -128, 13, -128, 13, -128, 14, -128, 14, -128, 15, -128, 15, -128));
    w.dm = f16_pair(b);
  }
  static void dot(const W& w, const XSuper& x, __m512& acc) {
    scale_into(scaled_dots(w.u, w.sc, x), _mm256_madd_epi16(x.bsums, w.mins), w.dm, x.d, acc);
  }
};

// q6_K: 16 groups of 16, signed 8-bit scales, value = d * sc * (q - 32).
// Row half h: ql[64h + l] low nibbles are values 128h + l, high 128h + 64 + l
// (l < 64); qh[32h + l] bits 2i..2i+1 are the top bits of value 128h + 32i + l.
struct Q6K {
  static constexpr int kBytes = 210;
  static constexpr Arrange kArrange = Arrange::natural;
  using W = WSuper;
  static void decode(const uint8_t* b, WSuper& w) {
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = load512(b + 64 * h);
      const __m512i qh = twice(b + 128 + 32 * h);
      const __m512i top_a = _mm512_sllv_epi64(_mm512_and_si512(qh, halves(0x03, 0x0C)), _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4));
      const __m512i top_b = _mm512_srlv_epi64(_mm512_and_si512(qh, halves(0x30, 0xC0)), _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0));
      // (A & C) | B with C = 0x0F
      w.u[2 * h] = _mm512_ternarylogic_epi32(ql, top_a, bytes(0x0F), 0xEC);
      w.u[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), top_b, bytes(0x0F), 0xEC);
    }
    w.groups = _mm256_cvtepi8_epi16(load128(b + 192));
    pack_scales(_mm512_castsi256_si512(w.groups), {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}, w.sc);
    w.dm = f16_after(b + 206);
  }
  static void dot(const WSuper& w, const XSuper& x, __m512& acc) { dot_with_offset<5>(w, x, acc); }
};

// q2_K / q3_K: 2-bit quants, qs byte l of 32-byte half h holds values
// 128h + 32i + l at bits 2i..2i+1. Lane chunks of u[s]: groups 2s, 2s + 1,
// 8 + 2s, 9 + 2s.
constexpr int kQuarterGroups[4][4] = {{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}};

void two_bit_codes(const uint8_t* qs, __m512i (&u)[4]) {
  const __m512i q = load512(qs);
  for (int s = 0; s < 4; ++s) u[s] = _mm512_and_si512(_mm512_srli_epi16(q, 2 * s), bytes(3));
}

// q2_K: value = d * (sc & 15) * q - dmin * (sc >> 4).
struct Q2K {
  static constexpr int kBytes = 84;
  static constexpr Arrange kArrange = Arrange::quarters;
  using W = WSuper;
  static void decode(const uint8_t* b, WSuper& w) {
    two_bit_codes(b + 16, w.u);
    const __m128i sc = load128(b);
    pack_scales(_mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(sc, _mm_set1_epi8(0x0F)))), kQuarterGroups, w.sc);
    w.groups = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0x0F)));
    w.dm = f16_pair(b + 80);
  }
  static void dot(const WSuper& w, const XSuper& x, __m512& acc) { dot_with_min(w, x, acc); }
};

// q3_K: value = d * sc * (q - 4), q = low 2 bits + 4 * hmask bit, sc a
// signed 6-bit scale: low 4 bits in bytes 0..7 (groups 0..7 low nibble, 8..15
// high), top 2 bits of group j in byte 8 + j % 4 at bits 2 * (j / 4).
struct Q3K {
  static constexpr int kBytes = 110;
  static constexpr Arrange kArrange = Arrange::quarters;
  using W = WSuper;
  static void decode(const uint8_t* b, WSuper& w) {
    two_bit_codes(b + 32, w.u);
    const __m512i hm = twice(b);  // bit (v / 32) of hmask[v % 32]
    for (int s = 0; s < 4; ++s) {
      const __mmask64 high = _mm512_test_epi8_mask(hm, halves(1 << s, 1 << (s + 4)));
      w.u[s] = _mm512_mask_add_epi8(w.u[s], high, w.u[s], bytes(4));
    }
    const __m128i p = _mm_maskz_loadu_epi8(0x0FFF, b + 96);
    const __m128i low = _mm_and_si128(_mm_unpacklo_epi64(p, _mm_srli_epi16(p, 4)), _mm_set1_epi8(0x0F));
    const __m128i top = _mm_shuffle_epi8(p, _mm_setr_epi8(8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11));
    const __m128i top2 = _mm_and_si128(_mm_srlv_epi16(top, _mm_setr_epi16(0, 0, 2, 2, 4, 4, 6, 6)), _mm_set1_epi8(3));
    const __m128i sc = _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(top2, 4)), _mm_set1_epi8(32));
    w.groups = _mm256_cvtepi8_epi16(sc);
    pack_scales(_mm512_castsi256_si512(w.groups), kQuarterGroups, w.sc);
    w.dm = f16_after(b + 106);
  }
  static void dot(const WSuper& w, const XSuper& x, __m512& acc) { dot_with_offset<2>(w, x, acc); }
};

// iq4_xs: 8 groups of 32 coded like iq4_nl (qs[16g + l]: value l low nibble,
// 16 + l high) with 6-bit scales ls - 32. The codes (level + 128) reach 241,
// too wide for the 16-bit scale step: the group scales multiply i32 lanes.
struct Iq4Xs {
  static constexpr int kBytes = 136;
  static constexpr Arrange kArrange = Arrange::halves16;
  using W = WSuper;
  static void decode(const uint8_t* b, WSuper& w) {
    const __m512i table = _mm512_broadcast_i32x4(
        _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIq4Levels)), _mm_set1_epi8(static_cast<char>(0x80))));
    for (int h = 0; h < 2; ++h) {
      const __m512i q = load512(b + 8 + 64 * h);  // groups 4h .. 4h + 3, one per lane chunk
      w.u[2 * h] = _mm512_shuffle_epi8(table, _mm512_and_si512(q, bytes(0x0F)));
      w.u[2 * h + 1] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), bytes(0x0F)));
    }
    // Spread the 4-bit low parts (nibble g of scales_l) and 2-bit high parts
    // (bits 2g of scales_h) of the 8 scales to one byte each.
    uint64_t lo = load_u32(b + 4);
    lo = (lo | lo << 16) & 0x0000FFFF0000FFFFull;
    lo = (lo | lo << 8) & 0x00FF00FF00FF00FFull;
    lo = (lo | lo << 4) & 0x0F0F0F0F0F0F0F0Full;
    uint16_t sh;
    std::memcpy(&sh, b + 2, sizeof sh);
    uint64_t hi = sh;
    hi = (hi | hi << 24) & 0x000000FF000000FFull;
    hi = (hi | hi << 12) & 0x000F000F000F000Full;
    hi = (hi | hi << 6) & 0x0303030303030303ull;
    const __m128i ls = _mm_sub_epi8(_mm_cvtsi64_si128(static_cast<long long>(lo | hi << 4)), _mm_set1_epi8(32));
    const __m512i g32 = _mm512_cvtepi8_epi32(ls);
    w.sc[0] = _mm512_permutexvar_epi32(lanes32({0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}), g32);
    w.sc[1] = _mm512_permutexvar_epi32(lanes32({4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7}), g32);
    w.groups = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(ls, ls));  // per 16 values
    w.dm = f16_pair(b);
  }
  static void dot(const WSuper& w, const XSuper& x, __m512& acc) {
    __m512i t[2];
    for (int h = 0; h < 2; ++h)
      t[h] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero(), w.u[2 * h], x.v[2 * h]), w.u[2 * h + 1], x.v[2 * h + 1]);
    const __m512i s = _mm512_add_epi32(_mm512_mullo_epi32(t[0], w.sc[0]), _mm512_mullo_epi32(t[1], w.sc[1]));
    const __m256i c = _mm256_slli_epi32(_mm256_madd_epi16(x.bsums, w.groups), 7);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(s, _mm512_zextsi256_si512(c))),
                          _mm512_broadcastss_ps(_mm_mul_ps(w.dm, _mm_set1_ps(x.d))), acc);
  }
};

template <class T>
struct KQuant {
  template <int NW, int NX>
  static void run(const uint8_t* w, size_t stride, const void* const* xq, int64_t n, float* out) {
    __m512 acc[NW][NX];
    for (int r = 0; r < NW; ++r)
      for (int j = 0; j < NX; ++j) acc[r][j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / kSuperBlock; ++b) {
      XSuper x[NX];
      for (int j = 0; j < NX; ++j) prepare_super<T::kArrange>(static_cast<const uint8_t*>(xq[j]) + b * kQ8KBytes, x[j]);
      for (int r = 0; r < NW; ++r) {
        typename T::W ws;
        prefetch_ahead<T::kBytes>(w + r * stride + b * T::kBytes);
        T::decode(w + r * stride + b * T::kBytes, ws);
        for (int j = 0; j < NX; ++j) T::dot(ws, x[j], acc[r][j]);
      }
    }
    for (int r = 0; r < NW; ++r)
      for (int j = 0; j < NX; ++j) out[r * kTileCols + j] = _mm512_reduce_add_ps(acc[r][j]);
  }
};

// ---------------------------------------------------------------------------

template <class K, int NW>
void tile_rows(const uint8_t* w, size_t stride, const void* const* xq, int nx, int64_t n, float* out) {
  switch (nx) {
    case 1: K::template run<NW, 1>(w, stride, xq, n, out); break;
    case 2: K::template run<NW, 2>(w, stride, xq, n, out); break;
    case 3: K::template run<NW, 3>(w, stride, xq, n, out); break;
    default: K::template run<NW, 4>(w, stride, xq, n, out); break;
  }
}

template <class K>
void tile(const void* wv, size_t stride, int nw, const void* const* xq, int nx, int64_t n, float* out) {
  const auto* w = static_cast<const uint8_t*>(wv);
  switch (nw) {
    case 1: tile_rows<K, 1>(w, stride, xq, nx, n, out); break;
    case 2: tile_rows<K, 2>(w, stride, xq, nx, n, out); break;
    case 3: tile_rows<K, 3>(w, stride, xq, nx, n, out); break;
    default: tile_rows<K, 4>(w, stride, xq, nx, n, out); break;
  }
}

constexpr QuantDotTable make_table() {
  QuantDotTable t{};
  auto set = [&t](DType d, ActType a, QuantTileFn f) { t.by_type[static_cast<int>(d)] = {a, f}; };
  set(DType::q8_0, ActType::q8_0, tile<Legacy<Q8_0W>>);
  set(DType::q4_0, ActType::q8_0, tile<Legacy<Q4_0W>>);
  set(DType::q4_1, ActType::q8_0, tile<Legacy<Q4_1W>>);
  set(DType::q5_0, ActType::q8_0, tile<Legacy<Q5_0W>>);
  set(DType::q5_1, ActType::q8_0, tile<Legacy<Q5_1W>>);
  set(DType::iq4_nl, ActType::q8_0, tile<Legacy<Iq4NlW>>);
  set(DType::mxfp4, ActType::q8_0, tile<Legacy<Mxfp4W>>);
  set(DType::q2_K, ActType::q8_K, tile<KQuant<Q2K>>);
  set(DType::q3_K, ActType::q8_K, tile<KQuant<Q3K>>);
  set(DType::q4_K, ActType::q8_K, tile<KQuant<QK45<false>>>);
  set(DType::q5_K, ActType::q8_K, tile<KQuant<QK45<true>>>);
  set(DType::q6_K, ActType::q8_K, tile<KQuant<Q6K>>);
  set(DType::iq4_xs, ActType::q8_K, tile<KQuant<Iq4Xs>>);
  t.quantize_q8_0 = quantize_q8_0;
  t.quantize_q8_K = quantize_q8_K;
  return t;
}

constinit const QuantDotTable kTable = make_table();

}  // namespace

const QuantDotTable& avx512_quant_table() { return kTable; }

}  // namespace weft::cpu
