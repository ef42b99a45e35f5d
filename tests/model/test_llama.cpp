// LlamaModel against an independent float64 forward pass written here from
// FACTS.md ("Llama-family files"): its own rms_norm, rope (normal and neox),
// grouped-query attention with a causal mask, SwiGLU, and its own q8_0/f16
// decoders. It reads only the bytes written into the GGUF file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "weft/cpu.h"
#include "weft/dtype.h"
#include "weft/error.h"
#include "weft/gguf.h"
#include "weft/model.h"
#include "weft/perplexity.h"

namespace {

namespace fs = std::filesystem;
using weft::DType;

struct Spec {
  std::string arch = "llama";
  bool q8 = false;       // q8_0 matmul weights (those with rows of 32k values) and a separate output
  bool biases = false;   // q/k/v biases
  std::string drop;      // a tensor to leave out
  std::string bad;       // a tensor written with the wrong shape
};

constexpr int64_t kVocab = 37, kDim = 32, kLayers = 2, kHeads = 4, kHeadsKv = 2, kFf = 48;
constexpr int64_t kHeadDim = kDim / kHeads;
constexpr float kEps = 1e-5f;
constexpr float kBase = 10000.f;

// One tensor as the file holds it: its bytes, and the float64 values the
// reference uses (decoded from those bytes).
struct RefTensor {
  DType type = DType::f32;
  std::vector<int64_t> ne;
  std::vector<uint8_t> bytes;
  std::vector<double> v;
};

double f16_decode(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  double r;
  if (exp == 0) r = std::ldexp(mant, -24);
  else if (exp == 31) r = mant ? NAN : INFINITY;
  else r = std::ldexp(1024 + mant, exp - 25);
  return sign ? -r : r;
}

// Round to the nearest f16 value (ties to even), as the f16 KV cache does.
double f16_round(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  const int quantum = std::max(e - 11, -24);
  return std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);
}

std::vector<double> q8_0_decode(const uint8_t* p, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* blk = p + b * 34;
    uint16_t d;
    std::memcpy(&d, blk, 2);
    for (int i = 0; i < 32; ++i)
      out[static_cast<size_t>(b * 32 + i)] = f16_decode(d) * static_cast<int8_t>(blk[2 + i]);
  }
  return out;
}

struct TinyModel {
  Spec spec;
  std::map<std::string, RefTensor> t;
  std::string path;

  TinyModel(const Spec& s, const std::string& file) : spec(s), path(file) {
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> u(-0.2f, 0.2f);
    auto add = [&](const std::string& name, std::vector<int64_t> ne, bool norm, bool quant) {
      RefTensor r;
      r.ne = ne;
      int64_t n = 1;
      for (int64_t d : ne) n *= d;
      std::vector<float> f(static_cast<size_t>(n));
      for (float& x : f) x = norm ? 1.0f + 0.5f * u(rng) : u(rng);
      r.type = quant && ne[0] % 32 == 0 ? DType::q8_0 : DType::f32;
      if (r.type == DType::q8_0) {
        r.bytes.resize(weft::row_bytes(DType::q8_0, n));
        weft::from_f32(DType::q8_0, f.data(), r.bytes.data(), n);  // quantize with weft; decode with ours
        r.v = q8_0_decode(r.bytes.data(), n);
      } else {
        r.bytes.resize(f.size() * 4);
        std::memcpy(r.bytes.data(), f.data(), r.bytes.size());
        r.v.assign(f.begin(), f.end());
      }
      t[name] = std::move(r);
    };
    const bool q = spec.q8;
    add("token_embd.weight", {kDim, kVocab}, false, q);
    add("output_norm.weight", {kDim}, true, false);
    if (q) add("output.weight", {kDim, kVocab}, false, q);
    for (int64_t i = 0; i < kLayers; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      add(b + "attn_norm.weight", {kDim}, true, false);
      add(b + "attn_q.weight", {kDim, kHeads * kHeadDim}, false, q);
      add(b + "attn_k.weight", {kDim, kHeadsKv * kHeadDim}, false, q);
      add(b + "attn_v.weight", {kDim, kHeadsKv * kHeadDim}, false, q);
      add(b + "attn_output.weight", {kHeads * kHeadDim, kDim}, false, q);
      if (spec.biases) {
        add(b + "attn_q.bias", {kHeads * kHeadDim}, false, false);
        add(b + "attn_k.bias", {kHeadsKv * kHeadDim}, false, false);
        add(b + "attn_v.bias", {kHeadsKv * kHeadDim}, false, false);
      }
      add(b + "ffn_norm.weight", {kDim}, true, false);
      add(b + "ffn_gate.weight", {kDim, kFf}, false, q);
      add(b + "ffn_up.weight", {kDim, kFf}, false, q);
      add(b + "ffn_down.weight", {kFf, kDim}, false, q);  // 48-value rows: stays f32
    }
    if (!spec.bad.empty()) {
      RefTensor& r = t.at(spec.bad);
      r.type = DType::f32;
      r.ne[r.ne.size() - 1] += 1;
      int64_t n = 1;
      for (int64_t d : r.ne) n *= d;
      r.bytes.assign(static_cast<size_t>(n) * 4, 0);
    }
    if (!spec.drop.empty()) t.erase(spec.drop);

    weft::GgufWriter w;
    const std::string a = spec.arch;
    w.set_string("general.architecture", a);
    w.set_u32(a + ".context_length", 64);
    w.set_u32(a + ".embedding_length", kDim);
    w.set_u32(a + ".block_count", kLayers);
    w.set_u32(a + ".feed_forward_length", kFf);
    w.set_u32(a + ".attention.head_count", kHeads);
    w.set_u32(a + ".attention.head_count_kv", kHeadsKv);
    w.set_f32(a + ".attention.layer_norm_rms_epsilon", kEps);
    w.set_f32(a + ".rope.freq_base", kBase);
    for (auto& [name, r] : t) w.add_tensor(name, r.type, r.ne, r.bytes.data());
    w.write(path);
  }

  const std::vector<double>& v(const std::string& name) const { return t.at(name).v; }

  // y = W x for W stored [cols, rows].
  static std::vector<double> matvec(const std::vector<double>& w, const std::vector<double>& x, int64_t rows) {
    const size_t cols = x.size();
    std::vector<double> y(static_cast<size_t>(rows));
    for (size_t r = 0; r < y.size(); ++r) {
      double s = 0;
      for (size_t c = 0; c < cols; ++c) s += w[r * cols + c] * x[c];
      y[r] = s;
    }
    return y;
  }
  static std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<double>& w) {
    double ss = 0;
    for (double a : x) ss += a * a;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + static_cast<double>(kEps));
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
    return y;
  }
  void rope(std::vector<double>& x, int64_t n_heads, int64_t pos) const {
    const bool neox = spec.arch == "qwen2";
    const int64_t d = kHeadDim;
    for (int64_t h = 0; h < n_heads; ++h) {
      double* hx = x.data() + h * kHeadDim;
      for (int64_t i = 0; i < d / 2; ++i) {
        const double theta = static_cast<double>(pos) * std::pow(static_cast<double>(kBase), -2.0 * i / d);
        const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + d / 2 : 2 * i + 1;
        const double a = hx[i0], b = hx[i1];
        hx[i0] = a * std::cos(theta) - b * std::sin(theta);
        hx[i1] = a * std::sin(theta) + b * std::cos(theta);
      }
    }
  }

  // Logits [token][vocab] for the whole sequence, token i at position i.
  std::vector<std::vector<double>> forward(const std::vector<int32_t>& tokens) const {
    const size_t n = tokens.size();
    const int64_t kv_dim = kHeadsKv * kHeadDim;
    std::vector<std::vector<double>> x(n);
    const auto& embd = v("token_embd.weight");
    for (size_t i = 0; i < n; ++i)
      x[i].assign(embd.begin() + tokens[i] * kDim, embd.begin() + (tokens[i] + 1) * kDim);
    for (int64_t l = 0; l < kLayers; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      std::vector<std::vector<double>> q(n), k(n), val(n);
      for (size_t i = 0; i < n; ++i) {
        const auto h = rms_norm(x[i], v(b + "attn_norm.weight"));
        q[i] = matvec(v(b + "attn_q.weight"), h, kHeads * kHeadDim);
        k[i] = matvec(v(b + "attn_k.weight"), h, kv_dim);
        val[i] = matvec(v(b + "attn_v.weight"), h, kv_dim);
        if (spec.biases) {
          for (size_t j = 0; j < q[i].size(); ++j) q[i][j] += v(b + "attn_q.bias")[j];
          for (size_t j = 0; j < k[i].size(); ++j) k[i][j] += v(b + "attn_k.bias")[j];
          for (size_t j = 0; j < val[i].size(); ++j) val[i][j] += v(b + "attn_v.bias")[j];
        }
        rope(q[i], kHeads, static_cast<int64_t>(i));
        rope(k[i], kHeadsKv, static_cast<int64_t>(i));
        for (double& a : k[i]) a = f16_round(a);  // the KV cache is f16
        for (double& a : val[i]) a = f16_round(a);
      }
      for (size_t i = 0; i < n; ++i) {
        std::vector<double> attn(static_cast<size_t>(kHeads * kHeadDim), 0.0);
        for (int64_t h = 0; h < kHeads; ++h) {
          const int64_t hk = h / (kHeads / kHeadsKv);
          std::vector<double> s(i + 1);
          double mx = -INFINITY;
          for (size_t j = 0; j <= i; ++j) {  // causal: keys 0..i
            double d = 0;
            for (int64_t c = 0; c < kHeadDim; ++c) d += q[i][h * kHeadDim + c] * k[j][hk * kHeadDim + c];
            s[j] = d / std::sqrt(static_cast<double>(kHeadDim));
            mx = std::max(mx, s[j]);
          }
          double sum = 0;
          for (double& e : s) sum += (e = std::exp(e - mx));
          for (size_t j = 0; j <= i; ++j)
            for (int64_t c = 0; c < kHeadDim; ++c)
              attn[h * kHeadDim + c] += s[j] / sum * val[j][hk * kHeadDim + c];
        }
        const auto o = matvec(v(b + "attn_output.weight"), attn, kDim);
        for (int64_t c = 0; c < kDim; ++c) x[i][c] += o[c];
        const auto h2 = rms_norm(x[i], v(b + "ffn_norm.weight"));
        auto g = matvec(v(b + "ffn_gate.weight"), h2, kFf);
        const auto u = matvec(v(b + "ffn_up.weight"), h2, kFf);
        for (int64_t c = 0; c < kFf; ++c) g[c] = g[c] / (1 + std::exp(-g[c])) * u[c];
        const auto d = matvec(v(b + "ffn_down.weight"), g, kDim);
        for (int64_t c = 0; c < kDim; ++c) x[i][c] += d[c];
      }
    }
    std::vector<std::vector<double>> logits(n);
    const auto& out = t.count("output.weight") ? v("output.weight") : embd;
    for (size_t i = 0; i < n; ++i) logits[i] = matvec(out, rms_norm(x[i], v("output_norm.weight")), kVocab);
    return logits;
  }
};

// sum (a - b)^2 / sum b^2 over one token's logits.
double nerr(const float* a, const std::vector<double>& b) {
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
      : path((fs::temp_directory_path() / ("weft_llama_" + std::to_string(::getpid()) + "_" + name)).string()) {}
  ~TempFile() { fs::remove(path); }
};

// Prompt of 5 tokens, then 2 greedy single-token steps through the KV cache;
// every token's logits against the reference over the whole sequence.
void check_against_reference(const Spec& spec, const std::string& name, double tol) {
  TempFile f(name);
  TinyModel tiny(spec, f.path);
  auto file = weft::GgufFile::open(f.path);
  auto dev = weft::make_cpu_device(2);
  weft::model::LlamaModel model(*file, *dev, 16);
  file.reset();  // the model keeps its own copy
  EXPECT_EQ(model.params().n_vocab, kVocab);
  EXPECT_EQ(model.params().n_head_kv, kHeadsKv);
  EXPECT_EQ(model.params().n_rot, kHeadDim);
  auto backend = dev->create_backend();

  std::vector<int32_t> seq = {1, 7, 22, 36, 5};
  std::vector<float> all = model.eval(*backend, seq, 0);
  ASSERT_EQ(all.size(), seq.size() * kVocab);
  for (int step = 0; step < 2; ++step) {
    const int32_t next = weft::model::greedy(&all[all.size() - kVocab], kVocab);
    const int64_t n_past = static_cast<int64_t>(seq.size());
    seq.push_back(next);
    std::vector<float> l = model.eval(*backend, {&seq.back(), 1}, n_past);
    ASSERT_EQ(l.size(), static_cast<size_t>(kVocab));
    all.insert(all.end(), l.begin(), l.end());
  }
  const auto ref = tiny.forward(seq);
  double worst = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    const double e = nerr(&all[i * kVocab], ref[i]);
    worst = std::max(worst, e);
    EXPECT_LT(e, tol) << name << " token " << i;
  }
  std::printf("[ %s ] worst normalized error %.3g over %zu tokens\n", name.c_str(), worst, seq.size());

  // Perplexity of the sequence from the model's logits and from the
  // reference's (computed here in double): row i predicts token i + 1.
  weft::model::PerplexityScore score;
  double ref_nll = 0;
  for (size_t i = 0; i + 1 < seq.size(); ++i) {
    score.add({&all[i * kVocab], static_cast<size_t>(kVocab)}, seq[i + 1]);
    double mx = -INFINITY, z = 0;
    for (double x : ref[i]) mx = std::max(mx, x);
    for (double x : ref[i]) z += std::exp(x - mx);
    ref_nll += std::log(z) + mx - ref[i][static_cast<size_t>(seq[i + 1])];
  }
  const double ref_ppl = std::exp(ref_nll / static_cast<double>(seq.size() - 1));
  EXPECT_NEAR(score.perplexity(), ref_ppl, 1e-4 * ref_ppl) << name;
}

// The reference rounds K and V to f16 as the cache does, so the remaining
// differences are f32 accumulation (~1e-14 normalized) plus rare rounding
// ties decided differently by f32 and f64 inputs (one f16 ulp, ~5e-4
// relative, on one cache value: well under 1e-6 normalized).
TEST(LlamaModel, MatchesReferenceF32) { check_against_reference({}, "llama_f32", 1e-6); }

TEST(LlamaModel, MatchesReferenceQ8_0) {
  Spec s;
  s.q8 = true;
  check_against_reference(s, "llama_q8_0", 1e-4);
}

TEST(LlamaModel, MatchesReferenceQwen2BiasesNeox) {
  Spec s;
  s.arch = "qwen2";
  s.biases = true;
  check_against_reference(s, "qwen2_f32", 1e-6);
}

void expect_load_error(const Spec& spec, const std::string& name, const std::vector<std::string>& needles) {
  TempFile f(name);
  TinyModel tiny(spec, f.path);
  auto file = weft::GgufFile::open(f.path);
  auto dev = weft::make_cpu_device(1);
  try {
    weft::model::LlamaModel model(*file, *dev, 16);
    FAIL() << "expected an error for " << name;
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    for (const std::string& s : needles) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
  }
  // The plan checks the same tensors, with the same errors, before anything loads.
  const int64_t bounds[] = {0, 1, kLayers};
  try {
    weft::model::LlamaModel::plan(*file, bounds, 16);
    FAIL() << "expected a plan error for " << name;
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    for (const std::string& s : needles) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
  }
}

// The plan counts exactly the file's weights, each in its part, and the KV
// cache of each part's layers.
TEST(LlamaModel, PlanCountsEveryWeightInItsPart) {
  for (bool q8 : {false, true}) {
    Spec spec;
    spec.q8 = q8;  // q8 also writes a separate output matrix (in the last part)
    TempFile f(q8 ? "plan_q8" : "plan_f32");
    TinyModel tiny(spec, f.path);
    auto file = weft::GgufFile::open(f.path);
    const int64_t bounds[] = {0, 0, 1, kLayers};  // an empty first part holds only the embedding
    const auto plan = weft::model::LlamaModel::plan(*file, bounds, 16);
    ASSERT_EQ(plan.size(), 3u);
    size_t total = 0, layer0 = 0, layer1 = 0, head = 0, tail = 0;
    for (const auto& [name, r] : tiny.t) {
      total += r.bytes.size();
      if (name.rfind("blk.0.", 0) == 0) layer0 += r.bytes.size();
      else if (name.rfind("blk.1.", 0) == 0) layer1 += r.bytes.size();
      else if (name == "token_embd.weight") head += r.bytes.size();
      else tail += r.bytes.size();
    }
    EXPECT_EQ(plan[0].weight_bytes, head);
    EXPECT_EQ(plan[1].weight_bytes, layer0);
    EXPECT_EQ(plan[2].weight_bytes, layer1 + tail);
    EXPECT_EQ(plan[0].weight_bytes + plan[1].weight_bytes + plan[2].weight_bytes, total);
    const size_t kv_per_layer = 2 * 2 * kHeadsKv * kHeadDim * 16;  // k and v, f16, 16 positions
    EXPECT_EQ(plan[0].kv_cache_bytes, 0u);
    EXPECT_EQ(plan[1].kv_cache_bytes, kv_per_layer);
    EXPECT_EQ(plan[2].kv_cache_bytes, kv_per_layer);
    EXPECT_EQ(plan[2].first_layer, 1);
    EXPECT_EQ(plan[2].last_layer, kLayers);
  }
  TempFile f("plan_bounds");
  TinyModel tiny(Spec{}, f.path);
  auto file = weft::GgufFile::open(f.path);
  const int64_t gap[] = {0, 1, 1};
  EXPECT_THROW(weft::model::LlamaModel::plan(*file, gap, 16), weft::Error);  // covers 1 of 2 layers
  const int64_t whole[] = {0, kLayers};
  EXPECT_THROW(weft::model::LlamaModel::plan(*file, whole, 0), weft::Error);
  EXPECT_THROW(weft::model::LlamaModel::plan(*file, whole, int64_t{1} << 40), weft::Error);
}

TEST(LlamaModel, MissingTensorIsNamed) {
  Spec s;
  s.drop = "blk.1.ffn_up.weight";
  expect_load_error(s, "missing", {"missing tensor blk.1.ffn_up.weight"});
}

TEST(LlamaModel, WrongShapeIsNamed) {
  Spec s;
  s.bad = "blk.0.attn_k.weight";
  expect_load_error(s, "bad_shape", {"blk.0.attn_k.weight", "[32, 17]", "expected [32, 16]"});
}

TEST(LlamaModel, CausalMaskAndGreedy) {
  std::vector<float> m(3 * 2);
  weft::model::fill_causal_mask(m, 3, 2, 1);
  EXPECT_EQ(m[0], 0.f);
  EXPECT_EQ(m[1], 0.f);
  EXPECT_TRUE(std::isinf(m[2]) && m[2] < 0);
  EXPECT_EQ(m[5], 0.f);
  const float l[4] = {0.f, 3.f, 3.f, -1.f};
  EXPECT_EQ(weft::model::greedy(l, 4), 1);
}

}  // namespace
