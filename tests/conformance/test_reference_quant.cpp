// Tests of the reference's GGUF block decoders (reference_quant.cpp): bit for
// bit against the standard dequantizer's output in tests/data/quant-vectors.json,
// against weft's own dequantizer on random blocks, and the suite's exact
// inputs (quant_grid, q8_act_grid) against the standard quantizer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "conformance/cases.h"
#include "conformance/reference.h"
#include "quant_vectors.h"
#include "weft/core/error.h"
#include "weft/core/quant.h"

namespace weft::conformance {
namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Each block decoded in double and rounded to float once must give, bit for
// bit, the floats the standard (float) dequantizer gave. No type needs a
// 1-ulp allowance: in the standard dequantizer every product (an f16 scale
// times sub-block scales and quants whose product is at most 2^12) has at most
// 23 significant bits and is exact in float; only adding a min (q4_1, q5_1)
// or subtracting one (q2_K, q4_K, q5_K) can round, and that is the last
// step. The double computation is exact, so both give the correctly rounded
// true value (signed zeros included).
TEST(ConformanceReference, DecodersMatchQuantVectors) {
  int types = 0;
  for (const test::VectorType& t : test::quant_vectors()) {
    const std::string& name = t.name;
    const RefQuantFormat* f = ref_gguf_format(t.gguf_id);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->name, name);
    ASSERT_EQ(f->block_values, t.block_values) << name;
    ASSERT_EQ(f->block_bytes, t.block_bytes) << name;
    ++types;
    int rows = 0;
    for (const test::VectorRow& row : t.rows) {
      const std::vector<uint8_t>& bytes = row.quantized;
      const std::vector<float>& want = row.dequantized;
      const auto n_blocks = static_cast<size_t>(static_cast<int64_t>(want.size()) / f->block_values);
      ASSERT_EQ(bytes.size(), n_blocks * f->block_bytes) << name;
      std::vector<double> got(want.size());
      for (size_t b = 0; b < n_blocks; ++b) {
        f->decode(bytes.data() + b * f->block_bytes, got.data() + b * static_cast<size_t>(f->block_values));
      }
      int bad = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const float w = want[i];
        const auto g = static_cast<float>(got[i]);
        if (float_bits(g) != float_bits(w) && bad++ < 3) {
          ADD_FAILURE() << name << " row " << rows << " value " << i << ": reference " << got[i] << ", standard " << w;
        }
      }
      EXPECT_EQ(bad, 0) << name << " row " << rows;
      ++rows;
    }
    EXPECT_EQ(rows, 4) << name;
  }
  EXPECT_EQ(types, 13);
  EXPECT_EQ(ref_gguf_formats().size(), 13u);
}

// Random bytes reach bit patterns the standard quantizer may never write
// (every 6-bit sub-block scale, negative q6_K scales, set high bits): the
// reference and weft's dequantizer, written apart, must agree on them too.
// Scale fields are random finite f16 (mxfp4's exponent byte at most 250);
// the rest is random.
TEST(ConformanceReference, DecodersAgreeWithWeftOnRandomBlocks) {
  struct Scales {
    uint32_t id;
    std::vector<size_t> f16_at;  // byte offsets of the f16 fields
  };
  const Scales kScales[] = {{2, {0}},    {3, {0, 2}},  {6, {0}},     {7, {0, 2}}, {8, {0}},  {10, {80, 82}},
                            {11, {108}}, {12, {0, 2}}, {13, {0, 2}}, {14, {208}}, {20, {0}}, {23, {0}},
                            {39, {}}};
  std::mt19937_64 rng(20240611);
  std::uniform_int_distribution<int> byte(0, 255);
  for (const Scales& s : kScales) {
    const RefQuantFormat* f = ref_gguf_format(s.id);
    ASSERT_NE(f, nullptr) << s.id;
    const int64_t n = 64 * f->block_values;
    std::vector<uint8_t> blocks(64 * f->block_bytes);
    for (uint8_t& b : blocks) b = static_cast<uint8_t>(byte(rng));
    for (size_t b = 0; b < 64; ++b) {
      for (size_t off : s.f16_at) {
        // Sign, exponent 1..29 (|x| in [2^-14, 2^15)) or 0 (subnormal), any mantissa.
        uint8_t& hi = blocks[b * f->block_bytes + off + 1];
        const int exp = byte(rng) % 30;
        hi = static_cast<uint8_t>((hi & 0x83) | (exp << 2));
      }
      // mxfp4's E8M0 byte: at most 250, so that 12 * 2^(e - 128) is a float.
      if (s.id == 39) blocks[b * f->block_bytes] = static_cast<uint8_t>(blocks[b * f->block_bytes] % 251);
    }
    std::vector<float> weft_values(static_cast<size_t>(n));
    if (s.id == 2 || s.id == 8) {
      to_f32(s.id == 2 ? DType::q4_0 : DType::q8_0, blocks.data(), weft_values.data(), n);
    } else {
      dequantize_row(s.id, blocks.data(), weft_values.data(), n);
    }
    std::vector<double> ref(static_cast<size_t>(n));
    for (size_t b = 0; b < 64; ++b) {
      f->decode(blocks.data() + b * f->block_bytes, ref.data() + b * static_cast<size_t>(f->block_values));
    }
    int bad = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      if (float_bits(static_cast<float>(ref[i])) != float_bits(weft_values[i]) && bad++ < 3) {
        ADD_FAILURE() << f->name << " value " << i << ": reference " << ref[i] << ", weft " << weft_values[i];
      }
    }
    EXPECT_EQ(bad, 0) << f->name;
  }
}

// The suite's exact-write inputs (quant_grid) and exact activations
// (q8_act_grid) against weft's standard quantizer, decoded by the reference:
// when an "exact" cpy case fails, this tells whether the grid or the kernel
// is at fault.
TEST(ConformanceReference, QuantGridsAreStoredExactly) {
  const Tensor unused;
  for (const RefQuantFormat& f : ref_gguf_formats()) {
    DType t = DType::f32;
    for (int i = 0; i < kDTypeCount; ++i) {
      if (ref_quant_format(static_cast<DType>(i)) == &f) t = static_cast<DType>(i);
    }
    ASSERT_NE(t, DType::f32) << f.name;
    const Init init = quant_grid(t);
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      Rng rng(seed);
      std::vector<float> x(1024);
      init(unused, rng, x);
      std::vector<uint8_t> bytes(1024 / static_cast<size_t>(f.block_values) * f.block_bytes);
      if (t == DType::q8_0 || t == DType::q4_0) {
        from_f32(t, x.data(), bytes.data(), 1024);
      } else {
        quantize_row_reference(f.gguf_id, x.data(), bytes.data(), 1024);
      }
      std::vector<double> y(1024);
      for (size_t b = 0; b < bytes.size() / f.block_bytes; ++b) {
        f.decode(bytes.data() + b * f.block_bytes, y.data() + b * static_cast<size_t>(f.block_values));
      }
      int bad = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        EXPECT_LE(std::fabs(x[i]), 8.0f) << f.name;  // q8_0_grid reaches 127/16; the rest stay within 1
        if (y[i] != x[i] && bad++ < 3)
          ADD_FAILURE() << f.name << " seed " << seed << " value " << i << ": " << x[i] << " stored as " << y[i];
      }
      ASSERT_EQ(bad, 0) << f.name;
    }
  }
  // q8_act_grid: both activation formats reproduce it (d = amax / 127 per 32
  // values for q8_0, per 256 for q8_K).
  Rng rng(7);
  std::vector<float> x(4096);
  q8_act_grid()(unused, rng, x);
  for (size_t block : {size_t{32}, size_t{256}}) {
    for (size_t b = 0; b < x.size(); b += block) {
      float amax = 0;
      for (size_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float d = amax / 127;
      EXPECT_EQ(std::ldexp(1.0f, std::ilogb(d)), d);  // a power of two
      for (size_t i = b; i < b + block; ++i) ASSERT_EQ(std::nearbyint(x[i] / d) * d, x[i]);
    }
  }
}

TEST(ConformanceReference, QuantFormatsOfDTypes) {
  // The reference's dtype table agrees with FACTS.md's sizes.
  EXPECT_EQ(ref_block_size(DType::q4_K), 256);
  EXPECT_EQ(ref_unit_bytes(DType::q4_K), 144u);
  EXPECT_EQ(ref_block_size(DType::iq4_nl), 32);
  EXPECT_EQ(ref_unit_bytes(DType::iq4_xs), 136u);
  EXPECT_EQ(ref_block_size(DType::f16), 1);
  EXPECT_EQ(ref_quant_format(DType::bf16), nullptr);
  for (const RefQuantFormat& f : ref_gguf_formats()) {
    EXPECT_TRUE(f.block_values == 32 || f.block_values == 256) << f.name;
  }
}

TEST(ConformanceReference, DecodesQ4_KTensorRows) {
  // A [512, 2] q4_K tensor: two blocks per row. Block (row 1, block 1) has
  // d = 1, dmin = 0.5, sub-block 5 scale 3 and min 2 (packed: byte 9's low
  // nibble holds scale bits 0..3, byte 1's top two bits its bits 4..5, ...),
  // every quant 7: its values 160..191 are 3 * 7 - 0.5 * 2 = 20.
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::q4_K, {512, 2});
  std::vector<uint8_t> bytes(4 * 144, 0);
  uint8_t* blk = bytes.data() + 3 * 144;
  blk[1] = 0x3C;      // d = 1
  blk[3] = 0x38;      // dmin = 0.5
  blk[4 + 9] = 0x23;  // scale 5 low nibble 3, min 5 low nibble 2
  for (int i = 0; i < 128; ++i) blk[16 + i] = 0x77;
  const std::vector<double> v = decode_tensor(*t, bytes.data(), bytes.size());
  ASSERT_EQ(v.size(), 1024u);
  EXPECT_EQ(v[512 + 256 + 160], 20.0);
  EXPECT_EQ(v[512 + 256 + 191], 20.0);
  EXPECT_EQ(v[512 + 256 + 159], 0.0);  // sub-block 4: scale 0, min 0
  EXPECT_EQ(v[0], 0.0);
  EXPECT_THROW(decode_tensor(*t, bytes.data(), bytes.size() - 1), Error);
}

}  // namespace
}  // namespace weft::conformance
