// Quantized dot products: the level dispatch, the activation quantizers and
// the generic kernels every level falls back to (qdot.h).
//
// The generic kernel decodes one weight block to floats with the reference
// dequantizer and multiplies it with the 8-bit activations of every column;
// it defines the results the SIMD kernels must match up to float rounding,
// and serves the types that have no SIMD kernel yet.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_features.h"
#include "qdot.h"

namespace weft::cpu {
namespace {

int act_block(ActType a) { return a == ActType::q8_0 ? kQuantBlock : kSuperBlock; }

// Not from_f32(DType::q8_0): that is llama.cpp's reference quantizer for
// stored weights (roundf, ties away from zero); activations round ties to
// even, as the SIMD quantizers (and the standard engines' x86 paths) do, so
// every level quantizes a row to the same bytes.
void quantize_q8_0_scalar(const float* x, void* out, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(out);
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.0f;
    for (int i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    for (int i = 0; i < kQuantBlock; ++i) {
      const float v = std::nearbyint(xb[i] * id);  // |v| <= 127 for finite input
      y[b].q[i] = static_cast<int8_t>(v >= -127.0f && v <= 127.0f ? v : 0.0f);
    }
  }
}

void quantize_q8_K_scalar(const float* x, void* out, int64_t n) {
  auto* y = static_cast<BlockQ8K*>(out);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float* xb = x + b * kSuperBlock;
    float max = 0.0f, amax = 0.0f;  // max: the value of largest magnitude, sign kept
    for (int i = 0; i < kSuperBlock; ++i) {
      const float ax = std::fabs(xb[i]);
      if (ax > amax) {
        amax = ax;
        max = xb[i];
      }
    }
    BlockQ8K& blk = y[b];
    if (amax == 0.0f || !std::isfinite(amax)) {
      std::memset(&blk, 0, sizeof blk);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int i = 0; i < kSuperBlock; ++i) {
      const float v = std::nearbyint(iscale * xb[i]);
      blk.qs[i] = static_cast<int8_t>(v >= -127.0f && v <= 127.0f ? v : 0.0f);
    }
    for (int g = 0; g < kSuperBlock / 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += blk.qs[16 * g + i];
      blk.bsums[g] = static_cast<int16_t>(sum);
    }
    blk.d = 1.0f / iscale;
  }
}

// Scale and quants of activation block b.
struct ActBlock {
  float d;
  const int8_t* q;
};
ActBlock act_block_at(ActType a, const void* xq, int64_t b) {
  if (a == ActType::q8_0) {
    const auto& blk = static_cast<const BlockQ8_0*>(xq)[b];
    return {f16_to_f32(blk.d), blk.q};
  }
  const auto& blk = static_cast<const BlockQ8K*>(xq)[b];
  return {blk.d, blk.qs};
}

template <DType T>
void generic_tile(const void* wv, size_t stride, int nw, const void* const* xq, int nx, int64_t n, float* out) {
  constexpr int64_t kBlock = traits(T).block_size;
  constexpr size_t kBytes = traits(T).unit_bytes;
  constexpr ActType kAct = kBlock == kQuantBlock ? ActType::q8_0 : ActType::q8_K;
  const auto* w = static_cast<const uint8_t*>(wv);
  for (int r = 0; r < nw; ++r) {
    float acc[kTileCols] = {};
    for (int64_t b = 0; b < n / kBlock; ++b) {
      float wf[kBlock];
      to_f32(T, w + r * stride + b * kBytes, wf, kBlock);
      for (int j = 0; j < nx; ++j) {
        const ActBlock x = act_block_at(kAct, xq[j], b);
        float s = 0.0f;
        for (int64_t i = 0; i < kBlock; ++i) s += wf[i] * static_cast<float>(x.q[i]);
        acc[j] += s * x.d;
      }
    }
    for (int j = 0; j < nx; ++j) out[r * kTileCols + j] = acc[j];
  }
}

template <DType T>
constexpr QuantDot generic_entry() {
  return {traits(T).block_size == kQuantBlock ? ActType::q8_0 : ActType::q8_K, generic_tile<T>};
}

constexpr QuantDotTable make_generic() {
  QuantDotTable t{};
  auto set = [&t](DType d, QuantDot q) { t.by_type[static_cast<int>(d)] = q; };
  set(DType::q8_0, generic_entry<DType::q8_0>());
  set(DType::q4_0, generic_entry<DType::q4_0>());
  set(DType::q4_1, generic_entry<DType::q4_1>());
  set(DType::q5_0, generic_entry<DType::q5_0>());
  set(DType::q5_1, generic_entry<DType::q5_1>());
  set(DType::q2_K, generic_entry<DType::q2_K>());
  set(DType::q3_K, generic_entry<DType::q3_K>());
  set(DType::q4_K, generic_entry<DType::q4_K>());
  set(DType::q5_K, generic_entry<DType::q5_K>());
  set(DType::q6_K, generic_entry<DType::q6_K>());
  set(DType::iq4_nl, generic_entry<DType::iq4_nl>());
  set(DType::iq4_xs, generic_entry<DType::iq4_xs>());
  set(DType::mxfp4, generic_entry<DType::mxfp4>());
  t.quantize_q8_0 = quantize_q8_0_scalar;
  t.quantize_q8_K = quantize_q8_K_scalar;
  return t;
}

constinit const QuantDotTable kGeneric = make_generic();

// The AVX-512 kernels also need VNNI; without it the AVX2 table serves.
const QuantDotTable* table_for(Level level) {
  if (dot_kernels_for(level) == nullptr) return nullptr;
  if (level == Level::avx2) return &avx2_quant_table();
  return cpu_features().avx512vnni ? &avx512_quant_table() : nullptr;
}

const QuantDotTable& best_table() {
  static const QuantDotTable* const best = [] {
    const QuantDotTable* t = std::strcmp(dot_kernels().name, "avx512") == 0 ? table_for(Level::avx512) : nullptr;
    return t != nullptr ? t : table_for(Level::avx2);
  }();
  return *best;
}

// An entry of t, else of the AVX2 table (the baseline every level includes),
// else the generic kernel.
const QuantDot* entry(const QuantDotTable& t, DType d) {
  const int i = static_cast<int>(d);
  for (const QuantDotTable* level : {&t, &avx2_quant_table(), &kGeneric})
    if (level->by_type[i].tile != nullptr) return &level->by_type[i];
  return nullptr;
}

}  // namespace

const QuantDotTable& generic_quant_table() { return kGeneric; }

const QuantDot* quant_dot(DType t) { return entry(best_table(), t); }

const QuantDot* quant_dot_for(Level level, DType t) {
  const QuantDotTable* table = table_for(level);
  return table == nullptr ? nullptr : entry(*table, t);
}

size_t act_row_bytes(ActType a, int64_t n) {
  const size_t unit = a == ActType::q8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ8K);
  return static_cast<size_t>(n / act_block(a)) * unit;
}

void quantize_act_row(ActType a, const float* x, void* xq, int64_t n) {
  const QuantDotTable& t = best_table();
  for (const QuantDotTable* level : {&t, &avx2_quant_table(), &kGeneric}) {
    auto* quantize = a == ActType::q8_0 ? level->quantize_q8_0 : level->quantize_q8_K;
    if (quantize != nullptr) return quantize(x, xq, n);
  }
}

}  // namespace weft::cpu
