// AVX2 kernels of the quantized dot products (qdot.h) for the 256-value
// super-block types (q2_K ... q6_K, iq4_xs) against q8_K activations: the
// quants unpacked to bytes, maddubs / madd to exact i32 sums per group,
// weighted by the groups' integer scales in i32; offsets and minimums from
// the activations' bsums. Decode takes one weight row at a time. The helpers
// are qdot_avx2_common.h's; the 32-value types are in qdot_avx2.cpp.
#include <immintrin.h>

#include <cstring>

#include "qdot_avx2_common.h"

namespace weft::cpu {
namespace {

// The 8 integer scales of 32-value groups as i16, in group order, in both
// 128-bit lanes: scale g in every i16 is one pshufb. (Kept in memory and
// broadcast from there, as this once did, each block's scales were stored
// and read back at once: the reads wait for the stores, and the kernel ran
// at 0.7 of its speed now.)
WEFT_INLINE __m256i splat_scale(__m256i scales16, int g) {
  return _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * g)));
}

// The 16 integer scales of 16-value groups, as i32 (s, s) in registers:
// lo holds groups 0-3 | 8-11, hi 4-7 | 12-15 (unpack works within lanes).
struct PairScales {
  __m256i lo, hi;

  explicit PairScales(__m256i v) : lo(_mm256_unpacklo_epi16(v, v)), hi(_mm256_unpackhi_epi16(v, v)) {}
  // Scale 2p in the low lane, 2p + 1 in the high lane: a register of 32
  // values spans groups 2p and 2p + 1.
  WEFT_INLINE __m256i pair(int p) const {
    const int e = p / 4 * 4 + p % 2 * 2;
    return _mm256_permutevar8x32_epi32(p % 4 < 2 ? lo : hi, _mm256_setr_epi32(e, e, e, e, e + 1, e + 1, e + 1, e + 1));
  }
};

// ---------------------------------------------------------------------------
// 256-value super-blocks against q8_K activations. Per column, sub-block
// products are weighted by their integer scales in i32 (sum), offsets and
// minimums come from the bsums.

// q4_K / q5_K: the 8 six-bit scales (bytes 0..7) and mins (bytes 8..15)
// packed in 12 bytes (get_scale_min_k4 for all j at once).
// (Three words, not an array: GCC copies an array through the stack, and
// the reads of that copy wait for its writes.)
WEFT_INLINE __m128i scales_k4(const uint8_t* p) {
  uint32_t a0, a1, a2;
  std::memcpy(&a0, p, 4);
  std::memcpy(&a1, p + 4, 4);
  std::memcpy(&a2, p + 8, 4);
  constexpr uint32_t k6 = 0x3F3F3F3F, k4 = 0x0F0F0F0F, k2 = 0x03030303;
  const uint64_t sc = (a0 & k6) | static_cast<uint64_t>((a2 & k4) | (((a0 >> 6) & k2) << 4)) << 32;
  const uint64_t m = (a1 & k6) | static_cast<uint64_t>(((a2 >> 4) & k4) | (((a1 >> 6) & k2) << 4)) << 32;
  return from_u64(sc, m);
}

// The two f16 at p (d and dmin of a K-quant block) times dx: d * dx in
// every lane of *dd, dmin * dx in *dm.
WEFT_INLINE void scales_d_dmin(const void* p, float dx, __m256* dd, __m256* dm) {
  uint32_t h;
  std::memcpy(&h, p, sizeof h);
  const __m256 v =
      _mm256_castps128_ps256(_mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h))), _mm_set1_ps(dx)));
  *dd = _mm256_broadcastss_ps(_mm256_castps256_ps128(v));
  *dm = _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(1));
}

// A pshufb table: 16 at the 4-bit indices with bit k set, else 0.
WEFT_INLINE __m256i bit_to_16(int k) {
  alignas(16) int8_t t[16];
  for (int i = 0; i < 16; ++i) t[i] = static_cast<int8_t>((i >> k) & 1 ? 16 : 0);
  return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(t)));
}

// q4_K and q5_K: 8 groups of 32, value = d * sc * q - dmin * m. Bytes
// 32c..32c+31 of qs hold groups 2c (low nibbles) and 2c + 1 (high); q5_K's
// fifth bit of group g is bit g of qh[0..31].
template <class B, bool kFifthBit>
struct K4 {
  using Block = B;
  using Act = BlockQ8K;

  template <int NX>
  WEFT_INLINE static void block(const Block& w, const Act* const* x, int64_t b, __m256* acc) {
    const __m128i sm = scales_k4(w.scales);
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));  // splat_scale's form
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));  // m_g at i16 2g, 2g + 1
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i hb_lo, hb_hi;  // the nibbles of qh: the fifth bits of groups 0-3 and 4-7
    if constexpr (kFifthBit) {
      const __m256i hb = load32(w.qh);
      hb_lo = _mm256_and_si256(hb, m4);
      hb_hi = _mm256_and_si256(_mm256_srli_epi16(hb, 4), m4);
    }
    __m256i sum[NX];
    for (int j = 0; j < NX; ++j) sum[j] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i bytes = load32(w.qs + 32 * c);
      __m256i lo = _mm256_and_si256(bytes, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), m4);
      if constexpr (kFifthBit) {  // 16 where bit 2c (2c + 1) of qh is set, looked up by nibble
        const __m256i nib = c < 2 ? hb_lo : hb_hi;
        lo = _mm256_or_si256(lo, _mm256_shuffle_epi8(bit_to_16(2 * c % 4), nib));
        hi = _mm256_or_si256(hi, _mm256_shuffle_epi8(bit_to_16(2 * c % 4 + 1), nib));
      }
      const __m256i s_lo = splat_scale(sc16, 2 * c), s_hi = splat_scale(sc16, 2 * c + 1);
      for (int j = 0; j < NX; ++j) {
        const int8_t* xq = x[j][b].qs + 64 * c;
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load32(xq)), s_lo);
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load32(xq + 32)), s_hi);
        sum[j] = _mm256_add_epi32(sum[j], _mm256_add_epi32(p_lo, p_hi));
      }
    }
    for (int j = 0; j < NX; ++j) {
      const Act& xb = x[j][b];
      const __m256i mx = _mm256_madd_epi16(load32(xb.bsums), mins);  // sum of m_g * (sum of x in g)
      __m256 dd, dm;
      scales_d_dmin(&w.d, xb.d, &dd, &dm);
      // One addition on the accumulator's chain per block (two FMAs in a
      // row made the chain the bound of decode: 8 cycles a block).
      const __m256 t = _mm256_fmsub_ps(_mm256_cvtepi32_ps(sum[j]), dd, _mm256_mul_ps(_mm256_cvtepi32_ps(mx), dm));
      acc[j] = _mm256_add_ps(acc[j], t);
    }
  }
};

// q2_K, q3_K and q6_K: 16 groups of 16. Bytes l of each 32-byte run of the
// low bits hold values l, l + 32, l + 64, l + 96 of a 128-value half; a
// register of 32 values spans groups 2p (low lane) and 2p + 1 (high lane).
// The scales (i16, in group order) weight the products; the offset (q3_K:
// 4, q6_K: 32) is taken off through the bsums, q2_K's minimums likewise.
struct Q2K {
  using Block = wq::BlockQ2_K;
  using Act = BlockQ8K;

  template <int NX>
  WEFT_INLINE static void block(const Block& w, const Act* const* x, int64_t b, __m256* acc) {
    const __m128i packed = load16(w.scales);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const PairScales sc(_mm256_cvtepu8_epi16(_mm_and_si128(packed, m4)));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
    __m256i sum[NX];
    for (int j = 0; j < NX; ++j) sum[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i bits = load32(w.qs + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {  // bits moves down two per k; higher bytes' bits stay above bit 1
        const __m256i q = _mm256_and_si256(bits, _mm256_set1_epi8(3));
        bits = _mm256_srli_epi16(bits, 2);
        const __m256i s = sc.pair(4 * h + k);
        for (int j = 0; j < NX; ++j) {
          const __m256i p = _mm256_maddubs_epi16(q, load32(x[j][b].qs + 128 * h + 32 * k));
          sum[j] = _mm256_add_epi32(sum[j], _mm256_madd_epi16(p, s));
        }
      }
    }
    for (int j = 0; j < NX; ++j) {
      const Act& xb = x[j][b];
      const __m256i mx = _mm256_madd_epi16(load32(xb.bsums), mins);
      __m256 dd, dm;
      scales_d_dmin(&w.d, xb.d, &dd, &dm);
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[j]), dd, acc[j]);
      acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mx), dm, acc[j]);
    }
  }
};

// q3_K's 16 signed six-bit scales: low four bits in bytes 0..7 (nibble g / 8
// of byte g % 8), the high two in bytes 8..11 (bits 2 (g / 4) of byte 8 + g % 4).
WEFT_INLINE __m128i scales_q3(const uint8_t* p) {
  uint32_t a[3];
  std::memcpy(a, p, sizeof a);
  constexpr uint32_t k4 = 0x0F0F0F0F, k2 = 0x03030303;
  const uint32_t h = a[2];
  const uint64_t s0 = (a[0] & k4) | ((h & k2) << 4);
  const uint64_t s1 = (a[1] & k4) | (((h >> 2) & k2) << 4);
  const uint64_t s2 = ((a[0] >> 4) & k4) | (((h >> 4) & k2) << 4);
  const uint64_t s3 = ((a[1] >> 4) & k4) | (((h >> 6) & k2) << 4);
  return _mm_sub_epi8(from_u64(s0 | s1 << 32, s2 | s3 << 32), _mm_set1_epi8(32));
}

// Per column: the offset's share, off * sum over g of sc_g * bsum_g.
template <int kOffsetShift>
WEFT_INLINE __m256i offset_term(const BlockQ8K& xb, __m256i sc) {
  return _mm256_slli_epi32(_mm256_madd_epi16(load32(xb.bsums), sc), kOffsetShift);
}

struct Q3K {  // value = d * sc * (low + 4 * high - 4); high bit of group g: bit g of hmask[0..31]
  using Block = wq::BlockQ3_K;
  using Act = BlockQ8K;

  template <int NX>
  WEFT_INLINE static void block(const Block& w, const Act* const* x, int64_t b, __m256* acc) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(scales_q3(w.scales));
    const PairScales sc(sc16);
    __m256i hb = load32(w.hmask);
    __m256i sum[NX];
    for (int j = 0; j < NX; ++j) sum[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i bits = load32(w.qs + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {  // bits and hb move down each step, as in Q2K
        const __m256i high = _mm256_and_si256(_mm256_slli_epi16(hb, 2), _mm256_set1_epi8(4));
        const __m256i q = _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi8(3)), high);
        bits = _mm256_srli_epi16(bits, 2);
        hb = _mm256_srli_epi16(hb, 1);
        const __m256i s = sc.pair(4 * h + k);
        for (int j = 0; j < NX; ++j) {
          const __m256i p = _mm256_maddubs_epi16(q, load32(x[j][b].qs + 128 * h + 32 * k));
          sum[j] = _mm256_add_epi32(sum[j], _mm256_madd_epi16(p, s));
        }
      }
    }
    const float d = f16(w.d);
    for (int j = 0; j < NX; ++j) {
      const __m256i total = _mm256_sub_epi32(sum[j], offset_term<2>(x[j][b], sc16));
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(d * x[j][b].d), acc[j]);
    }
  }
};

struct Q6K {  // value = d * sc * (low4 | high2 << 4) - 32
  using Block = wq::BlockQ6_K;
  using Act = BlockQ8K;

  template <int NX>
  WEFT_INLINE static void block(const Block& w, const Act* const* x, int64_t b, __m256* acc) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(load16(w.scales));
    const PairScales sc(sc16);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    __m256i sum[NX];
    for (int j = 0; j < NX; ++j) sum[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      // Quarter k of the half: low nibbles (k < 2) or high nibbles of ql
      // bytes 32 (k % 2)...; the high bits 2k, 2k + 1 of qh, moved to bits 4, 5.
      const __m256i ql0 = load32(w.ql + 64 * h), ql1 = load32(w.ql + 64 * h + 32);
      const __m256i qh = load32(w.qh + 32 * h);
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2)),
          _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2)),
      };
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i s = sc.pair(4 * h + k);
        for (int j = 0; j < NX; ++j) {
          const __m256i p = _mm256_maddubs_epi16(q[k], load32(x[j][b].qs + 128 * h + 32 * k));
          sum[j] = _mm256_add_epi32(sum[j], _mm256_madd_epi16(p, s));
        }
      }
    }
    const float d = f16(w.d);
    for (int j = 0; j < NX; ++j) {
      const __m256i total = _mm256_sub_epi32(sum[j], offset_term<5>(x[j][b], sc16));
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(d * x[j][b].d), acc[j]);
    }
  }
};

// iq4_xs's scales (below) as i16 less 32, in splat_scale's form: each
// group's two fields shifted down in its own i32 lane, then packed.
WEFT_INLINE __m256i scales_iq4xs(const wq::BlockIq4Xs& w) {
  uint32_t l;
  std::memcpy(&l, w.scales_l, sizeof l);
  const __m256i low = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(l)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
      _mm256_set1_epi32(0xF));
  const __m256i high =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(w.scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                       _mm256_set1_epi32(3));
  const __m256i s = _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
  return _mm256_permute4x64_epi64(_mm256_packs_epi32(s, s), 0x88);  // i16 0-3 4-7 in each lane
}

// iq4_xs: 8 groups of 32 coded as iq4_nl (16 bytes each), six-bit scales
// biased by 32: low four bits in nibble g % 2 of scales_l[g / 2], high two
// in bits 2g of scales_h.
struct Iq4Xs {
  using Block = wq::BlockIq4Xs;
  using Act = BlockQ8K;

  template <int NX>
  WEFT_INLINE static void block(const Block& w, const Act* const* x, int64_t b, __m256* acc) {
    const __m256i sc16 = scales_iq4xs(w);
    const __m256i levels = iq4_levels();
    __m256i sum[NX];
    for (int j = 0; j < NX; ++j) sum[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m256i q = _mm256_shuffle_epi8(levels, nibbles(w.qs + 16 * g));
      const __m256i aq = _mm256_sign_epi8(q, q);
      const __m256i s = splat_scale(sc16, g);
      for (int j = 0; j < NX; ++j) {
        const __m256i p = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(load32(x[j][b].qs + 32 * g), q));
        sum[j] = _mm256_add_epi32(sum[j], _mm256_madd_epi16(p, s));
      }
    }
    const float d = f16(w.d);
    for (int j = 0; j < NX; ++j)
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[j]), _mm256_set1_ps(d * x[j][b].d), acc[j]);
  }
};

// A super-block type K as a tile kernel: one weight row at a time against
// the nx activation rows (its blocks are long enough to keep the FMA chain
// off the critical path).
template <class K>
struct Super {
  template <int NX>
  static void row(const uint8_t* wp, size_t stride, const void* const* xq, int64_t n, float* out) {
    const auto* w = reinterpret_cast<const typename K::Block*>(wp);
    const BlockQ8K* x[NX];
    __m256 acc[NX];
    for (int j = 0; j < NX; ++j) {
      x[j] = static_cast<const BlockQ8K*>(xq[j]);
      acc[j] = _mm256_setzero_ps();
    }
    const size_t ahead = prefetch_distance(stride);
    for (int64_t b = 0; b < n / kSuperBlock; ++b) {
      prefetch(w + b, ahead, sizeof(typename K::Block));
      K::template block<NX>(w[b], x, b, acc);
    }
    for (int j = 0; j < NX; ++j) out[j] = hsum(acc[j]);
  }

  static void tile(const void* wv, size_t stride, int nw, const void* const* xq, int nx, int64_t n, float* out) {
    const auto* w = static_cast<const uint8_t*>(wv);
    for (int r = 0; r < nw; ++r) {
      const uint8_t* wr = w + r * stride;
      float* o = out + r * kTileCols;
      switch (nx) {
        case 1: row<1>(wr, stride, xq, n, o); break;
        case 2: row<2>(wr, stride, xq, n, o); break;
        case 3: row<3>(wr, stride, xq, n, o); break;
        default: row<4>(wr, stride, xq, n, o); break;
      }
    }
  }
};

constexpr QuantDotTable make_table() {
  QuantDotTable t{};
  auto set = [&t](DType d, QuantDot q) { t.by_type[static_cast<int>(d)] = q; };
  set(DType::q2_K, {ActType::q8_K, Super<Q2K>::tile});
  set(DType::q3_K, {ActType::q8_K, Super<Q3K>::tile});
  set(DType::q4_K, {ActType::q8_K, Super<K4<wq::BlockQ4_K, false>>::tile});
  set(DType::q5_K, {ActType::q8_K, Super<K4<wq::BlockQ5_K, true>>::tile});
  set(DType::q6_K, {ActType::q8_K, Super<Q6K>::tile});
  set(DType::iq4_xs, {ActType::q8_K, Super<Iq4Xs>::tile});
  return t;
}

constinit const QuantDotTable kAvx2SuperBlocks = make_table();

}  // namespace

const QuantDotTable& avx2_super_block_table() { return kAvx2SuperBlocks; }

}  // namespace weft::cpu

#undef WEFT_INLINE
#undef WEFT_LAMBDA_INLINE
