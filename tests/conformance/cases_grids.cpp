// Inputs that quantize without error: quant_grid(t) for the writes into
// every quantized dtype, q8_act_grid() for activations that 8-bit blocks hold
// exactly. Each block is built from the type's own parameters (power-of-two
// steps, integer sub-block scales and mins, integer quants) with every range
// reached at its ends, so the standard quantizer's search finds exactly those
// parameters and nothing else fits as well. The steps are chosen so that all
// values stay within about [-1, 1] and every scale is a normal f16.
#include <algorithm>
#include <cmath>

#include "conformance/cases.h"

namespace weft::conformance {
namespace {

int uni(Rng& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

float step(int e) {
  return std::ldexp(1.0f, -e);
}

// n integers in [lo, hi], with lo and hi each at a random (distinct) position.
void ints(Rng& rng, int* q, int n, int lo, int hi) {
  for (int i = 0; i < n; ++i) q[i] = uni(rng, lo, hi);
  const int a = uni(rng, 0, n - 1);
  int b = uni(rng, 0, n - 2);
  if (b >= a) ++b;
  q[a] = lo;
  q[b] = hi;
}

// Nonzero integers in [lo, hi] with lo (the largest magnitude) once: the
// sub-block scales of the symmetric K-quants, whose super-block scale is
// taken from the scale of largest magnitude.
void signed_scales(Rng& rng, int* s, int n, int lo, int hi) {
  for (int i = 0; i < n; ++i) {
    do s[i] = uni(rng, lo + 1, hi);
    while (s[i] == 0);
  }
  s[uni(rng, 0, n - 1)] = lo;
}

constexpr int kCaseIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// 32-value blocks with a min: x = (q - k0) * D, q over [0, nmax] at both
// ends, so min = -k0 D, d = (max - min) / nmax = D.
void block_with_min(Rng& rng, float* v, int nmax) {
  const float d = step(uni(rng, 5, 8));
  const int k0 = uni(rng, 0, nmax);
  int q[32];
  ints(rng, q, 32, 0, nmax);
  for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(q[i] - k0) * d;
}

// q5_0: k D with |k| <= 15 and one value at +-16 D (d = max / -16).
void block_q5_0(Rng& rng, float* v) {
  const float d = step(uni(rng, 5, 8));
  for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(uni(rng, -15, 15)) * d;
  v[uni(rng, 0, 31)] = static_cast<float>(uni(rng, 0, 1) ? 16 : -16) * d;
}

// iq4_nl: s * level, s = +-2^-e, the -127 level present (it alone is the
// largest magnitude, which fixes the scale search on s).
void block_iq4_nl(Rng& rng, float* v) {
  const float s = step(uni(rng, 7, 9)) * (uni(rng, 0, 1) ? 1.0f : -1.0f);
  int j[32];
  ints(rng, j, 32, 0, 15);
  for (int i = 0; i < 32; ++i) v[i] = s * static_cast<float>(kCaseIq4Levels[j[i]]);
}

// mxfp4: D * level, D = 2^-e, levels twice E2M1 (ggml's kvalues_mxfp4) with
// -12 (code 15) present: amax = 12 D, whose exponent byte gives the scale D.
constexpr int kMxfp4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
void block_mxfp4(Rng& rng, float* v) {
  const float d = step(uni(rng, 4, 6));
  int j[32];
  ints(rng, j, 32, 0, 15);
  for (int i = 0; i < 32; ++i) v[i] = d * static_cast<float>(kMxfp4Levels[j[i]]);
}

// q2_K / q4_K / q5_K: sub-blocks of `sub` values x = q * ls * D - lm * M with
// q over [0, nmax] at both ends, ls in [1, smax] and lm in [0, smax] both
// reaching smax in some sub-block: the super-block scales are then D and M.
void block_k_min(Rng& rng, float* v, int sub, int nmax, int smax, int e_lo, int e_hi) {
  const int n_sub = 256 / sub;
  const float d = step(uni(rng, e_lo, e_hi)), m = step(uni(rng, e_lo, e_hi));
  int ls[16], lm[16];
  ints(rng, ls, n_sub, 1, smax);
  ints(rng, lm, n_sub, 0, smax);
  for (int j = 0; j < n_sub; ++j) {
    int q[32];
    ints(rng, q, sub, 0, nmax);
    for (int i = 0; i < sub; ++i) {
      v[j * sub + i] = static_cast<float>(q[i] * ls[j]) * d - static_cast<float>(lm[j]) * m;
    }
  }
}

// q3_K / q6_K: 16 sub-blocks x = q * ls * D, q over [-qmax, qmax - 1] with
// -qmax present, ls nonzero in [-smax, smax - 1] with -smax once.
void block_k_symmetric(Rng& rng, float* v, int qmax, int smax, int e_lo, int e_hi) {
  const float d = step(uni(rng, e_lo, e_hi));
  int ls[16];
  signed_scales(rng, ls, 16, -smax, smax - 1);
  for (int j = 0; j < 16; ++j) {
    int q[16];
    ints(rng, q, 16, -qmax, qmax - 1);
    for (int i = 0; i < 16; ++i) v[16 * j + i] = static_cast<float>(q[i] * ls[j]) * d;
  }
}

// iq4_xs: 8 sub-blocks of 32, x = d * l * level, d = +-2^-e, l nonzero in
// [-32, 31] with -32 once, the -127 level in every sub-block.
void block_iq4_xs(Rng& rng, float* v) {
  const float d = step(uni(rng, 12, 13)) * (uni(rng, 0, 1) ? 1.0f : -1.0f);
  int l[8];
  signed_scales(rng, l, 8, -32, 31);
  for (int b = 0; b < 8; ++b) {
    int j[32];
    ints(rng, j, 32, 0, 15);
    for (int i = 0; i < 32; ++i) v[32 * b + i] = d * static_cast<float>(l[b] * kCaseIq4Levels[j[i]]);
  }
}

}  // namespace

Init quant_grid(DType t) {
  if (t == DType::q4_0) return q4_0_grid();
  if (!traits(t).quantized || t == DType::q8_0) return q8_0_grid();
  return [t](const Tensor&, Rng& rng, std::vector<float>& v) {
    const auto block = static_cast<size_t>(traits(t).block_size);
    for (size_t b = 0; b + block <= v.size(); b += block) {
      float* x = v.data() + b;
      switch (t) {
        case DType::q4_1: block_with_min(rng, x, 15); break;
        case DType::q5_1: block_with_min(rng, x, 31); break;
        case DType::q5_0: block_q5_0(rng, x); break;
        case DType::iq4_nl: block_iq4_nl(rng, x); break;
        case DType::q2_K: block_k_min(rng, x, 16, 3, 15, 6, 8); break;
        case DType::q4_K: block_k_min(rng, x, 32, 15, 63, 10, 11); break;
        case DType::q5_K: block_k_min(rng, x, 32, 31, 63, 11, 12); break;
        case DType::q3_K: block_k_symmetric(rng, x, 4, 32, 7, 9); break;
        case DType::q6_K: block_k_symmetric(rng, x, 32, 128, 12, 13); break;
        case DType::iq4_xs: block_iq4_xs(rng, x); break;
        case DType::mxfp4: block_mxfp4(rng, x); break;
        default: break;
      }
    }
  };
}

Init q8_act_grid() {
  return [](const Tensor&, Rng& rng, std::vector<float>& v) {
    for (size_t b = 0; b < v.size(); b += 256) {
      const float d = step(uni(rng, 7, 9));
      const size_t n = std::min<size_t>(256, v.size() - b);
      for (size_t i = 0; i < n; ++i) v[b + i] = static_cast<float>(uni(rng, -126, 126)) * d;
      for (size_t c = 0; c < n; c += 32) {
        v[b + c + static_cast<size_t>(uni(rng, 0, static_cast<int>(std::min<size_t>(32, n - c)) - 1))] =
            (uni(rng, 0, 1) ? 127.0f : -127.0f) * d;
      }
    }
  };
}

}  // namespace weft::conformance
