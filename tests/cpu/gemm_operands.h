// Operands of the packed products' tests (test_gemm.cpp, test_qgemm.cpp):
// random weight rows of one dtype, stored and dequantized, and a
// GemmOperands over plain arrays.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/gemm.h"
#include "weft/core/dtype.h"

namespace weft::cpu::gemm_test {

inline std::vector<float> randoms(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Weights of one dtype, stored and decoded.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // exactly what bytes hold
  size_t row = 0;             // bytes per row
};
inline Weights weights(DType t, int64_t k, int64_t rows, uint32_t seed) {
  Weights w;
  const std::vector<float> f = randoms(static_cast<size_t>(k * rows), seed);
  w.row = row_bytes(t, k);
  w.bytes.resize(w.row * static_cast<size_t>(rows));
  from_f32(t, f.data(), w.bytes.data(), k * rows);
  w.values.resize(f.size());
  to_f32(t, w.bytes.data(), w.values.data(), k * rows);
  return w;
}

// batches of b (each with n rows of k floats spaced step floats apart)
// against weight matrix bi / r of a; c packed.
class Operands final : public GemmOperands {
 public:
  Operands(const Weights& a, int64_t m, const float* b, int64_t k, int64_t n, int64_t step, float* c, int64_t batches,
           int64_t r)
      : a_(a), m_(m), b_(b), k_(k), n_(n), step_(step), c_(c), batches_(batches), r_(r) {}
  int64_t batches() const override { return batches_; }
  int64_t cols(int64_t) const override { return n_; }
  const uint8_t* a_rows(int64_t bi) const override { return a_.bytes.data() + (bi / r_) * m_ * a_.row; }
  size_t a_stride() const override { return a_.row; }
  const uint8_t* b_row(int64_t bi, int64_t j) const override {
    return reinterpret_cast<const uint8_t*>(b_ + (bi * n_ + j) * k_ * step_);
  }
  float* c_row(int64_t bi, int64_t j) const override { return c_ + (bi * n_ + j) * m_; }

 private:
  const Weights& a_;
  int64_t m_;
  const float* b_;
  int64_t k_, n_, step_;
  float* c_;
  int64_t batches_, r_;
};

}  // namespace weft::cpu::gemm_test
