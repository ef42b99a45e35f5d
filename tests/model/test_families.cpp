// Every model family against an independent float64 forward pass: files and
// reference logits written by tests/model/families (Python + numpy, from the
// families' published architectures), run here locally and split over this
// CPU and a worker; a file missing what its family needs is refused naming
// it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/family_files.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/rpc/client.h"
#include "weft/rpc/worker.h"

namespace {

using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;
namespace fs = std::filesystem;

// Normalized error allowed per token against the float64 reference: f32
// arithmetic through a handful of layers (measured: 2.4e-7 to 1.1e-6). The
// reference rounds the f16 KV cache as weft does; make_family.py's seeds keep
// every cached value clear of f16 rounding boundaries, without which one
// entry an f16 step apart moves logits by ~1e-4.
constexpr double kTolerance = 1e-4;
// A case whose experts are MXFP4 (gptoss_mxfp4): the CPU's MXFP4 product
// reads its activations rounded to q8_0, as the standard engine's does
// (its vec_dot_type), which the reference does not (measured: 2.6e-3; the
// same file with those weights stored as f32 gives 2.7e-6). A wrong block
// decoder or product is off by far more.
constexpr double kToleranceMxfp4 = 1e-2;

double tolerance_of(const std::string& name) {
  return name.size() > 6 && name.compare(name.size() - 6, 6, "_mxfp4") == 0 ? kToleranceMxfp4 : kTolerance;
}

class Families : public ::testing::TestWithParam<std::string> {
 protected:
  fs::path gguf() const { return family_files::dir() / (GetParam() + ".gguf"); }
  family_files::Reference reference() const {
    return family_files::read_reference(family_files::dir() / (GetParam() + ".ref"));
  }
};

// Runs every eval of ref through m and checks each token's logits; returns
// the largest normalized error.
double expect_matches(Executor& m, const family_files::Reference& ref, double tolerance = kTolerance) {
  double worst = 0;
  for (size_t e = 0; e < ref.evals.size(); ++e) {
    const family_files::Eval& ev = ref.evals[e];
    const std::vector<float> logits = m.eval(ev.tokens, ev.n_past);
    EXPECT_EQ(logits.size(), ev.logits.size());
    if (logits.size() != ev.logits.size()) return INFINITY;
    for (size_t t = 0; t < ev.tokens.size(); ++t) {
      const size_t at = t * static_cast<size_t>(ref.n_vocab);
      const double err = family_files::normalized_error(&logits[at], &ev.logits[at], ref.n_vocab);
      worst = std::max(worst, err);
      EXPECT_LE(err, tolerance) << "eval " << e << " (n_past " << ev.n_past << "), token " << t;
    }
  }
  return worst;
}

TEST_P(Families, MatchesFloat64Reference) {
  const family_files::Reference ref = reference();
  auto file = weft::GgufFile::open(gguf().string());
  auto cpu = weft::make_cpu_device(2);
  Executor m(*file, *cpu, ref.n_ctx);
  EXPECT_EQ(m.params().n_vocab, ref.n_vocab);
  const double worst = expect_matches(m, ref, tolerance_of(GetParam()));
  std::printf("%s: largest normalized error %.3g over %zu evals\n", GetParam().c_str(), worst, ref.evals.size());
}

// Layer 0 on this CPU, the rest on a worker in this process: the logits
// match the reference as closely, and greedy generation gives the tokens the
// CPU alone gives.
TEST_P(Families, SplitOverWorkerMatchesLocal) {
  const family_files::Reference ref = reference();
  auto file = weft::GgufFile::open(gguf().string());
  auto cpu = weft::make_cpu_device(2);
  auto worker_cpu = weft::make_cpu_device(1);
  weft::rpc::WorkerOptions o;
  o.log = false;
  weft::rpc::Worker worker(std::vector<weft::Device*>{worker_cpu.get()}, o);
  worker.start();
  auto remote = weft::make_rpc_devices("127.0.0.1:" + std::to_string(worker.port()));
  const int64_t n_layer = weft::model::LlamaParams::from_gguf(*file).n_layer;
  const std::vector<LayerPlacement> pl{{cpu.get(), 0, 1}, {remote.at(0).get(), 1, n_layer}};
  Executor split(*file, pl, ref.n_ctx);
  expect_matches(split, ref, tolerance_of(GetParam()));

  // Greedy continuation of the first eval's tokens, local and split.
  auto generate = [&](Executor& m) {
    std::vector<int32_t> seq = ref.evals.front().tokens;
    std::vector<float> logits = m.eval(seq, 0);
    for (int step = 0; step < 4; ++step) {
      const int32_t next = weft::model::greedy(&logits[logits.size() - static_cast<size_t>(ref.n_vocab)],
                                               static_cast<int>(ref.n_vocab));
      seq.push_back(next);
      logits = m.eval({&seq.back(), 1}, static_cast<int64_t>(seq.size()) - 1);
    }
    return seq;
  };
  Executor local(*file, *cpu, ref.n_ctx);
  Executor split2(*file, pl, ref.n_ctx);
  EXPECT_EQ(generate(split2), generate(local));
}

INSTANTIATE_TEST_SUITE_P(All, Families, ::testing::ValuesIn(family_files::cases()),
                         [](const auto& info) { return info.param; });

// What each family reads from its keys.
TEST(FamilyParams, ReadFromTheFiles) {
  const fs::path d = family_files::dir();
  auto params = [&](const std::string& name) {
    return weft::model::LlamaParams::from_gguf(*weft::GgufFile::open((d / (name + ".gguf")).string()));
  };
  using weft::model::Arch;
  const auto gemma2 = params("gemma2");
  EXPECT_EQ(gemma2.arch, Arch::gemma2);
  EXPECT_EQ(gemma2.n_swa, 4);
  EXPECT_TRUE(gemma2.is_swa(0));
  EXPECT_FALSE(gemma2.is_swa(1));
  EXPECT_TRUE(gemma2.is_swa(2));
  EXPECT_FLOAT_EQ(gemma2.attn_softcap, 5.0f);
  EXPECT_FLOAT_EQ(gemma2.final_softcap, 3.0f);
  EXPECT_TRUE(gemma2.embed_scale);
  EXPECT_EQ(gemma2.ffn_act, weft::model::FfnActivation::gelu_tanh);
  EXPECT_FLOAT_EQ(gemma2.attn_scale, 1.0f / std::sqrt(static_cast<float>(gemma2.head_dim)));

  const auto gemma3 = params("gemma3");
  EXPECT_EQ(gemma3.swa_pattern, 3);
  EXPECT_TRUE(gemma3.is_swa(0) && gemma3.is_swa(1) && gemma3.is_swa(3) && gemma3.is_swa(4));
  EXPECT_FALSE(gemma3.is_swa(2) || gemma3.is_swa(5));
  EXPECT_FLOAT_EQ(gemma3.rope_base_swa, 10000.f);
  EXPECT_FLOAT_EQ(gemma3.rope_freq_scale, 1.0f / 8);
  EXPECT_FLOAT_EQ(gemma3.rope_freq_scale_swa, 1.0f);
  EXPECT_EQ(gemma3.attn_softcap, 0.0f);

  // The option matrix: Phi-3's window on every layer, however large; a
  // window in a family without a pattern slides everywhere; the pattern as
  // one bool per layer.
  const auto phi3_big = params("phi3_window_big");
  EXPECT_EQ(phi3_big.n_swa, 2047);
  for (int64_t il = 0; il < phi3_big.n_layer; ++il) EXPECT_TRUE(phi3_big.is_swa(il)) << il;
  EXPECT_TRUE(params("llama_window").is_swa(1));
  const auto listed = params("gemma3_window_list");
  EXPECT_EQ(listed.swa_pattern, 0);
  const std::vector<uint8_t> expected_layers{1, 0, 1, 1, 0, 0};
  EXPECT_EQ(listed.swa_layers, expected_layers);
  EXPECT_NE(weft::model::describe(listed).find("sliding window 4 on 3 of 6 layers (listed per layer)"),
            std::string::npos)
      << weft::model::describe(listed);
  EXPECT_FALSE(params("gemma3_nowindow").any_swa());
  EXPECT_NE(weft::model::describe(phi3_big).find("sliding window 2047 on every layer"), std::string::npos);

  const auto qwen3 = params("qwen3");
  EXPECT_EQ(qwen3.rope_mode, weft::RopeMode::neox);
  EXPECT_NE(qwen3.head_dim * qwen3.n_head, qwen3.n_embd);  // key_length, not n_embd / n_head
  EXPECT_TRUE(params("qwen3moe").expert_weights_norm);
  EXPECT_FALSE(params("qwen2moe").expert_weights_norm);
  EXPECT_GT(params("qwen2moe").n_ff_shared, 0);
  EXPECT_EQ(params("phi3_long").rope_scaling, weft::model::RopeScalingType::longrope);
  EXPECT_EQ(params("llama3_freqs").rope_scaling, weft::model::RopeScalingType::llama3);
  EXPECT_EQ(params("llama3_keys").rope_scaling, weft::model::RopeScalingType::llama3);
  EXPECT_EQ(params("llama").rope_scaling, weft::model::RopeScalingType::none);
  // YaRN's keys: the magnitude 0.9 (yarn_attn_factor) x (1 + 0.1 ln 8).
  const auto yarn = params("llama_yarn");
  EXPECT_EQ(yarn.rope_scaling, weft::model::RopeScalingType::yarn);
  EXPECT_FLOAT_EQ(yarn.rope_yarn_beta_fast, 8.0f);
  EXPECT_FLOAT_EQ(yarn.rope_yarn_beta_slow, 0.5f);
  EXPECT_NEAR(yarn.rope_attn_factor, 0.9 * (1 + 0.1 * std::log(8.0)), 1e-6);
  EXPECT_NE(weft::model::describe(yarn).find("YaRN x8 (original context 32"), std::string::npos)
      << weft::model::describe(yarn);

  // DeepSeek-V3-like: MLA from the *_mla keys, the cache one row of latent
  // and rope key, the router's keys, and YaRN's mscale in the scale (1 +
  // 0.0707 ln 4, squared) rather than in the rotated values.
  const auto ds = params("deepseek2");
  EXPECT_EQ(ds.arch, Arch::deepseek2);
  EXPECT_TRUE(ds.mla());
  EXPECT_EQ(ds.rope_mode, weft::RopeMode::normal);
  EXPECT_EQ(ds.n_lora_q, 32);
  EXPECT_EQ(ds.n_lora_kv, 32);
  EXPECT_EQ(ds.n_rot, 8);
  EXPECT_EQ(ds.mla_k_dim, 24);
  EXPECT_EQ(ds.mla_v_dim, 16);
  EXPECT_EQ(ds.head_dim, 40);
  EXPECT_EQ(ds.n_head_kv, 1);
  EXPECT_EQ(ds.value_dim(), 32);
  EXPECT_EQ(ds.n_layer_dense_lead, 1);
  EXPECT_FALSE(ds.is_moe_layer(0));
  EXPECT_TRUE(ds.is_moe_layer(1));
  EXPECT_EQ(ds.expert_gating, weft::model::ExpertGating::sigmoid);
  EXPECT_EQ(ds.n_expert_groups, 4);
  EXPECT_EQ(ds.n_group_used, 2);
  EXPECT_FLOAT_EQ(ds.expert_weights_scale, 2.5f);
  EXPECT_TRUE(ds.expert_weights_norm);
  EXPECT_EQ(ds.n_ff_shared, 24);
  EXPECT_FLOAT_EQ(ds.rope_attn_factor, 1.0f);
  const double mscale = 1 + 0.0707 * std::log(4.0);
  EXPECT_NEAR(ds.attn_scale, mscale * mscale / std::sqrt(24.0), 1e-6);
  // The latent cache: one f16 row of 32 + 8 values per token and layer,
  // against 2 x 4 heads x (24 or 16) for decompressed keys and values.
  EXPECT_EQ(weft::model::kv_cache_bytes(ds, 3, 64), size_t{3} * 64 * 40 * 2);
  const auto plan = LlamaModel::plan(*weft::GgufFile::open((d / "deepseek2.gguf").string()), std::vector<int64_t>{0, 1, 3}, 64);
  EXPECT_EQ(plan[0].kv_cache_bytes, size_t{64} * 40 * 2);
  EXPECT_EQ(plan[1].kv_cache_bytes, size_t{2} * 64 * 40 * 2);
  // V2-Lite-like: softmax, no groups, no q compression, the plain keys.
  const auto lite = params("deepseek2_lite");
  EXPECT_EQ(lite.expert_gating, weft::model::ExpertGating::softmax);
  EXPECT_EQ(lite.n_expert_groups, 0);
  EXPECT_EQ(lite.n_lora_q, 0);
  EXPECT_FALSE(lite.expert_weights_norm);
  EXPECT_FLOAT_EQ(lite.expert_weights_scale, 1.0f);
  EXPECT_EQ(lite.mla_k_dim, 24);
  EXPECT_EQ(lite.mla_v_dim, 12);
  EXPECT_EQ(lite.n_ff_shared, 48);
  EXPECT_FLOAT_EQ(lite.attn_scale, 1.0f / std::sqrt(24.0f));
  EXPECT_NE(weft::model::describe(lite).find("(weights not renormalized) + a shared expert of width 48 (ungated)"),
            std::string::npos)
      << weft::model::describe(lite);
  const std::string dsd = weft::model::describe(ds);
  for (const char* part : {"model: deepseek2 (DeepSeek-V2/V3), 3 layers", "rope: normal, 8 of 24 dims", "multi-head latent",
                           "latent 32 + rope key 8", "(weights renormalized)",
                           "sigmoid scores", "best 2 of 4 groups", "weights x2.5", "(ungated)", "first 1 layers dense"})
    EXPECT_NE(dsd.find(part), std::string::npos) << part << " in\n" << dsd;

  // What `weft gguf info` prints about them.
  const std::string g2 = weft::model::describe(gemma2);
  for (const char* part : {"model: gemma2 (Gemma 2), 4 layers", "neox", "logit soft-cap 5", "sliding window 4 on 2 of 4",
                           "GELU-gated", "final logit soft-cap 3", "sqrt(n_embd)"})
    EXPECT_NE(g2.find(part), std::string::npos) << part << " in\n" << g2;
  const std::string q2 = weft::model::describe(params("qwen2moe"));
  EXPECT_NE(q2.find("shared expert"), std::string::npos) << q2;
  const std::string l3 = weft::model::describe(params("llama3_keys"));
  EXPECT_NE(l3.find("llama3 frequency factors (factor 8"), std::string::npos) << l3;
}

// A file without something its family needs is refused, naming it, before
// anything is loaded (plan and the constructor make the same checks).
TEST(FamilyFiles, MissingTensorOrKeyIsNamed) {
  struct Drop {
    std::string family, flag, name;
  };
  const std::vector<Drop> drops{
      {"qwen3", "--drop-tensor", "blk.1.attn_k_norm.weight"},
      {"gemma2", "--drop-tensor", "blk.0.post_ffw_norm.weight"},
      {"gemma3", "--drop-tensor", "blk.2.attn_q_norm.weight"},
      {"qwen2moe", "--drop-tensor", "blk.1.ffn_gate_inp_shexp.weight"},
      {"qwen2moe", "--drop-key", "qwen2moe.expert_shared_feed_forward_length"},
      {"qwen3moe", "--drop-tensor", "blk.0.ffn_down_exps.weight"},
      {"phi3_long", "--drop-tensor", "rope_factors_long.weight"},
      {"phi3_short", "--drop-tensor", "blk.1.attn_qkv.weight"},
      {"llama3_keys", "--drop-key", "llama.rope.scaling.factor"},
      {"deepseek2", "--drop-tensor", "blk.1.attn_k_b.weight"},
      {"deepseek2", "--drop-tensor", "blk.2.ffn_gate_shexp.weight"},
      {"deepseek2", "--drop-tensor", "blk.0.ffn_gate.weight"},
      {"deepseek2", "--drop-tensor", "blk.1.attn_q_a_norm.weight"},
      {"deepseek2", "--drop-key", "deepseek2.attention.kv_lora_rank"},
      {"deepseek2", "--drop-key", "deepseek2.expert_feed_forward_length"},
      {"deepseek2_lite", "--drop-tensor", "blk.2.attn_kv_b.weight"},
      {"gptoss", "--drop-tensor", "blk.1.attn_sinks.weight"},
      {"gptoss", "--drop-tensor", "blk.2.ffn_up_exps.bias"},
      {"gptoss", "--drop-tensor", "blk.0.ffn_gate_inp.bias"},
      {"gptoss", "--drop-tensor", "blk.3.post_attention_norm.weight"},
      {"gptoss", "--drop-key", "gpt-oss.attention.sliding_window"},
  };
  const fs::path root = fs::path(WEFT_BINARY_DIR) / ("model_families_drops." + std::to_string(::getpid()));
  for (size_t i = 0; i < drops.size(); ++i) {
    const Drop& d = drops[i];
    SCOPED_TRACE(d.family + " " + d.flag + " " + d.name);
    const fs::path out = root / std::to_string(i);
    family_files::run_script(out, d.family + " " + d.flag + " " + d.name);
    const family_files::Reference ref = family_files::read_reference(family_files::dir() / (d.family + ".ref"));
    auto file = weft::GgufFile::open((out / (d.family + ".gguf")).string());
    auto cpu = weft::make_cpu_device(1);
    try {
      Executor m(*file, *cpu, ref.n_ctx);
      ADD_FAILURE() << "loaded without " << d.name;
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      EXPECT_NE(std::string(e.what()).find(d.name), std::string::npos) << e.what();
    }
    try {
      (void)LlamaModel::plan(*file, std::vector<int64_t>{0, 1, 2}, ref.n_ctx);
      ADD_FAILURE() << "planned without " << d.name;
    } catch (const weft::Error& e) {
      EXPECT_NE(std::string(e.what()).find(d.name), std::string::npos) << e.what();
    }
  }
  fs::remove_all(root);
}

// A per-layer pattern of the wrong length or element type is refused naming
// the key.
TEST(FamilyFiles, SlidingPatternOfTheWrongShapeIsNamed) {
  const fs::path src = family_files::dir() / "gemma3_window_list.gguf";
  auto good = weft::GgufFile::open(src.string());
  for (int variant = 0; variant < 2; ++variant) {
    weft::GgufWriter w;
    for (const std::string& key : good->keys()) w.set_value(key, *good->find(key));
    const uint8_t bits[6] = {1, 0, 1, 1, 0, 0};
    weft::GgufValue v;
    v.type = weft::GgufType::array;
    v.arr = variant == 0 ? weft::GgufArray::packed(weft::GgufType::boolean, bits, 3)
                         : weft::GgufArray::packed(weft::GgufType::u8, bits, 6);
    w.set_value("gemma3.attention.sliding_window_pattern", v);
    for (const weft::GgufTensorInfo& t : good->tensors())
      w.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne, static_cast<size_t>(t.n_dims)), good->tensor_data(t));
    const fs::path path = fs::temp_directory_path() / ("weft_bad_pattern_" + std::to_string(::getpid()) + ".gguf");
    w.write(path.string());
    auto file = weft::GgufFile::open(path.string());
    try {
      (void)weft::model::LlamaParams::from_gguf(*file);
      ADD_FAILURE() << "pattern variant " << variant << " accepted";
    } catch (const weft::Error& e) {
      EXPECT_NE(std::string(e.what()).find("gemma3.attention.sliding_window_pattern"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("6 bools"), std::string::npos) << e.what();
    }
    fs::remove(path);
  }
}

// A deepseek2 key of an impossible value is refused naming it (and a
// mutation that lets one through fails here).
TEST(FamilyFiles, DeepseekImpossibleKeysAreNamed) {
  const fs::path src = family_files::dir() / "deepseek2.gguf";
  auto good = weft::GgufFile::open(src.string());
  struct Bad {
    std::string key;
    uint32_t value;
  };
  const std::vector<Bad> bads{
      {"deepseek2.expert_gating_func", 7},              // neither softmax (1) nor sigmoid (2)
      {"deepseek2.expert_group_count", 3},              // does not divide 8 experts
      {"deepseek2.expert_group_used_count", 9},         // more than the 4 groups
      {"deepseek2.attention.key_length_mla", 8},        // no room beside 8 rope dims
      {"deepseek2.attention.key_length", 41},           // not kv_lora_rank + rope
      {"deepseek2.leading_dense_block_count", 4},       // more than the 3 layers
      {"deepseek2.attention.kv_lora_rank", 0},
  };
  for (const Bad& bad : bads) {
    SCOPED_TRACE(bad.key);
    weft::GgufWriter w;
    for (const std::string& key : good->keys()) w.set_value(key, *good->find(key));
    w.set_u32(bad.key, bad.value);
    for (const weft::GgufTensorInfo& t : good->tensors())
      w.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne, static_cast<size_t>(t.n_dims)), good->tensor_data(t));
    const fs::path path = fs::temp_directory_path() / ("weft_bad_deepseek_" + std::to_string(::getpid()) + ".gguf");
    w.write(path.string());
    auto file = weft::GgufFile::open(path.string());
    try {
      (void)weft::model::LlamaParams::from_gguf(*file);
      ADD_FAILURE() << bad.key << " = " << bad.value << " accepted";
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      EXPECT_NE(std::string(e.what()).find(bad.key), std::string::npos) << e.what();
    }
    fs::remove(path);
  }
}

// An architecture weft does not run is refused with the list of those it does.
TEST(FamilyFiles, UnknownArchitectureListsKnownOnes) {
  const fs::path path = fs::temp_directory_path() / ("weft_unknown_arch_" + std::to_string(::getpid()) + ".gguf");
  weft::GgufWriter w;
  w.set_string("general.architecture", "mamba");
  w.write(path.string());
  auto file = weft::GgufFile::open(path.string());
  try {
    (void)weft::model::LlamaParams::from_gguf(*file);
    ADD_FAILURE() << "mamba accepted";
  } catch (const weft::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'mamba'"), std::string::npos) << what;
    for (const char* arch : {"llama", "qwen3moe", "phi3", "gemma2", "gemma3"})
      EXPECT_NE(what.find(arch), std::string::npos) << what;
  }
  fs::remove(path);
}

}  // namespace
