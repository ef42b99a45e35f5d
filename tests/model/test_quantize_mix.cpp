// The per-tensor type policy of `weft quantize` (include/weft/quantize.h)
// against tables worked out by hand from llama.cpp's llama_tensor_get_type
// (src/llama-quant.cpp): llama-2-7B, llama-3-8B, 70B and 65B shapes, a
// tied-embedding qwen2 whose rows (896) are not multiples of 256, Mixtral
// (8 experts) and a 4-expert model, a 2-layer model, --pure, the F16/BF16/F32
// mixes, and the errors. The expected strings are literals, not computed.
//
// Per-layer strings hold one character per layer: 2..6 = q2_K..q6_K,
// n = iq4_nl, x = iq4_xs, 8 = q8_0, a = q4_0, b = q4_1, c = q5_0, d = q5_1,
// h = f16, B = bf16, f = f32, - = kept as it is.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "weft/core/error.h"
#include "weft/model/quantize.h"

namespace {

using weft::DType;
using weft::model::QuantMix;
using weft::model::QuantModelFacts;
using weft::model::QuantTensorDesc;
using weft::model::QuantTensorPlan;

struct MixSpec {
  std::string arch = "llama";
  int64_t n_layer = 32, n_embd = 4096, n_ff = 11008, n_vocab = 32000;
  int64_t n_head = 32, n_head_kv = 32;
  int64_t n_expert = 0;
  bool tied = false;
  bool qkv_bias = false;  // qwen2
};

QuantModelFacts facts_of(const MixSpec& s) {
  return {s.arch, s.n_layer, s.n_head, s.n_head_kv, s.n_expert};
}

QuantTensorDesc desc(const std::string& name, std::initializer_list<int64_t> ne) {
  QuantTensorDesc d;
  d.name = name;
  int i = 0;
  for (int64_t n : ne) d.ne[i++] = n;
  return d;
}

// The tensors of a llama-family GGUF, in the order converters write them.
std::vector<QuantTensorDesc> tensors_of(const MixSpec& s) {
  const int64_t kv = s.n_embd / s.n_head * s.n_head_kv;
  std::vector<QuantTensorDesc> t;
  t.push_back(desc("token_embd.weight", {s.n_embd, s.n_vocab}));
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    t.push_back(desc(b + "attn_norm.weight", {s.n_embd}));
    t.push_back(desc(b + "attn_q.weight", {s.n_embd, s.n_embd}));
    t.push_back(desc(b + "attn_k.weight", {s.n_embd, kv}));
    t.push_back(desc(b + "attn_v.weight", {s.n_embd, kv}));
    if (s.qkv_bias) {
      t.push_back(desc(b + "attn_q.bias", {s.n_embd}));
      t.push_back(desc(b + "attn_k.bias", {kv}));
      t.push_back(desc(b + "attn_v.bias", {kv}));
    }
    t.push_back(desc(b + "attn_output.weight", {s.n_embd, s.n_embd}));
    t.push_back(desc(b + "ffn_norm.weight", {s.n_embd}));
    if (s.n_expert > 0) {
      t.push_back(desc(b + "ffn_gate_inp.weight", {s.n_embd, s.n_expert}));
      t.push_back(desc(b + "ffn_gate_exps.weight", {s.n_embd, s.n_ff, s.n_expert}));
      t.push_back(desc(b + "ffn_up_exps.weight", {s.n_embd, s.n_ff, s.n_expert}));
      t.push_back(desc(b + "ffn_down_exps.weight", {s.n_ff, s.n_embd, s.n_expert}));
    } else {
      t.push_back(desc(b + "ffn_gate.weight", {s.n_embd, s.n_ff}));
      t.push_back(desc(b + "ffn_up.weight", {s.n_embd, s.n_ff}));
      t.push_back(desc(b + "ffn_down.weight", {s.n_ff, s.n_embd}));
    }
  }
  t.push_back(desc("output_norm.weight", {s.n_embd}));
  if (!s.tied) t.push_back(desc("output.weight", {s.n_embd, s.n_vocab}));
  return t;
}

char code(const QuantTensorPlan& p) {
  if (p.keep) return '-';
  switch (p.type) {
    case DType::q2_K: return '2';
    case DType::q3_K: return '3';
    case DType::q4_K: return '4';
    case DType::q5_K: return '5';
    case DType::q6_K: return '6';
    case DType::iq4_nl: return 'n';
    case DType::iq4_xs: return 'x';
    case DType::q8_0: return '8';
    case DType::q4_0: return 'a';
    case DType::q4_1: return 'b';
    case DType::q5_0: return 'c';
    case DType::q5_1: return 'd';
    case DType::f16: return 'h';
    case DType::bf16: return 'B';
    case DType::f32: return 'f';
    default: return '?';
  }
}

// A plan by tensor name; per_layer() gives one code per layer for a suffix.
struct Plan {
  std::map<std::string, QuantTensorPlan> by_name;
  int64_t n_layer = 0;

  Plan(const MixSpec& s, QuantMix mix, bool pure = false, bool shuffle = false) : n_layer(s.n_layer) {
    std::vector<QuantTensorDesc> t = tensors_of(s);
    if (shuffle) std::shuffle(t.begin(), t.end(), std::mt19937(7));
    const std::vector<QuantTensorPlan> p = weft::model::plan_quant_types(facts_of(s), t, mix, pure);
    for (size_t i = 0; i < t.size(); ++i) by_name[t[i].name] = p[i];
  }
  char of(const std::string& name) const { return code(by_name.at(name)); }
  std::string per_layer(const std::string& suffix) const {
    std::string s;
    for (int64_t i = 0; i < n_layer; ++i) s += of("blk." + std::to_string(i) + "." + suffix);
    return s;
  }
};

// Expected codes of one mix: token_embd, output, and per layer attn_q,
// attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down (a single char
// stands for every layer).
struct Row {
  QuantMix mix;
  char token_embd, output;
  std::string q, k, v, o, gate, up, down;
};

void expect_rows(const MixSpec& s, const std::vector<Row>& rows, const std::string& moe_infix = "") {
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(weft::model::quant_mix_info(r.mix).name));
    const Plan p(s, r.mix);
    auto full = [&](const std::string& x) { return x.size() == 1 ? std::string(static_cast<size_t>(s.n_layer), x[0]) : x; };
    EXPECT_EQ(p.of("token_embd.weight"), r.token_embd);
    if (!s.tied) {
      EXPECT_EQ(p.of("output.weight"), r.output);
    }
    EXPECT_EQ(p.of("output_norm.weight"), '-');
    EXPECT_EQ(p.per_layer("attn_norm.weight"), full("-"));
    EXPECT_EQ(p.per_layer("ffn_norm.weight"), full("-"));
    EXPECT_EQ(p.per_layer("attn_q.weight"), full(r.q));
    EXPECT_EQ(p.per_layer("attn_k.weight"), full(r.k));
    EXPECT_EQ(p.per_layer("attn_v.weight"), full(r.v));
    EXPECT_EQ(p.per_layer("attn_output.weight"), full(r.o));
    EXPECT_EQ(p.per_layer("ffn_gate" + moe_infix + ".weight"), full(r.gate));
    EXPECT_EQ(p.per_layer("ffn_up" + moe_infix + ".weight"), full(r.up));
    EXPECT_EQ(p.per_layer("ffn_down" + moe_infix + ".weight"), full(r.down));
    if (s.qkv_bias) {
      EXPECT_EQ(p.per_layer("attn_v.bias"), full("-"));
    }
    if (s.n_expert > 0) {
      EXPECT_EQ(p.per_layer("ffn_gate_inp.weight"), full("-"));
    }
  }
}

// use_more_bits over 32 layers: the first and last 4, and 6, 9, ..., 27.
const std::string kMore32_6_4 = "6666446446446446446446446446" "6666";
const std::string kMore32_6_5 = "6666556556556556556556556556" "6666";

TEST(QuantizeMix, Llama2_7B) {  // 32 layers, no GQA, rows of 4096 and 11008 (both multiples of 256)
  const MixSpec s;
  expect_rows(s, {
      // mix            embd out  q    k    v                        o    gate up   down
      {QuantMix::Q2_K,   '2', '6', "2", "2", "3",                      "3", "2", "2", "3"},
      {QuantMix::Q3_K_S, '3', '6', "3", "3", "3",                      "3", "3", "3", "3"},
      {QuantMix::Q3_K_M, '3', '6', "3", "3", "55444444444444444444444444444444", "4", "3", "3",
       "55444444444444444444444444444444"},
      {QuantMix::Q3_K_L, '3', '6', "3", "3", "5",                      "5", "3", "3", "5"},
      {QuantMix::Q4_K_S, '4', '6', "4", "4", "55554444444444444444444444444444", "4", "4", "4",
       "55554444444444444444444444444444"},
      {QuantMix::Q4_K_M, '4', '6', "4", "4", kMore32_6_4,              "4", "4", "4", kMore32_6_4},
      {QuantMix::Q5_K_S, '5', '6', "5", "5", "5",                      "5", "5", "5", "5"},
      {QuantMix::Q5_K_M, '5', '6', "5", "5", kMore32_6_5,              "5", "5", "5", kMore32_6_5},
      {QuantMix::Q6_K,   '6', '6', "6", "6", "6",                      "6", "6", "6", "6"},
      {QuantMix::Q4_0,   'a', '6', "a", "a", "a",                      "a", "a", "a", "a"},
      {QuantMix::Q4_1,   'b', '6', "b", "b", "b",                      "b", "b", "b", "b"},
      {QuantMix::Q5_0,   'c', '6', "c", "c", "c",                      "c", "c", "c", "c"},
      {QuantMix::Q5_1,   'd', '6', "d", "d", "d",                      "d", "d", "d", "d"},
      {QuantMix::Q8_0,   '8', '8', "8", "8", "8",                      "8", "8", "8", "8"},
      {QuantMix::IQ4_NL, 'n', '6', "n", "n", "n",                      "n", "n", "n", "5555nnnnnnnnnnnnnnnnnnnnnnnnnnnn"},
      {QuantMix::IQ4_XS, 'x', '6', "x", "x", "x",                      "x", "x", "x", "5555xxxxxxxxxxxxxxxxxxxxxxxxxxxx"},
      {QuantMix::F16,    'h', 'h', "h", "h", "h",                      "h", "h", "h", "h"},
      {QuantMix::BF16,   'B', 'B', "B", "B", "B",                      "B", "B", "B", "B"},
      {QuantMix::F32,    'f', 'f', "f", "f", "f",                      "f", "f", "f", "f"},
  });
}

TEST(QuantizeMix, Llama3_8B_GroupedQueryAttention) {  // n_gqa 4 changes attn_v in Q2_K and the IQ4 mixes
  MixSpec s;
  s.n_head_kv = 8;
  s.n_ff = 14336;
  s.n_vocab = 128256;
  expect_rows(s, {
      {QuantMix::Q2_K,   '2', '6', "2", "2", "4", "3", "2", "2", "3"},
      {QuantMix::IQ4_NL, 'n', '6', "n", "n", "5", "n", "n", "n", "5555nnnnnnnnnnnnnnnnnnnnnnnnnnnn"},
      {QuantMix::IQ4_XS, 'x', '6', "x", "x", "5", "x", "x", "x", "5555xxxxxxxxxxxxxxxxxxxxxxxxxxxx"},
      {QuantMix::Q4_K_M, '4', '6', "4", "4", kMore32_6_4, "4", "4", "4", kMore32_6_4},
  });
}

TEST(QuantizeMix, Llama70B_RaisesAttnV) {  // 80 layers with GQA: attn_v q3_K/q4_K become q5_K
  MixSpec s;
  s.n_layer = 80;
  s.n_embd = 8192;
  s.n_ff = 28672;
  s.n_head = 64;
  s.n_head_kv = 8;
  // use_more_bits over 80 layers: the first and last 10, and 12, 15, ..., 69.
  std::string more80;
  more80 += "6666666666";
  for (int i = 0; i < 20; ++i) more80 += "556";
  more80 += "6666666666";
  EXPECT_EQ(more80, "6666666666" "556556556556556556556556556556" "556556556556556556556556556556" "6666666666");
  std::string down80 = more80;
  std::replace(down80.begin(), down80.end(), '5', '4');
  expect_rows(s, {
      {QuantMix::Q2_K,   '2', '6', "2", "2", "5", "3", "2", "2", "3"},
      {QuantMix::Q3_K_S, '3', '6', "3", "3", "5", "3", "3", "3", "3"},
      {QuantMix::Q3_K_M, '3', '6', "3", "3", "5", "4", "3", "3",
       "55555" "444444444444444444444444444444444444444444444444444444444444444444444444444"},
      {QuantMix::Q4_K_S, '4', '6', "4", "4", "5", "4", "4", "4",
       "5555555555" "4444444444444444444444444444444444444444444444444444444444444444444444"},
      {QuantMix::Q4_K_M, '4', '6', "4", "4", more80, "4", "4", "4", down80},
      {QuantMix::Q4_0,   'a', '6', "a", "a", "a", "a", "a", "a", "a"},
  });
  // A 65B (no GQA) is not a 70B: attn_v stays q3_K.
  s.n_head_kv = 64;
  expect_rows(s, {{QuantMix::Q3_K_S, '3', '6', "3", "3", "3", "3", "3", "3", "3"}});
}

TEST(QuantizeMix, Qwen2TiedEmbeddingsAndFallbacks) {  // 24 layers, rows of 896: K-quants fall back
  MixSpec s;
  s.arch = "qwen2";
  s.n_layer = 24;
  s.n_embd = 896;
  s.n_ff = 4864;  // 19 * 256
  s.n_vocab = 151936;
  s.n_head = 14;
  s.n_head_kv = 2;
  s.tied = true;
  s.qkv_bias = true;
  // use_more_bits over 24 layers: 0-2, 21-23 and 5, 8, ..., 20.
  expect_rows(s, {
      // token_embd stands in for the output: 896 % 256 != 0 -> q8_0
      {QuantMix::Q4_K_M, '8', ' ', "c", "c", "888cc8cc8cc8cc8cc8cc8888", "c", "c", "c", "666446446446446446446666"},
      {QuantMix::Q5_K_M, '8', ' ', "d", "d", "888dd8dd8dd8dd8dd8dd8888", "d", "d", "d", "666556556556556556556666"},
      {QuantMix::Q4_K_S, '8', ' ', "c", "c", "ddddcccccccccccccccccccc", "c", "c", "c", "555444444444444444444444"},
      {QuantMix::Q2_K,   '8', ' ', "a", "a", "c", "a", "a", "a", "3"},
      {QuantMix::Q3_K_M, '8', ' ', "a", "a", "ddcccccccccccccccccccccc", "c", "a", "a", "544444444444444444444444"},
      {QuantMix::Q6_K,   '8', ' ', "8", "8", "8", "8", "8", "8", "6"},
      {QuantMix::IQ4_XS, '8', ' ', "n", "n", "d", "n", "n", "n", "555xxxxxxxxxxxxxxxxxxxxx"},
      {QuantMix::Q8_0,   '8', ' ', "8", "8", "8", "8", "8", "8", "8"},
      {QuantMix::Q4_0,   '8', ' ', "a", "a", "a", "a", "a", "a", "a"},
  });
  const Plan p(s, QuantMix::Q4_K_M);
  EXPECT_TRUE(p.by_name.at("blk.0.attn_q.weight").fallback);
  EXPECT_TRUE(p.by_name.at("blk.0.attn_v.weight").fallback);  // q6_K -> q8_0
  EXPECT_FALSE(p.by_name.at("blk.0.ffn_down.weight").fallback);
  EXPECT_FALSE(p.by_name.at("token_embd.weight").fallback);  // q8_0 by the output rule, not a fallback
}

TEST(QuantizeMix, Mixtral8Experts) {  // 8 experts: attn_v/attn_k q8_0, attn_output q5_K in the low mixes
  MixSpec s;
  s.n_head_kv = 8;
  s.n_ff = 14336;
  s.n_expert = 8;
  expect_rows(s, {
      {QuantMix::Q2_K,   '2', '6', "2", "8", "8", "5", "2", "2", "3"},
      {QuantMix::Q3_K_S, '3', '6', "3", "8", "8", "5", "3", "3", "3"},
      {QuantMix::Q3_K_M, '3', '6', "3", "8", "8", "5", "3", "3", "55444444444444444444444444444444"},
      {QuantMix::Q3_K_L, '3', '6', "3", "8", "8", "3", "3", "3", "5"},  // Q3_K_L is not in the 8-expert list
      {QuantMix::Q4_K_S, '4', '6', "4", "8", "8", "5", "4", "4", "55554444444444444444444444444444"},
      {QuantMix::Q4_K_M, '4', '6', "4", "8", "8", "5", "4", "4", kMore32_6_4},
      {QuantMix::Q5_K_M, '5', '6', "5", "8", "8", "5", "5", "5", kMore32_6_5},
      {QuantMix::Q6_K,   '6', '6', "6", "8", "8", "6", "6", "6", "6"},
      {QuantMix::Q4_0,   'a', '6', "a", "8", "8", "a", "a", "a", "a"},
      {QuantMix::IQ4_XS, 'x', '6', "x", "8", "8", "5", "x", "x", "5555xxxxxxxxxxxxxxxxxxxxxxxxxxxx"},
      {QuantMix::F16,    'h', 'h', "h", "h", "h", "h", "h", "h", "h"},
  }, "_exps");
}

TEST(QuantizeMix, FourExpertsUseTheDenseRulesByLayerName) {
  MixSpec s;
  s.n_layer = 16;
  s.n_head_kv = 8;
  s.n_expert = 4;
  // use_more_bits over 16 layers: 0, 1, 14, 15 and 4, 7, 10, 13.
  expect_rows(s, {{QuantMix::Q4_K_M, '4', '6', "4", "4", "6644644644644666", "4", "4", "4", "6644644644644666"}},
              "_exps");
}

TEST(QuantizeMix, DecisionsDoNotDependOnFileOrder) {
  for (const MixSpec& s : {MixSpec{}, MixSpec{"llama", 32, 4096, 14336, 32000, 32, 8, 8, false, false}}) {
    const Plan a(s, QuantMix::Q4_K_M), b(s, QuantMix::Q4_K_M, false, true);
    for (const auto& [name, plan] : a.by_name) EXPECT_EQ(code(plan), b.of(name)) << name;
  }
}

TEST(QuantizeMix, TwoLayers) {  // the shape of the file tests' model: rows of 256 and 512
  MixSpec s;
  s.n_layer = 2;
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_vocab = 300;
  s.n_head = 4;
  s.n_head_kv = 1;
  expect_rows(s, {
      {QuantMix::Q4_K_M, '4', '6', "4", "4", "46", "4", "4", "4", "46"},
      {QuantMix::Q3_K_M, '3', '6', "3", "3", "55", "4", "3", "3", "44"},
      {QuantMix::Q4_K_S, '4', '6', "4", "4", "55", "4", "4", "4", "44"},
      {QuantMix::Q2_K,   '2', '6', "2", "2", "4", "3", "2", "2", "3"},
      {QuantMix::IQ4_NL, 'n', '6', "n", "n", "5", "n", "n", "n", "n"},
  });
}

TEST(QuantizeMix, PureGivesTheBaseTypeThenTheFallback) {
  MixSpec s;
  const Plan p(s, QuantMix::Q4_K_M, /*pure=*/true);
  for (const auto& [name, plan] : p.by_name) {
    const bool kept = name.find("norm") != std::string::npos;
    EXPECT_EQ(code(plan), kept ? '-' : '4') << name;
  }
  s.arch = "qwen2";
  s.n_embd = 896;
  s.n_ff = 4864;
  s.n_head = 14;
  s.n_head_kv = 2;
  s.tied = true;
  const Plan q(s, QuantMix::Q4_K_M, true);
  EXPECT_EQ(q.of("token_embd.weight"), 'c');  // no output rule with --pure; 896 falls back to q5_0
  EXPECT_EQ(q.per_layer("attn_v.weight"), std::string(32, 'c'));
  EXPECT_EQ(q.per_layer("ffn_down.weight"), std::string(32, '4'));
}

TEST(QuantizeMix, WhichTensorsAreQuantized) {
  const QuantModelFacts f{"llama", 2, 4, 4, 0};
  const std::vector<QuantTensorDesc> t = {
      desc("blk.0.attn_q.weight", {256, 256}),   desc("blk.0.attn_q.bias", {256, 256}),   // not a .weight
      desc("blk.0.attn_norm.weight", {256, 2}),  desc("blk.0.ffn_gate_inp.weight", {256, 8}),
      desc("blk.0.attn_k.weight", {256, 1}),     // one row: 1-D to ggml
      desc("blk.0.attn_k.weight3", {256, 256}),  // does not end in "weight"
      desc("abcde", {256, 256}),                 // llama.cpp's test passes 5-character names
      desc("rope_freqs.weight", {256}),
  };
  const std::vector<QuantTensorPlan> p = weft::model::plan_quant_types(f, t, QuantMix::Q4_K_M);
  std::string got;
  for (const QuantTensorPlan& x : p) got += code(x);
  EXPECT_EQ(got, "4-----4-");
}

TEST(QuantizeMix, RowsThatFitNoType) {
  const QuantModelFacts f{"llama", 2, 4, 4, 0};
  const std::vector<QuantTensorDesc> odd = {desc("blk.0.attn_q.weight", {100, 256})};
  // 256-value types fall back to a 32-value one, and past it to f16.
  for (QuantMix m : {QuantMix::Q2_K, QuantMix::Q4_K_M, QuantMix::Q6_K, QuantMix::IQ4_XS}) {
    const QuantTensorPlan p = weft::model::plan_quant_types(f, odd, m)[0];
    EXPECT_EQ(code(p), 'h') << weft::model::quant_mix_info(m).name;
    EXPECT_TRUE(p.fallback);
  }
  // 32-value types have no fallback: an error naming the tensor.
  for (QuantMix m : {QuantMix::Q4_0, QuantMix::Q4_1, QuantMix::Q5_0, QuantMix::Q5_1, QuantMix::Q8_0, QuantMix::IQ4_NL}) {
    try {
      weft::model::plan_quant_types(f, odd, m);
      ADD_FAILURE() << "no error for " << weft::model::quant_mix_info(m).name;
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      EXPECT_NE(std::string(e.what()).find("blk.0.attn_q.weight"), std::string::npos) << e.what();
    }
  }
  // The 16-bit mixes take any row.
  EXPECT_EQ(code(weft::model::plan_quant_types(f, odd, QuantMix::F16)[0]), 'h');
  // 32-value rows that are not 256-value ones, per fallback.
  const std::vector<QuantTensorDesc> r96 = {desc("blk.0.attn_q.weight", {96, 256})};
  const std::pair<QuantMix, char> fallbacks[] = {{QuantMix::Q2_K, 'a'},   {QuantMix::Q3_K_S, 'a'}, {QuantMix::Q4_K_S, 'c'},
                                                 {QuantMix::Q5_K_S, 'd'}, {QuantMix::Q6_K, '8'},   {QuantMix::IQ4_XS, 'n'}};
  for (const auto& [m, c] : fallbacks)
    EXPECT_EQ(code(weft::model::plan_quant_types(f, r96, m)[0]), c) << weft::model::quant_mix_info(m).name;
  // The output rule: a row that is not a whole block of the mix's type gives q8_0.
  const std::vector<QuantTensorDesc> out = {desc("output.weight", {96, 300})};
  EXPECT_EQ(code(weft::model::plan_quant_types(f, out, QuantMix::Q4_K_M)[0]), '8');
}

TEST(QuantizeMix, ExpertTensorOutsideTheLayersIsAnError) {
  const QuantModelFacts f{"llama", 2, 4, 4, 8};
  const std::vector<QuantTensorDesc> t = {desc("blk.2.ffn_down_exps.weight", {256, 256, 8})};
  try {
    weft::model::plan_quant_types(f, t, QuantMix::Q4_K_M);
    ADD_FAILURE() << "no error";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.2.ffn_down_exps.weight"), std::string::npos) << e.what();
  }
}

TEST(QuantizeMix, NamesAndFileTypes) {
  const std::pair<const char*, uint32_t> ids[] = {
      {"F32", 0},     {"F16", 1},     {"Q4_0", 2},    {"Q4_1", 3},    {"Q8_0", 7},    {"Q5_0", 8},    {"Q5_1", 9},
      {"Q2_K", 10},   {"Q3_K_S", 11}, {"Q3_K_M", 12}, {"Q3_K_L", 13}, {"Q4_K_S", 14}, {"Q4_K_M", 15}, {"Q5_K_S", 16},
      {"Q5_K_M", 17}, {"Q6_K", 18},   {"IQ4_NL", 25}, {"IQ4_XS", 30}, {"BF16", 32}};
  EXPECT_EQ(weft::model::quant_mixes().size(), std::size(ids));
  for (const auto& [name, id] : ids) {
    const auto mix = weft::model::quant_mix_from_name(name);
    ASSERT_TRUE(mix) << name;
    EXPECT_EQ(weft::model::quant_mix_info(*mix).ftype, id) << name;
    EXPECT_EQ(weft::model::quant_mix_info(*mix).name, name);
  }
  EXPECT_EQ(weft::model::quant_mix_from_name("q4_k_m"), QuantMix::Q4_K_M);
  EXPECT_EQ(weft::model::quant_mix_from_name("Q4_K"), QuantMix::Q4_K_M);
  EXPECT_EQ(weft::model::quant_mix_from_name("q5_k"), QuantMix::Q5_K_M);
  EXPECT_EQ(weft::model::quant_mix_from_name("Q3_K"), QuantMix::Q3_K_M);
  EXPECT_FALSE(weft::model::quant_mix_from_name("Q4_K_X"));
  EXPECT_FALSE(weft::model::quant_mix_from_name("IQ2_XXS"));
}

}  // namespace
