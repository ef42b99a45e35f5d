// A float64 BERT encoder forward pass for tests, written independently of
// weft's graph: post-norm layers (LayerNorm with bias after each residual),
// learned absolute positions and token types, bidirectional multi-head
// attention with biases, and an exact-erf GELU feed-forward. It reads only
// the values of the tensors written into the GGUF file (RefTensor::v, the
// float64 decode of the stored bytes), so quantized matrices are used as
// stored. Tensor names, shapes and keys are llama.cpp's for BERT files.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/llama_reference.h"
#include "weft/core/dtype.h"
#include "weft/gguf/gguf.h"

namespace bert_reference {

using llama_reference::make_tensor;
using llama_reference::matvec;
using llama_reference::RefTensor;
using llama_reference::RefTensors;
using llama_reference::TempFile;

// A BERT model's hyperparameters. pooling is numbered as llama.cpp's
// bert.pooling_type: 1 mean, 2 cls. head_dim() = dim / heads (heads divides dim).
struct BertShape {
  int64_t vocab = 0, dim = 0, layers = 0, heads = 0, ff = 0;
  int64_t n_ctx_train = 64;  // rows of position_embd; bert.context_length
  int64_t n_types = 2;       // rows of token_types; tokenizer.ggml.token_type_count
  float eps = 1e-12f;        // bert.attention.layer_norm_epsilon
  int pooling = 1;
  int64_t head_dim() const { return dim / heads; }
};

// Random weights for s, the same for the same (s, seed, matrix_type): every
// value u uniform in [-0.1, 0.1] (std::mt19937(seed)), except LayerNorm
// weights 1 + 2u. The 2-D matrices (token_embd and each layer's attention
// q/k/v/output and ffn up/down) are stored as matrix_type (f32, q8_0 or any
// type make_tensor takes; a block type needs dim and ff multiples of its
// block size); biases, norms, token_types and position_embd are f32.
// Shapes are GGUF ne order, [columns, rows].
inline RefTensors make_bert_tensors(const BertShape& s, unsigned seed, weft::DType matrix_type) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  RefTensors t;
  auto add = [&](const std::string& name, std::vector<int64_t> ne, weft::DType type, float scale, float offset) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::vector<float> f(static_cast<size_t>(n));
    for (float& a : f) a = offset + scale * u(rng);
    t[name] = make_tensor(std::move(ne), f, type);
  };
  const weft::DType f32 = weft::DType::f32;
  auto matrix = [&](const std::string& name, int64_t cols, int64_t rows) {
    add(name, {cols, rows}, matrix_type, 1, 0);
  };
  auto vec = [&](const std::string& name, int64_t n) { add(name, {n}, f32, 1, 0); };
  auto norm = [&](const std::string& name, int64_t n) {
    add(name + ".weight", {n}, f32, 2, 1);
    add(name + ".bias", {n}, f32, 1, 0);
  };
  matrix("token_embd.weight", s.dim, s.vocab);
  add("token_types.weight", {s.dim, s.n_types}, f32, 1, 0);
  add("position_embd.weight", {s.dim, s.n_ctx_train}, f32, 1, 0);
  norm("token_embd_norm", s.dim);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output"}) {  // as many kv heads as heads
      matrix(b + m + ".weight", s.dim, s.dim);
      vec(b + m + ".bias", s.dim);
    }
    norm(b + "attn_output_norm", s.dim);
    matrix(b + "ffn_up.weight", s.dim, s.ff);
    vec(b + "ffn_up.bias", s.ff);
    matrix(b + "ffn_down.weight", s.ff, s.dim);
    vec(b + "ffn_down.bias", s.dim);
    norm(b + "layer_output_norm", s.dim);
  }
  return t;  // no output.weight, no output_norm: an encoder
}

// Writes general.architecture "bert", the bert.* keys of s,
// tokenizer.ggml.token_type_count, whatever keys adds (after these, so it
// may override them), then every tensor of t.
inline void write_bert_model(const std::string& path, const BertShape& s, const RefTensors& t,
                             const std::function<void(weft::GgufWriter&)>& keys = {}) {
  weft::GgufWriter w;
  w.set_string("general.architecture", "bert");
  w.set_u32("bert.context_length", static_cast<uint32_t>(s.n_ctx_train));
  w.set_u32("bert.embedding_length", static_cast<uint32_t>(s.dim));
  w.set_u32("bert.feed_forward_length", static_cast<uint32_t>(s.ff));
  w.set_u32("bert.block_count", static_cast<uint32_t>(s.layers));
  w.set_u32("bert.attention.head_count", static_cast<uint32_t>(s.heads));
  w.set_f32("bert.attention.layer_norm_epsilon", s.eps);
  w.set_bool("bert.attention.causal", false);
  w.set_u32("bert.pooling_type", static_cast<uint32_t>(s.pooling));
  w.set_u32("tokenizer.ggml.token_type_count", static_cast<uint32_t>(s.n_types));
  if (keys) keys(w);
  for (const auto& [name, r] : t) w.add_tensor(name, r.type, r.ne, r.bytes.data());
  w.write(path);
}

// LayerNorm(x) * w + b: (x - mean) / sqrt(var + eps), var the biased
// (population) variance.
inline std::vector<double> bert_layer_norm(const std::vector<double>& x, const std::vector<double>& w,
                                           const std::vector<double>& b, float eps) {
  const double n = static_cast<double>(x.size());
  double mean = 0, var = 0;
  for (double a : x) mean += a;
  mean /= n;
  for (double a : x) var += (a - mean) * (a - mean);
  var /= n;
  const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) * inv * w[i] + b[i];
  return y;
}

// W x + bias for W stored [x.size(), rows].
inline std::vector<double> bert_affine(const std::vector<double>& w, const std::vector<double>& bias,
                                       const std::vector<double>& x, int64_t rows) {
  std::vector<double> y = matvec(w, x, rows);
  for (size_t r = 0; r < y.size(); ++r) y[r] += bias[r];
  return y;
}

// The exact GELU: 0.5 z (1 + erf(z / sqrt 2)).
inline double bert_gelu(double z) {
  return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
}

// The hidden state [token][dim] of every token after the last layer (the
// encoder's output; no further norm) for ONE sequence, token i at position i
// (tokens.size() <= n_ctx_train), token type 0, every token attending to
// every token (no causal mask). K and V are NOT rounded to f16, unlike
// llama_reference: the tests' tolerance covers an f16 KV cache.
inline std::vector<std::vector<double>> bert_forward(const BertShape& s, const RefTensors& t,
                                                     const std::vector<int32_t>& tokens) {
  auto v = [&](const std::string& name) -> const std::vector<double>& { return t.at(name).v; };
  const size_t n = tokens.size(), dim = static_cast<size_t>(s.dim);
  if (static_cast<int64_t>(n) > s.n_ctx_train) throw std::invalid_argument("bert_forward: sequence too long");
  const int64_t hd = s.head_dim();
  std::vector<std::vector<double>> x(n, std::vector<double>(dim));
  const auto &embd = v("token_embd.weight"), &types = v("token_types.weight"), &pos = v("position_embd.weight");
  for (size_t i = 0; i < n; ++i) {
    const size_t tok = static_cast<size_t>(tokens[i]);
    for (size_t c = 0; c < dim; ++c) x[i][c] = embd[tok * dim + c] + types[c] + pos[i * dim + c];
    x[i] = bert_layer_norm(x[i], v("token_embd_norm.weight"), v("token_embd_norm.bias"), s.eps);
  }
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    auto affine = [&](const std::string& m, const std::vector<double>& in, int64_t rows) {
      return bert_affine(v(b + m + ".weight"), v(b + m + ".bias"), in, rows);
    };
    std::vector<std::vector<double>> q(n), k(n), val(n);
    for (size_t i = 0; i < n; ++i) {
      q[i] = affine("attn_q", x[i], s.dim);
      k[i] = affine("attn_k", x[i], s.dim);
      val[i] = affine("attn_v", x[i], s.dim);
    }
    std::vector<std::vector<double>> next(n);
    for (size_t i = 0; i < n; ++i) {
      std::vector<double> attn(dim, 0.0);
      for (int64_t h = 0; h < s.heads; ++h) {  // head h: values h*hd .. h*hd+hd-1
        std::vector<double> sc(n);
        double mx = -INFINITY;
        for (size_t j = 0; j < n; ++j) {  // bidirectional: every key
          double d = 0;
          for (int64_t c = 0; c < hd; ++c) d += q[i][h * hd + c] * k[j][h * hd + c];
          sc[j] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (double& e : sc) sum += (e = std::exp(e - mx));  // stable softmax: max subtracted
        for (size_t j = 0; j < n; ++j)
          for (int64_t c = 0; c < hd; ++c) attn[h * hd + c] += sc[j] / sum * val[j][h * hd + c];
      }
      std::vector<double> y = affine("attn_output", attn, s.dim);
      for (size_t c = 0; c < dim; ++c) y[c] += x[i][c];
      y = bert_layer_norm(y, v(b + "attn_output_norm.weight"), v(b + "attn_output_norm.bias"), s.eps);
      std::vector<double> up = affine("ffn_up", y, s.ff);
      for (double& a : up) a = bert_gelu(a);
      std::vector<double> f = affine("ffn_down", up, s.dim);
      for (size_t c = 0; c < dim; ++c) f[c] += y[c];
      next[i] = bert_layer_norm(f, v(b + "layer_output_norm.weight"), v(b + "layer_output_norm.bias"), s.eps);
    }
    x = std::move(next);  // every token's attention read this layer's x; replace it only now
  }
  return x;
}

// The sequence embedding from bert_forward's hidden states: the mean over
// tokens (pooling 1) or the first token (pooling 2), divided by its
// Euclidean norm. Throws std::invalid_argument for another pooling, or no tokens.
inline std::vector<double> pool(const std::vector<std::vector<double>>& hidden, int pooling) {
  if (pooling != 1 && pooling != 2) throw std::invalid_argument("pool: pooling must be 1 (mean) or 2 (cls)");
  if (hidden.empty()) throw std::invalid_argument("pool: no tokens");
  std::vector<double> e(hidden[0].size(), 0.0);
  if (pooling == 2) {
    e = hidden[0];
  } else {
    for (const auto& row : hidden)
      for (size_t c = 0; c < e.size(); ++c) e[c] += row[c];
    for (double& a : e) a /= static_cast<double>(hidden.size());
  }
  double ss = 0;
  for (double a : e) ss += a * a;
  const double norm = std::sqrt(ss);
  for (double& a : e) a /= norm;
  return e;
}

}  // namespace bert_reference
