// Shared pieces of the case definitions: initialisers, tolerances, the
// builder, and the list of all cases.
#include "conformance/cases.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

#include "weft/core/ops.h"

namespace weft::conformance {
namespace {

float uniform01(Rng& rng) {
  return std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
}

int64_t row_len(const Tensor& t) {
  return t.ne[0] > 0 ? t.ne[0] : 1;
}

// Values k * 2^-e per block of 32, k in [-kmax, kmax], one element per block
// at the extreme (sign chosen at random): the block's scale is then 2^-e
// exactly and every value quantizes without error.
// With offset != 0 each non-extreme value moves offset steps up or down.
Init grid(int kmax, int extreme, float offset) {
  return [kmax, extreme, offset](const Tensor&, Rng& rng, std::vector<float>& v) {
    std::uniform_int_distribution<int> k(-kmax, kmax), e(4, 8), pos(0, 31), sign(0, 1);
    for (size_t b = 0; b < v.size(); b += 32) {
      const float d = std::ldexp(1.0f, -e(rng));
      const size_t n = std::min<size_t>(32, v.size() - b);
      for (size_t i = 0; i < n; ++i) {
        const float off = sign(rng) ? offset : -offset;
        v[b + i] = (static_cast<float>(k(rng)) + off) * d;
      }
      v[b + static_cast<size_t>(pos(rng)) % n] = static_cast<float>(sign(rng) ? extreme : -extreme) * d;
    }
  };
}

}  // namespace

Init uniform(float lo, float hi) {
  return [lo, hi](const Tensor&, Rng& rng, std::vector<float>& v) {
    for (float& x : v) x = lo + (hi - lo) * uniform01(rng);
  };
}

Init signed_range(float lo, float hi) {
  return [lo, hi](const Tensor&, Rng& rng, std::vector<float>& v) {
    for (float& x : v) {
      const float m = lo + (hi - lo) * uniform01(rng);
      x = uniform01(rng) < 0.5f ? -m : m;
    }
  };
}

Init indices(int64_t n) {
  return [n](const Tensor&, Rng& rng, std::vector<float>& v) {
    std::uniform_int_distribution<int64_t> d(0, n - 1);
    for (float& x : v) x = static_cast<float>(d(rng));
  };
}

Init distinct_indices(int64_t n) {
  return [n](const Tensor& t, Rng& rng, std::vector<float>& v) {
    std::vector<int64_t> pool(static_cast<size_t>(n));
    const auto len = static_cast<size_t>(row_len(t));
    for (size_t r = 0; r < v.size(); r += len) {
      std::iota(pool.begin(), pool.end(), 0);
      std::shuffle(pool.begin(), pool.end(), rng);
      for (size_t i = 0; i < len; ++i) v[r + i] = static_cast<float>(pool[i % pool.size()]);
    }
  };
}

Init distinct() {
  // Distinct over the whole leaf, so the rows of any view of it are too.
  return [](const Tensor&, Rng& rng, std::vector<float>& v) {
    const double n = static_cast<double>(v.size());
    for (size_t j = 0; j < v.size(); ++j) v[j] = static_cast<float>(2.0 * (static_cast<double>(j) + 0.5) / n - 1.0);
    std::shuffle(v.begin(), v.end(), rng);
  };
}

Init coarse(float step) {
  return [step](const Tensor&, Rng& rng, std::vector<float>& v) {
    for (float& x : v) x = std::round((2.0f * uniform01(rng) - 1.0f) / step) * step;
  };
}

Init causal_mask(int64_t n_q) {
  return [n_q](const Tensor& t, Rng&, std::vector<float>& v) {
    const int64_t n_kv = t.ne[0];
    for (size_t k = 0; k < v.size(); ++k) {
      const auto j = static_cast<int64_t>(k) % n_kv;
      const auto i = (static_cast<int64_t>(k) / n_kv) % t.ne[1];
      v[k] = (i >= n_q || j <= i + n_kv - n_q) ? 0.0f : -INFINITY;
    }
  };
}

Init random_mask() {
  return [](const Tensor& t, Rng& rng, std::vector<float>& v) {
    for (size_t k = 0; k < v.size(); ++k) {
      const bool first = static_cast<int64_t>(k) % row_len(t) == 0;
      v[k] = !first && uniform01(rng) < 0.25f ? -INFINITY : 2.0f * uniform01(rng) - 1.0f;
    }
  };
}

Init q8_0_grid() {
  return grid(127, 127, 0.0f);
}
Init q4_0_grid() {
  return grid(7, 8, 0.0f);
}
Init q8_0_rounding() {
  return grid(120, 127, 0.3f);
}
Init q4_0_rounding() {
  return grid(7, 8, 0.3f);
}

double storage_tol(DType t) {
  // Quantized types beyond q8_0 / q4_0: the standard quantizer's mean error
  // on uniform [-1, 1] data and its worst over 2000 rows of 256 values, then
  // the tolerance: q4_1 3.7e-3 / 4.8e-3 -> 2e-2, q5_0 9.8e-4 / 1.3e-3 -> 5e-3,
  // q5_1 8.6e-4 / 1.1e-3 -> 5e-3, q2_K 5.4e-2 / 7.4e-2 -> 0.3, q3_K 1.6e-2 /
  // 2.0e-2 -> 8e-2, q4_K 3.0e-3 / 3.9e-3 -> 2e-2, q5_K 7.6e-4 / 9.9e-4 ->
  // 4e-3, q6_K 1.8e-4 / 2.3e-4 -> 1e-3, iq4_nl 4.1e-3 / 5.0e-3 -> 2e-2,
  // iq4_xs 4.2e-3 / 5.2e-3 -> 2e-2, mxfp4 2.1e-2 / 2.6e-2 -> 0.1 (a power-of-
  // two scale: values above 1.5 * 2^floor(log2 amax) clip). Loose by nature: quant_grid() cases pin
  // the quantizer exactly.
  switch (t) {
    case DType::f16: return 2e-6;
    case DType::bf16: return 3e-5;
    case DType::q8_0: return 2e-4;
    case DType::q4_0: return 2e-2;
    case DType::q4_1: return 2e-2;
    case DType::q5_0: return 5e-3;
    case DType::q5_1: return 5e-3;
    case DType::q2_K: return 0.3;
    case DType::q3_K: return 8e-2;
    case DType::q4_K: return 2e-2;
    case DType::q5_K: return 4e-3;
    case DType::q6_K: return 1e-3;
    case DType::iq4_nl: return 2e-2;
    case DType::iq4_xs: return 2e-2;
    case DType::mxfp4: return 0.1;
    case DType::f32:
    case DType::i32: return 0.0;
  }
  return 0.0;
}

double tol_for(DType out, double op_tol) {
  return std::max(op_tol, storage_tol(out));
}

double matmul_tol(DType w) {
  if (traits(w).quantized) return tol::kMatQuant;
  switch (w) {
    case DType::f16: return tol::kMatF16;
    case DType::bf16: return tol::kMatBF16;
    default: return tol::kMatF32;
  }
}

Tensor* CaseBuilder::input(DType type, const Shape& ne, Init init) {
  Tensor* t = ctx_.new_tensor(type, std::span<const int64_t>(ne.data(), ne.size()));
  t->flags |= kFlagInput;
  t->name = "in" + std::to_string(inits_.size());
  inits_.emplace_back(t, init ? std::move(init) : uniform(-1.0f, 1.0f));
  return t;
}

void CaseBuilder::output(Tensor* root, Tensor* dest, double tol) {
  root->flags |= kFlagOutput;
  dest->flags |= kFlagOutput;
  roots_.push_back(root);
  compared_.push_back({dest, tol});
}

const Init* CaseBuilder::init_for(const Tensor* t) const {
  for (const auto& [leaf, init] : inits_) {
    if (leaf == t) return &init;
  }
  return nullptr;
}

Tensor* operand(CaseBuilder& b, DType type, const Shape& ne, Layout layout, Init init) {
  Context& ctx = b.ctx();
  switch (layout) {
    case Layout::packed: return b.input(type, ne, std::move(init));
    case Layout::transposed: return ops::transpose(ctx, b.input(type, {ne[1], ne[0], ne[2], ne[3]}, std::move(init)));
    case Layout::permuted: {
      if (traits(type).quantized) {  // the row stays; dims 1 and 2 swap
        Tensor* leaf = b.input(type, {ne[0], ne[2], ne[1], ne[3]}, std::move(init));
        return ops::permute(ctx, leaf, 0, 2, 1, 3);
      }
      // Leaf dim i becomes result dim axes[i]: leaf = [ne2, ne0, ne1, ne3].
      Tensor* leaf = b.input(type, {ne[2], ne[0], ne[1], ne[3]}, std::move(init));
      return ops::permute(ctx, leaf, 2, 0, 1, 3);
    }
    case Layout::strided: {
      const int64_t block = traits(type).block_size;
      Tensor* big = b.input(type, {ne[0] + block, ne[1] + 1, ne[2], ne[3]}, std::move(init));
      const int64_t vne[] = {ne[0], ne[1], ne[2], ne[3]};
      const size_t vnb[] = {big->nb[0], big->nb[1], big->nb[2], big->nb[3]};
      return ops::view(ctx, big, vne, vnb, big->nb[1] + traits(type).unit_bytes);
    }
  }
  return nullptr;
}

std::string layout_suffix(Layout layout, const char* which) {
  switch (layout) {
    case Layout::packed: return "";
    case Layout::transposed: return std::string(" ") + which + "=transposed";
    case Layout::permuted: return std::string(" ") + which + "=permuted";
    case Layout::strided: return std::string(" ") + which + "=strided";
  }
  return "";
}

std::string shape_str(const Shape& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ne[i]);
  }
  return s + "]";
}

std::string dtype_str(DType t) {
  return std::string(dtype_name(t));
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  add_elementwise_cases(cases);
  add_row_cases(cases);
  add_matmul_cases(cases);
  add_data_cases(cases);
  add_chain_cases(cases);
  add_attention_cases(cases);
  return cases;
}

}  // namespace weft::conformance
