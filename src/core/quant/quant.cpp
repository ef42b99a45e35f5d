// The type table and the checked entry points of include/weft/core/quant.h.
#include "weft/core/quant.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "blocks.h"
#include "kernels.h"
#include "weft/core/error.h"

namespace weft {
namespace {

using quant::DequantizeFn;
using quant::QuantizeFn;

struct QuantCodec {
  QuantTypeInfo info;
  DequantizeFn dequantize;
  QuantizeFn quantize;
};

template <typename Block>
constexpr QuantCodec codec(uint32_t id, std::string_view name, int64_t block_values, DequantizeFn dequantize,
                           QuantizeFn quantize) {
  return {{id, name, block_values, sizeof(Block)}, dequantize, quantize};
}

constexpr int64_t kSmall = quant::kLegacyBlock;
constexpr int64_t kSuper = quant::kSuperBlock;

// Ordered by GGUF id.
constexpr std::array kCodecs = {
    codec<quant::BlockQ4_1>(3, "q4_1", kSmall, quant::dequantize_q4_1, quant::quantize_q4_1),
    codec<quant::BlockQ5_0>(6, "q5_0", kSmall, quant::dequantize_q5_0, quant::quantize_q5_0),
    codec<quant::BlockQ5_1>(7, "q5_1", kSmall, quant::dequantize_q5_1, quant::quantize_q5_1),
    codec<quant::BlockQ2_K>(10, "q2_K", kSuper, quant::dequantize_q2_K, quant::quantize_q2_K),
    codec<quant::BlockQ3_K>(11, "q3_K", kSuper, quant::dequantize_q3_K, quant::quantize_q3_K),
    codec<quant::BlockQ4_K>(12, "q4_K", kSuper, quant::dequantize_q4_K, quant::quantize_q4_K),
    codec<quant::BlockQ5_K>(13, "q5_K", kSuper, quant::dequantize_q5_K, quant::quantize_q5_K),
    codec<quant::BlockQ6_K>(14, "q6_K", kSuper, quant::dequantize_q6_K, quant::quantize_q6_K),
    codec<quant::BlockQ8_K>(15, "q8_K", kSuper, quant::dequantize_q8_K, quant::quantize_q8_K),
    codec<quant::BlockIq4Nl>(20, "iq4_nl", kSmall, quant::dequantize_iq4_nl, quant::quantize_iq4_nl),
    codec<quant::BlockIq4Xs>(23, "iq4_xs", kSuper, quant::dequantize_iq4_xs, quant::quantize_iq4_xs),
    codec<quant::BlockMxfp4>(39, "mxfp4", kSmall, quant::dequantize_mxfp4, quant::quantize_mxfp4),
};

constexpr std::array<QuantTypeInfo, kCodecs.size()> info_table() {
  std::array<QuantTypeInfo, kCodecs.size()> infos{};
  for (size_t i = 0; i < kCodecs.size(); ++i) infos[i] = kCodecs[i].info;
  return infos;
}
constexpr auto kInfos = info_table();

const QuantCodec* find_codec(uint32_t gguf_id) {
  for (const QuantCodec& c : kCodecs) {
    if (c.info.gguf_id == gguf_id) return &c;
  }
  return nullptr;
}

// The codec for gguf_id after checking that n values make whole blocks.
const QuantCodec& checked_codec(const char* op, uint32_t gguf_id, int64_t n) {
  const QuantCodec* c = find_codec(gguf_id);
  if (!c)
    fail(ErrorKind::unsupported, op, "GGUF type " + std::to_string(gguf_id) + " is not a supported quantized type");
  if (n < 0 || n % c->info.block_values != 0) {
    fail(ErrorKind::invalid_input, op,
         std::string(c->info.name) + ": a row of " + std::to_string(n) + " values is not a whole number of " +
             std::to_string(c->info.block_values) + "-value blocks");
  }
  return *c;
}

}  // namespace

std::span<const QuantTypeInfo> quant_types() {
  return kInfos;
}

const QuantTypeInfo* quant_type_info(uint32_t gguf_id) {
  const QuantCodec* c = find_codec(gguf_id);
  return c ? &kInfos[static_cast<size_t>(c - kCodecs.data())] : nullptr;
}

size_t quant_row_bytes(uint32_t gguf_id, int64_t n) {
  const QuantCodec& c = checked_codec("quant_row_bytes", gguf_id, n);
  return static_cast<size_t>(n / c.info.block_values) * c.info.block_bytes;
}

void dequantize_row(uint32_t gguf_id, const void* blocks, float* out, int64_t n) {
  const QuantCodec& c = checked_codec("dequantize_row", gguf_id, n);
  c.dequantize(blocks, out, n / c.info.block_values);
}

void quantize_row_reference(uint32_t gguf_id, const float* in, void* blocks, int64_t n) {
  const QuantCodec& c = checked_codec("quantize_row_reference", gguf_id, n);
  // The searches assume finite values. An OR of "exponent all ones" over
  // the bits, a reduction the compiler vectorizes; the position is found
  // only for the message.
  uint32_t non_finite = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &in[i], sizeof bits);
    non_finite |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  if (non_finite) {
    const int64_t i = std::find_if(in, in + n, [](float v) { return !std::isfinite(v); }) - in;
    fail(ErrorKind::invalid_input, "quantize_row_reference",
         std::string(c.info.name) + ": input value " + std::to_string(i) + " is not finite");
  }
  c.quantize(in, blocks, n / c.info.block_values);
}

}  // namespace weft
