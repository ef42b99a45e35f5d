// Packing of qgemm.h: weight rows of the 32-value types decoded to their
// integer values and interleaved 4 bytes per row into panel blocks, in AVX2
// (the build's baseline): each row's block decoded into one register, the
// 8 rows transposed as 8 x 8 groups of 4 bytes. A panel is packed once per
// chunk of activation rows, so packing costs a few percent of a prompt's
// product.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "../../core/quant/blocks.h"
#include "../../core/quant/search.h"
#include "qgemm.h"

namespace weft::cpu {
namespace {

// The 32 nibbles of 16 bytes as bytes 0..15: value j < 16 is the low nibble
// of byte j, value j >= 16 the high nibble of byte j - 16.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m4), _mm_and_si128(x, m4));
}

// 16 in byte j where bit j of the 32 bits at qh is set, else 0.
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, sizeof h);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)),
                                             _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                               0x0101010101010101, 0x0000000000000000));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16));
}

// A 16-entry byte table looked up by nibble in both lanes.
inline __m256i lookup(const int8_t (&table)[16], __m256i nib) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(table));
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(t), nib);
}

template <class B>
const B& block_at(const uint8_t* row, int64_t b) {
  return reinterpret_cast<const B*>(row)[b];
}

// Group b % 8 of super-block b / 8 of a q4_K, q5_K or iq4_xs row: their
// groups of 32 values each have one scale (and q4_K / q5_K one minimum), so
// a group is a block here: q4_K / q5_K value = (d * sc) * q - dmin * m, q
// 0..31 (the minimum form); iq4_xs value = (d * (ls - 32)) * level (sign8).
// Each scale is a product of an f16 and a 6-bit integer: exact in f32.
__m256i decode_group(DType t, const uint8_t* row, int64_t b, float& d, float& m) {
  const int g = static_cast<int>(b % 8);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  if (t == DType::iq4_xs) {
    const auto& x = block_at<quant::BlockIq4Xs>(row, b / 8);
    const int ls = ((x.scales_l[g / 2] >> (4 * (g % 2))) & 0x0F) | (((x.scales_h >> (2 * g)) & 3) << 4);
    d = f16_to_f32(x.d) * static_cast<float>(ls - 32);
    return lookup(quant::kIq4Levels, nibbles(x.qs + 16 * g));
  }
  // q4_K and q5_K share the layout of scales and low bits: group g's low
  // nibbles are bits 4 * (g % 2) of bytes 32 * (g / 2) ... + 31.
  const uint8_t* scales = t == DType::q4_K ? block_at<quant::BlockQ4_K>(row, b / 8).scales
                                           : block_at<quant::BlockQ5_K>(row, b / 8).scales;
  const uint8_t* qs = t == DType::q4_K ? block_at<quant::BlockQ4_K>(row, b / 8).qs
                                       : block_at<quant::BlockQ5_K>(row, b / 8).qs;
  const uint16_t dh = t == DType::q4_K ? block_at<quant::BlockQ4_K>(row, b / 8).d
                                       : block_at<quant::BlockQ5_K>(row, b / 8).d;
  const uint16_t dmin = t == DType::q4_K ? block_at<quant::BlockQ4_K>(row, b / 8).dmin
                                         : block_at<quant::BlockQ5_K>(row, b / 8).dmin;
  uint8_t sc = 0, mn = 0;
  quant::get_scale_min_k4(g, scales, &sc, &mn);
  d = f16_to_f32(dh) * static_cast<float>(sc);
  m = -f16_to_f32(dmin) * static_cast<float>(mn);
  const __m256i low = _mm256_and_si256(
      _mm256_srli_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (g / 2))), 4 * (g % 2)), m4);
  if (t == DType::q4_K) return low;
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_at<quant::BlockQ5_K>(row, b / 8).qh));
  const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(qh, g), _mm256_set1_epi8(1));
  return _mm256_or_si256(low, _mm256_slli_epi16(bit, 4));
}

// Block b of a weight row: its 32 integer values v (plus offset) as bytes,
// its scale and minimum.
__m256i decode(DType t, const uint8_t* row, int64_t b, int offset, float& d, float& m) {
  const __m256i off = _mm256_set1_epi8(static_cast<char>(offset));
  m = 0.0f;
  switch (t) {
    case DType::q8_0: {
      const auto& x = block_at<BlockQ8_0>(row, b);
      d = f16_to_f32(x.d);
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q));  // sign8: offset 0
    }
    case DType::q4_0: {
      const auto& x = block_at<BlockQ4_0>(row, b);
      d = f16_to_f32(x.d);
      return _mm256_add_epi8(_mm256_sub_epi8(nibbles(x.q), _mm256_set1_epi8(8)), off);
    }
    case DType::q4_1: {
      const auto& x = block_at<quant::BlockQ4_1>(row, b);
      d = f16_to_f32(x.d);
      m = f16_to_f32(x.m);
      return nibbles(x.qs);
    }
    case DType::q5_0: {
      const auto& x = block_at<quant::BlockQ5_0>(row, b);
      d = f16_to_f32(x.d);
      const __m256i v = _mm256_or_si256(nibbles(x.qs), fifth_bits(x.qh));
      return _mm256_add_epi8(_mm256_sub_epi8(v, _mm256_set1_epi8(16)), off);
    }
    case DType::q5_1: {
      const auto& x = block_at<quant::BlockQ5_1>(row, b);
      d = f16_to_f32(x.d);
      m = f16_to_f32(x.m);
      return _mm256_or_si256(nibbles(x.qs), fifth_bits(x.qh));
    }
    case DType::iq4_nl: {
      const auto& x = block_at<quant::BlockIq4Nl>(row, b);
      d = f16_to_f32(x.d);
      return lookup(quant::kIq4Levels, nibbles(x.qs));
    }
    case DType::mxfp4: {
      const auto& x = block_at<quant::BlockMxfp4>(row, b);
      d = std::ldexp(1.0f, static_cast<int>(x.e) - 128);  // exact: 2^-128 .. 2^127
      return _mm256_add_epi8(lookup(quant::kMxfp4Levels, nibbles(x.qs)), off);
    }
    case DType::q4_K:
    case DType::q5_K:
    case DType::iq4_xs: return decode_group(t, row, b, d, m);
    default:
      d = 0.0f;  // unreachable: qgemm_handles() gates every caller
      return _mm256_setzero_si256();
  }
}

// r[i] holds the 8 groups of 4 values of row i; afterwards r[k] holds group
// k of rows 0..7 (an 8 x 8 transpose of 32-bit elements).
inline void transpose8(__m256i (&r)[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x20);
    r[k + 4] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x31);
  }
}

// 128 * the sum of each row's values (lane r), from the transposed groups
// holding v + offset.
inline __m256i sums128(const __m256i (&g)[8], int offset) {
  const __m256i ones8 = _mm256_set1_epi8(1);
  __m256i s16 = _mm256_setzero_si256();  // pair sums of at most 8 * 2 * 128 in magnitude
  for (int k = 0; k < 8; ++k) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(ones8, g[k]));
  const __m256i s32 = _mm256_sub_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)), _mm256_set1_epi32(32 * offset));
  return _mm256_slli_epi32(s32, 7);
}

}  // namespace

bool qgemm_handles(DType a) {
  switch (a) {
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::iq4_nl:
    case DType::mxfp4:
    case DType::q4_K:
    case DType::q5_K:
    case DType::iq4_xs: return true;
    default: return false;
  }
}

// The 8-bit types need the sign trick on AVX2; the others' values fit in 5
// bits once offset, so four unsigned x signed byte products add up in i16.
QForm qgemm_form(DType a) {
  if (a == DType::q8_0 || a == DType::iq4_nl || a == DType::iq4_xs) return QForm::sign8;
  if (a == DType::q4_1 || a == DType::q5_1 || a == DType::q4_K || a == DType::q5_K) return QForm::min;
  return QForm::offset;
}

int qgemm_offset(DType a) {
  switch (a) {
    case DType::q4_0: return 8;
    case DType::q5_0: return 16;
    case DType::mxfp4: return 12;  // levels -12..12
    default: return 0;
  }
}

void qgemm_pack_panel(DType t, const uint8_t* a, size_t stride, int rows, int64_t nb, bool add_offset,
                      QPanelBlock* dst) {
  const int offset = add_offset ? qgemm_offset(t) : 0;
  for (int64_t b = 0; b < nb; ++b) {
    QPanelBlock& p = dst[b];
    __m256i g[8];
    for (int r = 0; r < kQPanelRows; ++r) {
      p.d[r] = p.m[r] = 0.0f;
      g[r] = r < rows ? decode(t, a + static_cast<size_t>(r) * stride, b, offset, p.d[r], p.m[r])
                      : _mm256_set1_epi8(static_cast<char>(offset));  // a zero row: v = 0, d = 0
    }
    transpose8(g);
    for (int k = 0; k < 8; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(p.q + 32 * k), g[k]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.vsum128), sums128(g, offset));
  }
}

}  // namespace weft::cpu
