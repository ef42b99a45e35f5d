// LlamaModel against an independent float64 forward pass
// (tests/model/llama_reference.h, written from FACTS.md "Llama-family
// files") with the dense SwiGLU feed-forward written here. It reads only the
// bytes written into the GGUF file.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "model/llama_reference.h"
#include "weft/backend/cpu.h"
#include "weft/core/dtype.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/model/perplexity.h"

namespace {

using llama_reference::TempFile;
using weft::DType;

struct Spec {
  std::string arch = "llama";
  bool q8 = false;      // q8_0 matmul weights (those with rows of 32k values) and a separate output
  bool biases = false;  // q/k/v biases
  std::string drop;     // a tensor to leave out
  std::string bad;      // a tensor written with the wrong shape
};

constexpr int64_t kVocab = 37, kDim = 32, kLayers = 2, kHeads = 4, kHeadsKv = 2, kFf = 48;
constexpr int64_t kHeadDim = kDim / kHeads;

struct TinyModel {
  Spec spec;
  llama_reference::Shape shape{spec.arch, kVocab, kDim, kLayers, kHeads, kHeadsKv, kFf};
  llama_reference::RefTensors t;
  std::string path;

  TinyModel(const Spec& s, const std::string& file) : spec(s), path(file) {
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> u(-0.2f, 0.2f);
    auto add = [&](const std::string& name, std::vector<int64_t> ne, bool norm, bool quant) {
      int64_t n = 1;
      for (int64_t d : ne) n *= d;
      std::vector<float> f(static_cast<size_t>(n));
      for (float& x : f) x = norm ? 1.0f + 0.5f * u(rng) : u(rng);
      const DType type = quant && ne[0] % 32 == 0 ? DType::q8_0 : DType::f32;
      t[name] = llama_reference::make_tensor(std::move(ne), f, type);
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
      llama_reference::RefTensor& r = t.at(spec.bad);
      r.type = DType::f32;
      r.ne[r.ne.size() - 1] += 1;
      int64_t n = 1;
      for (int64_t d : r.ne) n *= d;
      r.bytes.assign(static_cast<size_t>(n) * 4, 0);
    }
    if (!spec.drop.empty()) t.erase(spec.drop);
    llama_reference::write_model(path, shape, t);
  }

  const std::vector<double>& v(const std::string& name) const { return t.at(name).v; }

  // Logits [token][vocab] for the whole sequence, token i at position i.
  std::vector<std::vector<double>> forward(const std::vector<int32_t>& tokens) const {
    return llama_reference::forward(shape, t, tokens, [&](int64_t l, const std::vector<double>& h) {
      const std::string b = "blk." + std::to_string(l) + ".";
      auto g = llama_reference::matvec(v(b + "ffn_gate.weight"), h, kFf);
      llama_reference::swiglu(g, llama_reference::matvec(v(b + "ffn_up.weight"), h, kFf));
      return llama_reference::matvec(v(b + "ffn_down.weight"), g, kDim);
    });
  }
};

// Prompt of 5 tokens, then 2 greedy single-token steps through the KV cache;
// every token's logits against the reference over the whole sequence.
void check_against_reference(const Spec& spec, const std::string& name, double tol) {
  llama_reference::check_against_reference<TinyModel>(
      spec, name, tol,
      [&](const TinyModel&, const llama_reference::CachedRun& run, const std::vector<std::vector<double>>& ref) {
        EXPECT_EQ(run.params.n_vocab, kVocab);
        EXPECT_EQ(run.params.n_head_kv, kHeadsKv);
        EXPECT_EQ(run.params.n_rot, kHeadDim);
        const std::vector<int32_t>& seq = run.seq;
        const std::vector<float>& all = run.logits;

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
        EXPECT_NEAR(score.perplexity(), ref_ppl, std::max(1e-4, tol) * ref_ppl) << name;
      });
}

// The reference rounds K and V to f16 as the cache does, so the remaining
// differences are f32 accumulation (~1e-14 normalized) plus rare rounding
// ties decided differently by f32 and f64 inputs (one f16 ulp, ~5e-4
// relative, on one cache value: well under 1e-6 normalized).
TEST(Executor, MatchesReferenceF32) { check_against_reference({}, "llama_f32", 1e-6); }

// Quantized weights multiply 8-bit activations (q8_0 blocks, as the standard
// engine does; docs/quantization.md): each activation is rounded to 1/254 of
// its block's largest magnitude, which puts ~3e-4 normalized error on the
// logits of this model; 2e-3 leaves margin and still catches a wrong block,
// scale or row (errors of order 1).
TEST(Executor, MatchesReferenceQ8_0) {
  Spec s;
  s.q8 = true;
  check_against_reference(s, "llama_q8_0", 2e-3);
}

TEST(Executor, MatchesReferenceQwen2BiasesNeox) {
  Spec s;
  s.arch = "qwen2";
  s.biases = true;
  check_against_reference(s, "qwen2_f32", 1e-6);
}

// The plan counts exactly the file's weights, each in its part, and the KV
// cache of each part's layers.
TEST(Executor, PlanCountsEveryWeightInItsPart) {
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

TEST(Executor, MissingTensorIsNamed) {
  Spec s;
  s.drop = "blk.1.ffn_up.weight";
  llama_reference::expect_load_error<TinyModel>(s, "missing", {"missing tensor blk.1.ffn_up.weight"});
}

// A block_count no file of this size could hold is refused before anything
// is sized by it (a layer table of 2^31 entries would exhaust memory).
TEST(Executor, ImpossibleBlockCountIsNamed) {
  TempFile f("huge_block_count");
  weft::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.context_length", 64);
  w.set_u32("llama.embedding_length", 32);
  w.set_u32("llama.block_count", 2147483647u);
  w.set_u32("llama.feed_forward_length", 48);
  w.set_u32("llama.attention.head_count", 4);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  const std::vector<float> embd(32 * 8, 0.5f);
  const int64_t ne[] = {32, 8};
  w.add_tensor("token_embd.weight", DType::f32, ne, embd.data());
  w.write(f.path);
  auto file = weft::GgufFile::open(f.path);
  try {
    weft::model::LlamaParams::from_gguf(*file);
    FAIL() << "no error";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    EXPECT_NE(std::string(e.what()).find("llama.block_count = 2147483647 exceeds the file's 1 tensors"),
              std::string::npos)
        << e.what();
  }
}

TEST(Executor, WrongShapeIsNamed) {
  Spec s;
  s.bad = "blk.0.attn_k.weight";
  llama_reference::expect_load_error<TinyModel>(s, "bad_shape",
                                                {"blk.0.attn_k.weight", "[32, 17]", "expected [32, 16]"});
}

TEST(Executor, CausalMaskAndGreedy) {
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
