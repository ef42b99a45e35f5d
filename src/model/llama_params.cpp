// LlamaParams: hyperparameters of a llama-family GGUF file, and what each
// family adds to the common keys (docs/models.md).
#include <cmath>
#include <optional>
#include <string>

#include "weft/core/error.h"
#include "weft/model/model.h"

namespace weft::model {
namespace {

constexpr const char* kLlamaParamsWhere = "model";

// What the file's architecture name selects.
struct ArchInfo {
  const char* name;
  Arch arch;
  RopeMode rope_mode;
  bool moe;                  // routed experts required
  bool weights_norm;         // default of expert_weights_norm
  FfnActivation act;
  bool embed_scale;
  int64_t swa_pattern;       // default period when the file has a window; 1: every layer
  ExpertGating gating = ExpertGating::softmax;
  bool biases_and_sinks = false;  // expert and router biases, attention sinks (gpt-oss)
};

constexpr ArchInfo kArchs[] = {
    {"llama", Arch::llama, RopeMode::normal, false, true, FfnActivation::silu, false, 1},
    {"qwen2", Arch::qwen2, RopeMode::neox, false, true, FfnActivation::silu, false, 1},
    {"qwen2moe", Arch::qwen2moe, RopeMode::neox, true, false, FfnActivation::silu, false, 1},
    {"qwen3", Arch::qwen3, RopeMode::neox, false, true, FfnActivation::silu, false, 1},
    {"qwen3moe", Arch::qwen3moe, RopeMode::neox, true, true, FfnActivation::silu, false, 1},
    {"phi3", Arch::phi3, RopeMode::neox, false, true, FfnActivation::silu, false, 1},
    {"gemma2", Arch::gemma2, RopeMode::neox, false, true, FfnActivation::gelu_tanh, true, 2},
    {"gemma3", Arch::gemma3, RopeMode::neox, false, true, FfnActivation::gelu_tanh, true, 6},
    // DeepSeek-V2/V3: normal (interleaved) rope on the rope part of each head,
    // like the reference model's; experts required, weights not renormalized
    // unless the file says so (V2 does not, V3 writes true).
    {"deepseek2", Arch::deepseek2, RopeMode::normal, true, false, FfnActivation::silu, false, 1, ExpertGating::softmax,
     false},
    // The standard engine (llama-model.cpp, LLM_ARCH_OPENAI_MOE): neox rope,
    // a window on layers 0, 2, 4, ... (set_swa_pattern(2)), softmax over the
    // top-k logits, no renormalization.
    {"gpt-oss", Arch::gptoss, RopeMode::neox, true, false, FfnActivation::swiglu_oai, false, 2,
     ExpertGating::softmax_weight, true},
    // BERT encoders (LlamaParams::encoder): no rope (rope_mode unused), an
    // ungated GELU feed-forward (act unused: build_encoder_forward's own).
    {"bert", Arch::bert, RopeMode::normal, false, true, FfnActivation::silu, false, 1},
};

const ArchInfo* find_arch(const std::string& name) {
  for (const ArchInfo& a : kArchs)
    if (name == a.name) return &a;
  return nullptr;
}

[[noreturn]] void bad_key(const GgufFile& f, const std::string& key, const std::string& what) {
  fail(ErrorKind::invalid_input, kLlamaParamsWhere, f.path() + ": key " + key + " " + what);
}

int64_t require_positive(const GgufFile& f, const std::string& key) {
  std::optional<int64_t> v = f.get_i64(key);
  if (!v) fail(ErrorKind::invalid_input, kLlamaParamsWhere, f.path() + ": missing key " + key);
  if (*v <= 0 || *v > (int64_t{1} << 31)) bad_key(f, key, "= " + std::to_string(*v) + " is out of range");
  return *v;
}

// The standard engine's pooling numbers (LlamaParams::pooling_type); -1 when absent.
int64_t read_pooling_type(const GgufFile& f, const std::string& key) {
  if (!f.has(key)) return -1;
  const std::optional<int64_t> pooling = f.get_i64(key);
  if (!pooling || *pooling < 0 || *pooling > 4) bad_key(f, key, "is not one of 0 none, 1 mean, 2 cls, 3 last, 4 rank");
  return *pooling;
}

int64_t optional_positive(const GgufFile& f, const std::string& key, int64_t fallback) {
  return f.has(key) ? require_positive(f, key) : fallback;
}

// A float key that must be finite and > 0 when present.
float optional_positive_f32(const GgufFile& f, const std::string& key, float fallback) {
  if (!f.has(key)) return fallback;
  std::optional<float> v = f.get_f32(key);
  if (!v) bad_key(f, key, "is not a number");
  if (!(std::isfinite(*v) && *v > 0)) bad_key(f, key, "= " + std::to_string(*v) + " must be finite and > 0");
  return *v;
}

// n_expert and n_expert_used: both 0 (keys absent or 0) for a dense model;
// otherwise 0 < used <= count. Errors name the key at fault.
void read_experts(const GgufFile& f, const std::string& pre, LlamaParams& p) {
  const std::string count_key = pre + "expert_count", used_key = pre + "expert_used_count";
  const int64_t count = f.get_i64(count_key).value_or(0);
  const std::optional<int64_t> used = f.get_i64(used_key);
  if (count < 0 || count > (int64_t{1} << 31)) bad_key(f, count_key, "= " + std::to_string(count) + " is out of range");
  if (count == 0) {
    if (used.value_or(0) != 0) bad_key(f, used_key, "= " + std::to_string(*used) + " in a model without " + count_key);
    return;
  }
  if (!used) fail(ErrorKind::invalid_input, kLlamaParamsWhere, f.path() + ": missing key " + used_key);
  if (*used <= 0 || *used > count)
    bad_key(f, used_key,
            "= " + std::to_string(*used) + " is outside [1, " + count_key + " = " + std::to_string(count) + "]");
  p.n_expert = count;
  p.n_expert_used = *used;
}

// Which layers slide. attention.sliding_window_pattern is a period (layer il
// slides when il % period < period - 1; 1: every layer) or, as newer
// converters write it, one bool per layer. Absent: the family's period
// (Gemma 2: 2, Gemma 3: 6); a family without one slides on every layer, as
// a window in a model's own configuration means (Phi-3, Mistral).
void read_sliding_layers(const GgufFile& f, const std::string& key, int64_t family_period, LlamaParams& p) {
  p.swa_layers.assign(static_cast<size_t>(p.n_layer), 0);
  const GgufValue* v = f.find(key);
  if (v != nullptr && v->type == GgufType::array) {
    if (v->arr.elem_type() != GgufType::boolean || static_cast<int64_t>(v->arr.size()) != p.n_layer)
      bad_key(f, key, "must be a period or " + std::to_string(p.n_layer) + " bools, one per layer");
    p.swa_pattern = 0;
    for (size_t il = 0; il < v->arr.size(); ++il) p.swa_layers[il] = v->arr.element(il).u != 0;
    return;
  }
  p.swa_pattern = optional_positive(f, key, family_period);
  for (int64_t il = 0; il < p.n_layer; ++il)
    p.swa_layers[static_cast<size_t>(il)] = p.swa_pattern == 1 || il % p.swa_pattern < p.swa_pattern - 1;
}

// YaRN (rope.scaling.type = yarn, any family): the frequencies are the
// factors LlamaModel computes (detail::yarn_rope_factors); what the keys
// add is the magnitude, attn_factor times yarn_attn_factor times
// 1 + 0.1 ln(factor), which multiplies the rotated values.
void read_yarn(const GgufFile& f, const std::string& pre, LlamaParams& p) {
  p.rope_scaling = RopeScalingType::yarn;
  if (!f.has(pre + "rope.scaling.factor"))
    fail(ErrorKind::invalid_input, kLlamaParamsWhere, f.path() + ": missing key " + pre + "rope.scaling.factor");
  if (p.rope_scaling_factor < 1.f) bad_key(f, pre + "rope.scaling.factor", "must be at least 1 for yarn");
  p.rope_yarn_beta_fast = optional_positive_f32(f, pre + "rope.scaling.yarn_beta_fast", 32.f);
  p.rope_yarn_beta_slow = optional_positive_f32(f, pre + "rope.scaling.yarn_beta_slow", 1.f);
  if (!(p.rope_yarn_beta_fast > p.rope_yarn_beta_slow))
    bad_key(f, pre + "rope.scaling.yarn_beta_fast", "must exceed yarn_beta_slow");
  const std::string ext_key = pre + "rope.scaling.yarn_ext_factor";
  if (f.has(ext_key)) {
    const float ext = *f.get_f32(ext_key);
    if (!(ext >= 0.f && ext <= 1.f)) bad_key(f, ext_key, "= " + std::to_string(ext) + " is outside [0, 1]");
    p.rope_yarn_ext_factor = ext;
  }
  const float yarn_attn = optional_positive_f32(f, pre + "rope.scaling.yarn_attn_factor", 1.f);
  const float magnitude =
      p.rope_yarn_ext_factor > 0.f ? 1.f + 0.1f * std::log(p.rope_scaling_factor) : 1.f;
  p.rope_attn_factor *= yarn_attn * magnitude;
}

// rope.scaling.*: linear (every family), llama3 (llama), and Phi-3's
// LongRoPE, which the factors tensors select (LlamaModel reads them).
void read_rope_scaling(const GgufFile& f, const std::string& pre, LlamaParams& p) {
  const std::string type_key = pre + "rope.scaling.type";
  const std::string type = f.get_string(type_key).value_or("none");
  p.rope_scaling_factor = optional_positive_f32(f, pre + "rope.scaling.factor", 1.f);
  p.rope_n_ctx_orig = optional_positive(f, pre + "rope.scaling.original_context_length", p.n_ctx_train);
  p.rope_attn_factor = optional_positive_f32(f, pre + "rope.scaling.attn_factor", 1.f);
  if (type == "none" || type == "") {
    p.rope_scaling = RopeScalingType::none;
  } else if (type == "linear") {
    p.rope_scaling = RopeScalingType::linear;
    p.rope_freq_scale = 1.f / p.rope_scaling_factor;
  } else if (type == "llama3") {
    p.rope_scaling = RopeScalingType::llama3;
    if (!f.has(pre + "rope.scaling.factor"))
      fail(ErrorKind::invalid_input, kLlamaParamsWhere, f.path() + ": missing key " + pre + "rope.scaling.factor");
    p.rope_low_freq_factor = optional_positive_f32(f, pre + "rope.scaling.low_freq_factor", 1.f);
    p.rope_high_freq_factor = optional_positive_f32(f, pre + "rope.scaling.high_freq_factor", 4.f);
    if (!(p.rope_high_freq_factor > p.rope_low_freq_factor))
      bad_key(f, pre + "rope.scaling.high_freq_factor", "must exceed low_freq_factor");
  } else if (type == "longrope" || type == "su") {
    p.rope_scaling = RopeScalingType::longrope;
  } else if (type == "yarn") {
    read_yarn(f, pre, p);
  } else {
    bad_key(f, type_key, "= '" + type + "' is not none, linear, llama3, longrope or yarn");
  }
  // A llama3 file carries its factors as rope_freqs.weight, Phi-3 files as
  // rope_factors_long/short, usually without a type key.
  if (p.rope_scaling == RopeScalingType::none && f.find_tensor("rope_freqs.weight")) p.rope_scaling = RopeScalingType::llama3;
  if (p.rope_scaling == RopeScalingType::none &&
      (f.find_tensor("rope_factors_long.weight") || f.find_tensor("rope_factors_short.weight")))
    p.rope_scaling = RopeScalingType::longrope;
}

// The factor q·k is multiplied by before soft-capping and softmax:
// attention.scale when the file has it; else 1/sqrt(head_dim), except the
// Gemma 27B models whose query_pre_attn_scalar is n_embd / n_head (their
// converters do not store it; 46 and 62 layers identify them).
float attention_scale(const GgufFile& f, const std::string& pre, const LlamaParams& p) {
  if (f.has(pre + "attention.scale")) return optional_positive_f32(f, pre + "attention.scale", 1.f);
  const bool gemma_27b = (p.arch == Arch::gemma2 && p.n_layer == 46) || (p.arch == Arch::gemma3 && p.n_layer == 62);
  const double d = gemma_27b ? static_cast<double>(p.n_embd) / static_cast<double>(p.n_head)
                             : static_cast<double>(p.head_dim);
  return static_cast<float>(1.0 / std::sqrt(d));
}

// The heads' shape: kv heads dividing heads, head_dim from key_length (or
// n_embd / n_head), equal value heads, and the rotated dims.
void read_head_shape(const GgufFile& f, const std::string& pre, LlamaParams& p) {
  if (p.n_head % p.n_head_kv != 0)
    fail(ErrorKind::invalid_input, kLlamaParamsWhere,
         f.path() + ": head_count " + std::to_string(p.n_head) + " is not a multiple of head_count_kv " +
             std::to_string(p.n_head_kv));
  const bool has_key_length = f.has(pre + "attention.key_length");
  if (!has_key_length && p.n_embd % p.n_head != 0)
    fail(ErrorKind::invalid_input, kLlamaParamsWhere,
         f.path() + ": embedding_length " + std::to_string(p.n_embd) + " is not a multiple of head_count " +
             std::to_string(p.n_head) + " (and the file has no attention.key_length)");
  p.head_dim = optional_positive(f, pre + "attention.key_length", p.n_embd / p.n_head);
  const int64_t value_length = optional_positive(f, pre + "attention.value_length", p.head_dim);
  if (value_length != p.head_dim)
    bad_key(f, pre + "attention.value_length",
            "= " + std::to_string(value_length) + " differs from key_length " + std::to_string(p.head_dim) +
                " (weft runs equal key and value heads)");
  p.n_rot = optional_positive(f, pre + "rope.dimension_count", p.head_dim);
  if (p.n_rot % 2 != 0 || p.n_rot > p.head_dim)
    bad_key(f, pre + "rope.dimension_count",
            "= " + std::to_string(p.n_rot) + " must be even and <= head_dim " + std::to_string(p.head_dim));
}

// The norms' epsilon (an encoder's are LayerNorms, under their own key)
// and whether attention is causal (attention.causal; an encoder's default
// is both ways, and only an encoder may say so).
void read_norm_and_mask(const GgufFile& f, const std::string& pre, LlamaParams& p) {
  const std::string eps_key = pre + (p.encoder ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon");
  std::optional<float> eps = f.get_f32(eps_key);
  if (!eps) fail(ErrorKind::invalid_input, kLlamaParamsWhere, f.path() + ": missing key " + eps_key);
  if (!(*eps > 0)) bad_key(f, eps_key, "must be > 0");
  p.rms_eps = *eps;
  p.causal = !p.encoder;
  if (f.has(pre + "attention.causal")) {
    std::optional<bool> causal = f.get_bool(pre + "attention.causal");
    if (!causal) bad_key(f, pre + "attention.causal", "is not a bool");
    p.causal = *causal;
  }
  if (!p.causal && !p.encoder)
    bad_key(f, pre + "attention.causal", "= false: weft runs " + p.arch_name + " causal only");
}

// A key that may be absent (fallback) or a non-negative integer <= cap.
int64_t optional_count(const GgufFile& f, const std::string& key, int64_t fallback, int64_t cap) {
  if (!f.has(key)) return fallback;
  std::optional<int64_t> v = f.get_i64(key);
  if (!v) bad_key(f, key, "is not an integer");
  if (*v < 0 || *v > cap) bad_key(f, key, "= " + std::to_string(*v) + " is outside [0, " + std::to_string(cap) + "]");
  return *v;
}

// Multi-head latent attention's shape (deepseek2). Older converters write
// the decompressed head under key_length / value_length (nope + rope, v);
// newer ones write those as the cached row (kv_lora_rank + rope, kv_lora_rank)
// and the decompressed head under key_length_mla / value_length_mla.
void read_mla_shape(const GgufFile& f, const std::string& pre, LlamaParams& p) {
  p.n_lora_kv = require_positive(f, pre + "attention.kv_lora_rank");
  p.n_lora_q = optional_count(f, pre + "attention.q_lora_rank", 0, int64_t{1} << 31);
  p.n_rot = require_positive(f, pre + "rope.dimension_count");
  if (p.n_rot % 2 != 0) bad_key(f, pre + "rope.dimension_count", "= " + std::to_string(p.n_rot) + " must be even");
  const bool mla_keys = f.has(pre + "attention.key_length_mla");
  const std::string k_key = pre + (mla_keys ? "attention.key_length_mla" : "attention.key_length");
  const std::string v_key = pre + (mla_keys ? "attention.value_length_mla" : "attention.value_length");
  p.mla_k_dim = require_positive(f, k_key);
  p.mla_v_dim = require_positive(f, v_key);
  if (p.mla_k_dim <= p.n_rot)
    bad_key(f, k_key,
            "= " + std::to_string(p.mla_k_dim) + " leaves no room for the non-rope part beside rope.dimension_count " +
                std::to_string(p.n_rot));
  if (mla_keys) {  // the plain keys then describe the cached row: check them
    const int64_t k = optional_positive(f, pre + "attention.key_length", p.n_lora_kv + p.n_rot);
    const int64_t v = optional_positive(f, pre + "attention.value_length", p.n_lora_kv);
    if (k != p.n_lora_kv + p.n_rot || v != p.n_lora_kv)
      bad_key(f, pre + "attention.key_length",
              "= " + std::to_string(k) + " / value_length " + std::to_string(v) + " do not match kv_lora_rank " +
                  std::to_string(p.n_lora_kv) + " + rope " + std::to_string(p.n_rot));
  }
  // The cache: one kv head whose row is the latent then the rope key.
  p.head_dim = p.n_lora_kv + p.n_rot;
  p.n_head_kv = 1;
}

// DeepSeek's router and expert layout, and the attention scale YaRN's
// mscale changes: 1/sqrt(mla_k_dim) times mscale^2, mscale = 1 +
// yarn_log_multiplier * ln(rope.scaling.factor) (the converter writes 0.1
// times the model's mscale_all_dim); the rotated values keep magnitude 1.
void read_deepseek2(const GgufFile& f, const std::string& pre, LlamaParams& p) {
  read_mla_shape(f, pre, p);
  p.n_layer_dense_lead = optional_count(f, pre + "leading_dense_block_count", 0, p.n_layer);
  p.n_ff_expert = require_positive(f, pre + "expert_feed_forward_length");
  p.n_expert_shared = optional_count(f, pre + "expert_shared_count", 0, 1024);
  p.n_ff_shared = p.n_ff_expert * p.n_expert_shared;
  p.expert_weights_scale = optional_positive_f32(f, pre + "expert_weights_scale", 1.f);
  const int64_t gating = optional_count(f, pre + "expert_gating_func", 0, 1024);
  if (gating == 0 || gating == 1) {
    p.expert_gating = ExpertGating::softmax;  // 0: files older than the key, V2's softmax
  } else if (gating == 2) {
    p.expert_gating = ExpertGating::sigmoid;
  } else {
    bad_key(f, pre + "expert_gating_func", "= " + std::to_string(gating) + " is not 1 (softmax) or 2 (sigmoid)");
  }
  const std::string groups_key = pre + "expert_group_count", used_key = pre + "expert_group_used_count";
  const int64_t groups = optional_count(f, groups_key, 0, p.n_expert);
  const int64_t used = optional_count(f, used_key, 0, groups);
  if (groups > 1 && used > 0 && used < groups) {  // else every expert is eligible
    if (p.n_expert % groups != 0)
      bad_key(f, groups_key, "= " + std::to_string(groups) + " does not divide expert_count " + std::to_string(p.n_expert));
    if (p.n_expert_used > used * (p.n_expert / groups))
      bad_key(f, used_key,
              "= " + std::to_string(used) + " groups of " + std::to_string(p.n_expert / groups) +
                  " experts hold fewer than expert_used_count " + std::to_string(p.n_expert_used));
    p.n_expert_groups = groups;
    p.n_group_used = used;
  }
  float log_mul = 0.f;
  if (f.has(pre + "rope.scaling.yarn_log_multiplier")) {
    const std::optional<float> v = f.get_f32(pre + "rope.scaling.yarn_log_multiplier");
    if (!v || !(std::isfinite(*v) && *v >= 0.f))
      bad_key(f, pre + "rope.scaling.yarn_log_multiplier", "must be a finite number >= 0");
    log_mul = *v;
  }
  double mscale = 1.0;
  if (p.rope_scaling == RopeScalingType::yarn) {
    mscale = 1.0 + static_cast<double>(log_mul) * std::log(static_cast<double>(p.rope_scaling_factor));
    p.rope_attn_factor = 1.f;  // the magnitude is in the scale instead
  }
  p.attn_scale = static_cast<float>(mscale * mscale / std::sqrt(static_cast<double>(p.mla_k_dim)));
}

}  // namespace

const char* known_architectures() {
  return "llama, qwen2, qwen2moe, qwen3, qwen3moe, phi3, gemma2, gemma3, deepseek2, gpt-oss, bert";
}

bool is_known_architecture(const std::string& name) { return find_arch(name) != nullptr; }

LlamaParams LlamaParams::from_gguf(const GgufFile& f) {
  LlamaParams p;
  std::optional<std::string> arch = f.get_string("general.architecture");
  if (!arch) fail(ErrorKind::invalid_input, kLlamaParamsWhere, f.path() + ": missing key general.architecture");
  const ArchInfo* info = find_arch(*arch);
  if (!info)
    fail(ErrorKind::invalid_input, kLlamaParamsWhere,
         f.path() + ": general.architecture '" + *arch + "' is not one weft runs (" + known_architectures() + ")");
  p.arch = info->arch;
  p.arch_name = *arch;
  p.rope_mode = info->rope_mode;
  p.ffn_act = info->act;
  p.embed_scale = info->embed_scale;
  p.expert_gating = info->gating;
  p.expert_biases = info->biases_and_sinks;
  p.attn_sinks = info->biases_and_sinks;
  const std::string pre = *arch + ".";
  p.n_embd = require_positive(f, pre + "embedding_length");
  p.n_layer = require_positive(f, pre + "block_count");
  if (static_cast<uint64_t>(p.n_layer) > f.tensors().size())  // every layer has several tensors
    bad_key(f, pre + "block_count",
            "= " + std::to_string(p.n_layer) + " exceeds the file's " + std::to_string(f.tensors().size()) + " tensors");
  p.n_ff = require_positive(f, pre + "feed_forward_length");
  p.n_head = require_positive(f, pre + "attention.head_count");
  p.n_head_kv = optional_positive(f, pre + "attention.head_count_kv", p.n_head);
  p.n_ctx_train = require_positive(f, pre + "context_length");
  p.pooling_type = read_pooling_type(f, pre + "pooling_type");
  p.encoder = p.arch == Arch::bert;
  read_norm_and_mask(f, pre, p);
  p.rope_base = optional_positive_f32(f, pre + "rope.freq_base", 10000.f);
  read_experts(f, pre, p);
  if (info->moe && p.n_expert == 0)
    fail(ErrorKind::invalid_input, kLlamaParamsWhere,
         f.path() + ": missing key " + pre + "expert_count (" + *arch + " routes experts)");
  p.n_ff_expert = optional_positive(f, pre + "expert_feed_forward_length", p.n_ff);
  if (p.arch == Arch::qwen2moe) p.n_ff_shared = require_positive(f, pre + "expert_shared_feed_forward_length");
  if (f.has(pre + "expert_weights_norm")) {
    std::optional<bool> norm = f.get_bool(pre + "expert_weights_norm");
    if (!norm) bad_key(f, pre + "expert_weights_norm", "is not a bool");
    p.expert_weights_norm = *norm;
  } else {
    p.expert_weights_norm = info->weights_norm;
  }

  if (p.arch != Arch::deepseek2) read_head_shape(f, pre, p);
  if (p.encoder) p.n_rot = 0;  // absolute position embeddings, no rope

  read_rope_scaling(f, pre, p);
  p.rope_base_swa = p.rope_base;
  p.rope_freq_scale_swa = p.rope_freq_scale;
  if (p.arch == Arch::gemma3) {  // local layers: their own base, unscaled
    p.rope_base_swa = optional_positive_f32(f, pre + "rope.freq_base_swa", 10000.f);
    p.rope_freq_scale_swa = 1.f;
  }

  if (p.arch == Arch::deepseek2)
    read_deepseek2(f, pre, p);  // MLA's shape and scale, and the router
  else
    p.attn_scale = attention_scale(f, pre, p);
  p.attn_softcap = optional_positive_f32(f, pre + "attn_logit_softcapping", 0.f);
  p.final_softcap = optional_positive_f32(f, pre + "final_logit_softcapping", 0.f);
  // gpt-oss alternates windowed and full layers by design: the standard
  // engine requires its window key, and so does weft (without it every
  // layer would silently attend to the whole context).
  p.n_swa = p.arch == Arch::gptoss ? require_positive(f, pre + "attention.sliding_window")
                                   : optional_positive(f, pre + "attention.sliding_window", 0);
  if (p.n_swa > 0) read_sliding_layers(f, pre + "attention.sliding_window_pattern", info->swa_pattern, p);

  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) fail(ErrorKind::invalid_input, kLlamaParamsWhere, f.path() + ": missing tensor token_embd.weight");
  if (embd->n_dims != 2 || embd->ne[0] != p.n_embd)
    fail(ErrorKind::invalid_input, kLlamaParamsWhere,
         f.path() + ": tensor token_embd.weight must be [" + std::to_string(p.n_embd) + ", n_vocab]");
  p.n_vocab = embd->ne[1];
  if (const GgufTensorInfo* types = f.find_tensor("token_types.weight"); p.encoder && types != nullptr)
    p.n_token_types = types->n_dims == 2 ? types->ne[1] : 0;
  return p;
}

}  // namespace weft::model
