// A float64 llama forward pass for tests, written from FACTS.md
// ("Llama-family files") independently of weft's graph: its own rms_norm,
// rope (normal and neox), grouped-query attention with a causal mask over an
// f16-rounded KV cache, and its own q8_0/f16 decoders. The feed-forward is the
// caller's (dense in test_llama.cpp, mixture of experts in
// test_llama_moe.cpp). It reads only the bytes written into the GGUF file.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "conformance/reference.h"
#include "weft/backend/cpu.h"
#include "weft/core/dtype.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"

namespace llama_reference {

using weft::DType;

// One tensor as the file holds it: its bytes, and the float64 values the
// reference uses (decoded from those bytes).
struct RefTensor {
  DType type = DType::f32;
  std::vector<int64_t> ne;
  std::vector<uint8_t> bytes;
  std::vector<double> v;
};
using RefTensors = std::map<std::string, RefTensor>;

inline double f16_decode(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  double r;
  if (exp == 0)
    r = std::ldexp(mant, -24);
  else if (exp == 31)
    r = mant ? NAN : INFINITY;
  else
    r = std::ldexp(1024 + mant, exp - 25);
  return sign ? -r : r;
}

// Round to the nearest f16 value (ties to even), as the f16 KV cache does.
inline double f16_round(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  const int quantum = std::max(e - 11, -24);
  return std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);
}

inline std::vector<double> q8_0_decode(const uint8_t* p, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* blk = p + b * 34;
    uint16_t d;
    std::memcpy(&d, blk, 2);
    for (int i = 0; i < 32; ++i) out[static_cast<size_t>(b * 32 + i)] = f16_decode(d) * static_cast<int8_t>(blk[2 + i]);
  }
  return out;
}

// f stored as type (f32, or any quantized type, quantized by weft) and
// decoded by this file (q8_0) or the conformance suite's float64 decoders
// (every other block type; tests/conformance/reference_quant.cpp).
inline RefTensor make_tensor(std::vector<int64_t> ne, const std::vector<float>& f, DType type) {
  RefTensor r;
  r.ne = std::move(ne);
  r.type = type;
  const int64_t n = static_cast<int64_t>(f.size());
  if (type == DType::q8_0) {
    r.bytes.resize(weft::row_bytes(DType::q8_0, n));
    weft::from_f32(DType::q8_0, f.data(), r.bytes.data(), n);  // quantize with weft; decode with ours
    r.v = q8_0_decode(r.bytes.data(), n);
  } else if (weft::traits(type).quantized) {
    const weft::conformance::RefQuantFormat* fmt = weft::conformance::ref_quant_format(type);
    r.bytes.resize(weft::row_bytes(type, n));
    weft::from_f32(type, f.data(), r.bytes.data(), n);
    r.v.resize(f.size());
    for (int64_t b = 0; b < n / fmt->block_values; ++b)
      fmt->decode(r.bytes.data() + b * fmt->block_bytes, r.v.data() + b * fmt->block_values);
  } else {
    r.bytes.resize(f.size() * 4);
    std::memcpy(r.bytes.data(), f.data(), r.bytes.size());
    r.v.assign(f.begin(), f.end());
  }
  return r;
}

// A model's hyperparameters as the reference and the file's keys see them.
struct Shape {
  std::string arch = "llama";  // qwen2: neox rope
  int64_t vocab = 0, dim = 0, layers = 0, heads = 0, heads_kv = 0, ff = 0;
  float eps = 1e-5f;
  float base = 10000.f;
  int64_t head_dim() const { return dim / heads; }
};

// Writes general.architecture, the ARCH.* keys of s (context 64), whatever
// keys adds, and every tensor of t.
inline void write_model(const std::string& path, const Shape& s, const RefTensors& t,
                        const std::function<void(weft::GgufWriter&)>& keys = {}) {
  weft::GgufWriter w;
  const std::string& a = s.arch;
  w.set_string("general.architecture", a);
  w.set_u32(a + ".context_length", 64);
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(s.dim));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(s.layers));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(s.heads));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.heads_kv));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", s.eps);
  w.set_f32(a + ".rope.freq_base", s.base);
  if (keys) keys(w);
  for (const auto& [name, r] : t) w.add_tensor(name, r.type, r.ne, r.bytes.data());
  w.write(path);
}

// y = W x for W stored [cols, rows] (cols = x.size()).
inline std::vector<double> matvec(std::span<const double> w, const std::vector<double>& x, int64_t rows) {
  const size_t cols = x.size();
  std::vector<double> y(static_cast<size_t>(rows));
  for (size_t r = 0; r < y.size(); ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += w[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

inline std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<double>& w, float eps) {
  double ss = 0;
  for (double a : x) ss += a * a;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + static_cast<double>(eps));
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// SwiGLU: silu(g) * u, elementwise into g.
inline void swiglu(std::vector<double>& g, const std::vector<double>& u) {
  for (size_t c = 0; c < g.size(); ++c) g[c] = g[c] / (1 + std::exp(-g[c])) * u[c];
}

inline void rope(const Shape& s, std::vector<double>& x, int64_t n_heads, int64_t pos) {
  const bool neox = s.arch == "qwen2";
  const int64_t d = s.head_dim();
  for (int64_t h = 0; h < n_heads; ++h) {
    double* hx = x.data() + h * d;
    for (int64_t i = 0; i < d / 2; ++i) {
      const double theta = static_cast<double>(pos) * std::pow(static_cast<double>(s.base), -2.0 * i / d);
      const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + d / 2 : 2 * i + 1;
      const double a = hx[i0], b = hx[i1];
      hx[i0] = a * std::cos(theta) - b * std::sin(theta);
      hx[i1] = a * std::sin(theta) + b * std::cos(theta);
    }
  }
}

// The feed-forward output of layer `layer` for n = rms_norm(h) * ffn_norm.
using Ffn = std::function<std::vector<double>(int64_t layer, const std::vector<double>& n)>;

// The hidden states [token][dim] after the output norm for the whole
// sequence, token i at position i (what embeddings pool). q/k/v biases are
// added when t has them.
inline std::vector<std::vector<double>> forward_hidden(const Shape& s, const RefTensors& t,
                                                       const std::vector<int32_t>& tokens, const Ffn& ffn) {
  auto v = [&](const std::string& name) -> const std::vector<double>& { return t.at(name).v; };
  const size_t n = tokens.size();
  const int64_t hd = s.head_dim(), q_dim = s.heads * hd, kv_dim = s.heads_kv * hd;
  std::vector<std::vector<double>> x(n);
  const auto& embd = v("token_embd.weight");
  for (size_t i = 0; i < n; ++i) x[i].assign(embd.begin() + tokens[i] * s.dim, embd.begin() + (tokens[i] + 1) * s.dim);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    auto add_bias = [&](std::vector<double>& y, const std::string& name) {
      if (t.count(b + name))
        for (size_t j = 0; j < y.size(); ++j) y[j] += v(b + name)[j];
    };
    std::vector<std::vector<double>> q(n), k(n), val(n);
    for (size_t i = 0; i < n; ++i) {
      const auto h = rms_norm(x[i], v(b + "attn_norm.weight"), s.eps);
      q[i] = matvec(v(b + "attn_q.weight"), h, q_dim);
      k[i] = matvec(v(b + "attn_k.weight"), h, kv_dim);
      val[i] = matvec(v(b + "attn_v.weight"), h, kv_dim);
      add_bias(q[i], "attn_q.bias");
      add_bias(k[i], "attn_k.bias");
      add_bias(val[i], "attn_v.bias");
      rope(s, q[i], s.heads, static_cast<int64_t>(i));
      rope(s, k[i], s.heads_kv, static_cast<int64_t>(i));
      for (double& a : k[i]) a = f16_round(a);  // the KV cache is f16
      for (double& a : val[i]) a = f16_round(a);
    }
    for (size_t i = 0; i < n; ++i) {
      std::vector<double> attn(static_cast<size_t>(q_dim), 0.0);
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t hk = h / (s.heads / s.heads_kv);
        std::vector<double> sc(i + 1);
        double mx = -INFINITY;
        for (size_t j = 0; j <= i; ++j) {  // causal: keys 0..i
          double d = 0;
          for (int64_t c = 0; c < hd; ++c) d += q[i][h * hd + c] * k[j][hk * hd + c];
          sc[j] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (double& e : sc) sum += (e = std::exp(e - mx));
        for (size_t j = 0; j <= i; ++j)
          for (int64_t c = 0; c < hd; ++c) attn[h * hd + c] += sc[j] / sum * val[j][hk * hd + c];
      }
      const auto o = matvec(v(b + "attn_output.weight"), attn, s.dim);
      for (int64_t c = 0; c < s.dim; ++c) x[i][c] += o[c];
      const auto f = ffn(l, rms_norm(x[i], v(b + "ffn_norm.weight"), s.eps));
      for (int64_t c = 0; c < s.dim; ++c) x[i][c] += f[c];
    }
  }
  for (size_t i = 0; i < n; ++i) x[i] = rms_norm(x[i], v("output_norm.weight"), s.eps);
  return x;
}

// Logits [token][vocab] for the whole sequence, token i at position i
// (forward_hidden, then the output matrix: token_embd unless t has
// output.weight).
inline std::vector<std::vector<double>> forward(const Shape& s, const RefTensors& t, const std::vector<int32_t>& tokens,
                                                const Ffn& ffn) {
  std::vector<std::vector<double>> x = forward_hidden(s, t, tokens, ffn);
  const auto& out = t.count("output.weight") ? t.at("output.weight").v : t.at("token_embd.weight").v;
  for (auto& row : x) row = matvec(out, row, s.vocab);
  return x;
}

// sum (a - b)^2 / sum b^2 over one token's logits.
inline double nerr(const float* a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return num / den;
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("weft_llama_" + std::to_string(::getpid()) + "_" + name))
                 .string()) {}
  ~TempFile() { std::filesystem::remove(path); }
};

// Evaluates seq (the prompt) through eval(tokens, n_past) -> logits, then
// `steps` greedy single-token steps through the KV cache, appending each
// chosen token to seq; `all` gets every token's logits, token-major.
template <class Eval>
void eval_with_steps(Eval&& eval, std::vector<int32_t>& seq, int steps, int64_t vocab, std::vector<float>& all) {
  all = eval(std::span<const int32_t>(seq), 0);
  ASSERT_EQ(all.size(), seq.size() * static_cast<size_t>(vocab));
  for (int step = 0; step < steps; ++step) {
    const int32_t next = weft::model::greedy(&all[all.size() - static_cast<size_t>(vocab)], static_cast<int>(vocab));
    const int64_t n_past = static_cast<int64_t>(seq.size());
    seq.push_back(next);
    std::vector<float> l = eval(std::span<const int32_t>(&seq.back(), 1), n_past);
    ASSERT_EQ(l.size(), static_cast<size_t>(vocab));
    all.insert(all.end(), l.begin(), l.end());
  }
}

// What eval_file saw: the tokens (prompt then generated), every token's
// logits (token-major) and the model's parameters.
struct CachedRun {
  std::vector<int32_t> seq = {1, 7, 22, 36, 5};
  std::vector<float> logits;
  weft::model::LlamaParams params;
};

// Loads the model at path on a 2-thread CPU (16 positions of cache; the file
// closed once loaded) and evaluates run.seq, the prompt, then 2 greedy
// single-token steps through the KV cache (appended to run.seq).
inline void eval_file(const std::string& path, CachedRun& run) {
  auto file = weft::GgufFile::open(path);
  auto dev = weft::make_cpu_device(2);
  weft::Executor model(*file, *dev, 16);
  file.reset();  // the model keeps its own copy
  run.params = model.params();
  eval_with_steps([&](std::span<const int32_t> tok, int64_t n_past) { return model.eval(tok, n_past); },
                  run.seq, 2, run.params.n_vocab, run.logits);
}

// Expects every token's normalized error below tol, prints and returns the worst.
inline double expect_close(const std::vector<float>& all, const std::vector<std::vector<double>>& ref, double tol,
                           const std::string& name) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = nerr(&all[i * ref[i].size()], ref[i]);
    worst = std::max(worst, e);
    EXPECT_LT(e, tol) << name << " token " << i;
  }
  std::printf("[ %s ] worst normalized error %.3g over %zu tokens\n", name.c_str(), worst, ref.size());
  return worst;
}

// Loading the file at path, and planning it split after layer 1, both fail
// with Error(invalid_input) whose message holds every needle.
inline void expect_load_error(const std::string& path, const std::vector<std::string>& needles) {
  auto file = weft::GgufFile::open(path);
  auto dev = weft::make_cpu_device(1);
  auto check = [&](const char* what, const std::function<void()>& f) {
    try {
      f();
      ADD_FAILURE() << "expected " << what << " error for " << path;
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      for (const std::string& s : needles) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
    }
  };
  check("a load", [&] { weft::Executor model(*file, *dev, 16); });
  // The plan checks the same tensors, with the same errors, before anything loads.
  const int64_t layers = file->get_i64(file->get_string("general.architecture").value() + ".block_count").value();
  const int64_t bounds[] = {0, 1, layers};
  check("a plan", [&] { weft::model::LlamaModel::plan(*file, bounds, 16); });
}

// Writes a Model(spec, path) (a test's tiny model writer, whose
// forward(tokens) gives the reference logits), evaluates the file with
// eval_file and expects every token's logits within tol of the reference's
// (normalized error); then calls more(tiny, run, reference logits).
template <class Model, class Spec, class More>
void check_against_reference(const Spec& spec, const std::string& name, double tol, More&& more) {
  TempFile f(name);
  Model tiny(spec, f.path);
  CachedRun run;
  eval_file(f.path, run);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const std::vector<std::vector<double>> ref = tiny.forward(run.seq);
  expect_close(run.logits, ref, tol, name);
  more(tiny, run, ref);
}

// Writes a Model(spec, path) (a test's tiny model writer) and expects its
// load and plan errors to hold every needle.
template <class Model, class Spec>
void expect_load_error(const Spec& spec, const std::string& name, const std::vector<std::string>& needles) {
  TempFile f(name);
  Model tiny(spec, f.path);
  expect_load_error(f.path, needles);
}

}  // namespace llama_reference
