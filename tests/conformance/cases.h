// Conformance case definitions. A case is a name ("op dtype shape ...",
// unique, matched by the suite's filter) and a builder that makes input
// tensors in a Context, applies ops, and names the tensors to compare, each
// with a tolerance on the normalized error
//
//   err = sum((out - ref)^2) / max(sum(ref^2), tiny)
//
// i32 results must match exactly whatever the tolerance. Cases are split by
// op family: cases_elementwise.cpp, cases_rows.cpp, cases_rope.cpp,
// cases_matmul.cpp, cases_data.cpp, cases_chain.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "weft/core/context.h"

namespace weft::conformance {

using Rng = std::mt19937_64;
using Shape = std::array<int64_t, 4>;

// Fills values (t.nelements() of them, logical order, i0 fastest) for leaf
// t. Values for an i32 leaf must be integers; the runner converts the rest
// to t's dtype with weft::from_f32.
using Init = std::function<void(const Tensor& t, Rng& rng, std::vector<float>& values)>;

Init uniform(float lo, float hi);
Init signed_range(float lo, float hi);  // magnitude in [lo, hi], random sign (divisors)
Init indices(int64_t n);                // integers in [0, n)
Init distinct_indices(int64_t n);       // each row: distinct integers in [0, n)
Init distinct();                        // all values distinct, in [-1, 1], shuffled
Init coarse(float step);                // uniform [-1, 1] rounded to step: many ties
// Attention masks [n_kv, rows, ...]: 0 where row i may see position j
// (j <= i + n_kv - n_q), -inf elsewhere.
Init causal_mask(int64_t n_q);
// Uniform [-1, 1] with about a quarter -inf; element 0 of each row finite.
Init random_mask();
// Values exactly representable after q8_0 / q4_0 quantization per FACTS.md
// (each block holds its extreme value), so the quantized write is exact.
Init q8_0_grid();
Init q4_0_grid();
// As the grids, but every other value sits 0.3 steps off a level: a
// quantizer that rounds correctly errs by exactly 0.3 steps on each, one that
// truncates or mis-rounds by 0.7 on many. Use with kQ8Rounding / kQ4Rounding.
Init q8_0_rounding();
Init q4_0_rounding();
// Values the standard quantizer of t (from_f32) stores exactly, for every
// quantized t (q8_0_grid / q4_0_grid for those two; q8_0_grid, exact in
// f16 and bf16 too, for the others): each block built from t's own
// parameters, so a quantized write of them must be exact (cases_grids.cpp).
Init quant_grid(DType t);
// Activations that 8-bit blocks hold exactly: per 256 values one step
// 2^-e, integers k 2^-e with |k| <= 127, +-127 once in every 32. q8_0 and
// q8_K blocks (32 / 256) both store them without error, so a product with
// quantized weights and these activations has no activation rounding.
Init q8_act_grid();

// Tolerances of the normalized error.
// v printed with a printf format of one double conversion, for case names.
inline std::string fmt(const char* format, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

namespace tol {
inline constexpr double kExact = 0.0;        // data movement without rounding
inline constexpr double kArith = 1e-12;      // one f32 rounding per value
inline constexpr double kTranscend = 1e-10;  // exp, tanh, sqrt, sums along a row
inline constexpr double kRope = 1e-8;        // angles rounded in f32
inline constexpr double kMatF32 = 1e-9;      // long f32 accumulations
// Weights of these dtypes may be multiplied with b rounded to f16 / bf16
// (as ggml does); the reference decodes the weights exactly.
inline constexpr double kMatF16 = 2e-6;
inline constexpr double kMatBF16 = 5e-5;
// Quantized weights (docs/conformance-quant.md). The CPU, as ggml, first
// rounds each activation row to 8-bit blocks, x -> round(x / d) d with
// d = amax / 127 per 32 values (q8_0, d stored as f16) or per 256 (q8_K);
// the reference multiplies the decoded weights with the exact activations.
// The rounding error e of an element is uniform in [-d/2, d/2] (variance
// d^2/12) and independent of the weights, so over n = M*N outputs of K terms
//   err ~= sum_ij sum_k w_ik^2 d^2/12 / sum_ij y_ij^2
//       ~= n K E[w^2] d^2/12 / (n K E[w^2] E[x^2]) = d^2 / (12 E[x^2]),
// which for the uniform [-1, 1] activations of the cases (E[x^2] = 1/3,
// amax <= 1, d <= 1/127) is at most 1 / (4 * 127^2) = 1.55e-5. q8_0's f16
// scale is off by at most 2^-11 relative per block: at most 2.4e-7 more.
// err is a ratio of two sums of n squares and scatters like an F(n, n)
// variable around that mean: 1e5 simulated products per shape with n >= 16
// gave 99.99th percentiles of 0.5-1.3e-4 and maxima under 2e-4. With n = 1
// the denominator can cancel and err has no useful bound (10% of draws
// exceed 5e-4). So: 5e-4 (32x the mean, 4x the 1-in-10^4 tail; ggml's
// test-backend-ops uses the same bound for mul_mat) for cases with random
// activations and at least kMinRandomOutputs outputs; smaller cases take
// q8_act_grid() activations, which 8-bit blocks hold exactly, and
// kMatQuantExact.
inline constexpr double kMatQuant = 5e-4;
inline constexpr int64_t kMinRandomOutputs = 16;
// Quantized weights with q8_act_grid() activations: the integer block dot
// products are exact, what is left is f32 rounding of the per-block partial
// sums and their scales, as for f32 weights.
inline constexpr double kMatQuantExact = kMatF32;
// Quantized writes of the *_rounding() data: correct rounding gives about
// 1.9e-5 (q8_0) and 4.8e-3 (q4_0); truncation about three times that.
inline constexpr double kQ8Rounding = 3e-5;
inline constexpr double kQ4Rounding = 7e-3;
}  // namespace tol

// Rounding one exact result into dtype t: f16 2e-6, bf16 3e-5, q8_0 2e-4,
// q4_0 2e-2 (the expected values are 8e-8, 1.3e-6, 1.5e-5 and 4e-3); for the
// other quantized types about 5x what the standard quantizer gives on
// uniform [-1, 1] rows (cases.cpp lists the measured values).
double storage_tol(DType t);
// max(op_tol, storage_tol(out)).
double tol_for(DType out, double op_tol);
// Tolerance of a mul_mat / mul_mat_id result for weights of dtype w. For a
// quantized w it is kMatQuant, which holds for random activations and at
// least kMinRandomOutputs outputs (see there).
double matmul_tol(DType w);

class CaseBuilder {
 public:
  struct Compared {
    Tensor* t;
    double tol;
  };

  explicit CaseBuilder(Context& ctx) : ctx_(ctx) {}
  Context& ctx() { return ctx_; }

  // A new packed input leaf (kFlagInput); init defaults to uniform(-1, 1).
  Tensor* input(DType type, const Shape& ne, Init init = {});
  // Computes t and compares it.
  void output(Tensor* t, double tol) { output(t, t, tol); }
  // Computes root and compares dest (root writes into it: set_rows, cpy).
  void output(Tensor* root, Tensor* dest, double tol);

  const std::vector<Tensor*>& roots() const { return roots_; }
  const std::vector<Compared>& compared() const { return compared_; }
  // The initialiser given for leaf t, or nullptr.
  const Init* init_for(const Tensor* t) const;

 private:
  Context& ctx_;
  std::vector<std::pair<const Tensor*, Init>> inits_;
  std::vector<Tensor*> roots_;
  std::vector<Compared> compared_;
};

// How an operand is laid out in memory.
enum class Layout {
  packed,
  transposed,  // a transpose view of a packed leaf (not for quantized types)
  permuted,    // a permute view of a packed 4-d leaf (dims 0..2 rotated; 0 kept if quantized)
  strided,     // a view inside a bigger leaf, starting at element (1 block, 1, 0, 0)
};
// An operand of shape ne (a leaf, or a view of one) with init on its leaf.
Tensor* operand(CaseBuilder& b, DType type, const Shape& ne, Layout layout, Init init = {});
// " a=transposed" etc.; empty for packed.
std::string layout_suffix(Layout layout, const char* which);

struct Case {
  std::string name;
  std::function<void(CaseBuilder&)> build;
};

// "[64,17,2,1]"
std::string shape_str(const Shape& ne);
std::string dtype_str(DType t);
inline constexpr DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16};
// The weight types the structured fuzzer draws from (its shapes assume
// 32-value blocks); the suite's own cases cover kFloatTypes and kQuantTypes.
inline constexpr DType kWeightTypes[] = {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0};
// Every quantized dtype: blocks of 32 (q8_0 ... q5_1, iq4_nl, mxfp4) or 256 values.
inline constexpr DType kQuantTypes[] = {DType::q8_0, DType::q4_0, DType::q4_1,   DType::q5_0,   DType::q5_1,
                                        DType::q2_K, DType::q3_K, DType::q4_K,   DType::q5_K,   DType::q6_K,
                                        DType::iq4_nl, DType::iq4_xs, DType::mxfp4};

void add_elementwise_cases(std::vector<Case>& cases);
void add_row_cases(std::vector<Case>& cases);   // norms, soft_max, rope (add_rope_cases), reductions, sorts
void add_rope_cases(std::vector<Case>& cases);  // rope, rope_ext (cases_rope.cpp)
void add_matmul_cases(std::vector<Case>& cases);
void add_data_cases(std::vector<Case>& cases);  // get/set_rows, cpy, cont, concat, views
void add_chain_cases(std::vector<Case>& cases);
void add_attention_cases(std::vector<Case>& cases);  // flash_attn (cases_attention.cpp)
std::vector<Case> all_cases();

}  // namespace weft::conformance
