// describe(LlamaParams): how weft will run a file, for `weft gguf info`.
#include <cstdio>
#include <string>

#include "weft/model/model.h"

namespace weft::model {
namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}
std::string num(double v) { return fmt("%g", v); }

const char* family_title(Arch a) {
  switch (a) {
    case Arch::llama: return "Llama / Mistral";
    case Arch::qwen2: return "Qwen2";
    case Arch::qwen2moe: return "Qwen2-MoE";
    case Arch::qwen3: return "Qwen3";
    case Arch::qwen3moe: return "Qwen3-MoE";
    case Arch::phi3: return "Phi-3";
    case Arch::gemma2: return "Gemma 2";
    case Arch::gemma3: return "Gemma 3";
    case Arch::deepseek2: return "DeepSeek-V2/V3";
    case Arch::gptoss: return "gpt-oss";
    case Arch::bert: return "BERT encoder";
  }
  return "?";
}

std::string rope_line(const LlamaParams& p) {
  if (p.encoder)
    return "  positions: absolute embeddings (" + std::to_string(p.n_ctx_train) + "), " +
           std::to_string(p.n_token_types) + " token types (type 0 used)\n";
  std::string s = std::string("  rope: ") + (p.rope_mode == RopeMode::neox ? "neox" : "normal") + ", " +
                  std::to_string(p.n_rot) + " of " + std::to_string(p.mla() ? p.mla_k_dim : p.head_dim) + " dims, base " + num(p.rope_base);
  switch (p.rope_scaling) {
    case RopeScalingType::none: s += ", no scaling"; break;
    case RopeScalingType::linear: s += ", linear scaling x" + num(p.rope_scaling_factor); break;
    case RopeScalingType::llama3:
      s += ", llama3 frequency factors (factor " + num(p.rope_scaling_factor) + ", original context " +
           std::to_string(p.rope_n_ctx_orig) + "; rope_freqs.weight when the file has it)";
      break;
    case RopeScalingType::yarn:
      s += ", YaRN x" + num(p.rope_scaling_factor) + " (original context " + std::to_string(p.rope_n_ctx_orig) +
           ", beta " + num(p.rope_yarn_beta_fast) + "/" + num(p.rope_yarn_beta_slow) + ", magnitude " +
           num(p.rope_attn_factor) + ")";
      break;
    case RopeScalingType::longrope:
      s += ", LongRoPE (long factors beyond a context of " + std::to_string(p.rope_n_ctx_orig) + ", attn factor " +
           num(p.rope_attn_factor) + ")";
      break;
  }
  if (p.any_swa() && (p.rope_base_swa != p.rope_base || p.rope_freq_scale_swa != p.rope_freq_scale))
    s += "; sliding layers: base " + num(p.rope_base_swa) + ", unscaled";
  return s + "\n";
}

// Multi-head latent attention: what each token caches and the heads it serves.
std::string mla_line(const LlamaParams& p) {
  std::string s = "  attention: multi-head latent, " + std::to_string(p.n_head) + " heads of key " +
                  std::to_string(p.mla_k_dim) + " (rope " + std::to_string(p.n_rot) + ") and value " +
                  std::to_string(p.mla_v_dim) + ", q " +
                  (p.n_lora_q > 0 ? "rank " + std::to_string(p.n_lora_q) : std::string("uncompressed")) +
                  "; cache per token: latent " + std::to_string(p.n_lora_kv) + " + rope key " +
                  std::to_string(p.n_rot) + " values; scale " + fmt("%.6g", p.attn_scale);
  return s + "\n";
}

std::string attention_line(const LlamaParams& p) {
  if (p.mla()) return mla_line(p);
  std::string s = "  attention: " + std::to_string(p.n_head) + " heads, " + std::to_string(p.n_head_kv) +
                  " kv heads, head_dim " + std::to_string(p.head_dim) + ", scale " + fmt("%.6g", p.attn_scale);
  if (p.attn_softcap > 0) s += ", logit soft-cap " + num(p.attn_softcap);
  if (p.attn_sinks) s += ", attention sinks (one logit per head)";
  if (!p.causal) s += ", bidirectional (each sequence evaluated whole)";
  if (p.any_swa()) {
    s += ", sliding window " + std::to_string(p.n_swa) + " on ";
    if (p.swa_pattern == 1) {
      s += "every layer";
    } else {
      int64_t sliding = 0;
      for (int64_t il = 0; il < p.n_layer; ++il) sliding += p.is_swa(il);
      s += std::to_string(sliding) + " of " + std::to_string(p.n_layer) + " layers (" +
           (p.swa_pattern > 0 ? "one global layer in each " + std::to_string(p.swa_pattern) : "listed per layer") +
           ")";
    }
  }
  return s + "\n";
}

std::string ffn_line(const LlamaParams& p) {
  if (p.encoder)
    return "  feed-forward: GELU (exact, erf), width " + std::to_string(p.n_ff) +
           ", with biases; LayerNorms after each residual add; no output matrix (embeddings only)\n";
  std::string s = std::string("  feed-forward: ") + (p.ffn_act == FfnActivation::silu         ? "SwiGLU"
                                                     : p.ffn_act == FfnActivation::swiglu_oai ? "clamped SwiGLU (alpha 1.702, limit 7)"
                                                                                              : "GELU-gated");
  if (p.n_expert > 0) {
    s += ", " + std::to_string(p.n_expert_used) + " of " + std::to_string(p.n_expert) + " experts of width " +
         std::to_string(p.n_ff_expert);
    if (p.expert_gating == ExpertGating::softmax_weight)
      s += " (softmax over the top " + std::to_string(p.n_expert_used) + " logits)";
    else
      s += p.expert_weights_norm ? " (weights renormalized)" : " (weights not renormalized)";
    if (p.expert_gating == ExpertGating::sigmoid) s += ", sigmoid scores";
    if (p.expert_biases) s += ", router and expert biases";
    if (p.n_expert_groups > 1)
      s += ", best " + std::to_string(p.n_group_used) + " of " + std::to_string(p.n_expert_groups) + " groups";
    if (p.expert_weights_scale != 1.f) s += ", weights x" + num(p.expert_weights_scale);
    if (p.n_ff_shared > 0)
      s += " + a shared expert of width " + std::to_string(p.n_ff_shared) +
           (p.n_expert_shared > 0 ? " (ungated)" : " (sigmoid gate)");
    if (p.n_layer_dense_lead > 0)
      s += "; the first " + std::to_string(p.n_layer_dense_lead) + " layers dense, width " + std::to_string(p.n_ff);
  } else {
    s += ", width " + std::to_string(p.n_ff);
  }
  return s + "\n";
}

}  // namespace

std::string describe(const LlamaParams& p) {
  std::string s = std::string("model: ") + p.arch_name + " (" + family_title(p.arch) + "), " +
                  std::to_string(p.n_layer) + " layers, n_embd " + std::to_string(p.n_embd) + ", vocab " +
                  std::to_string(p.n_vocab) + ", trained context " + std::to_string(p.n_ctx_train) +
                  (p.encoder ? ", layer_norm eps " : ", rms_norm eps ") + num(p.rms_eps) + "\n";
  s += rope_line(p) + attention_line(p) + ffn_line(p);
  if (p.embed_scale || p.final_softcap > 0) {
    s += "  also:";
    if (p.embed_scale) s += " embeddings scaled by sqrt(n_embd);";
    if (p.final_softcap > 0) s += " final logit soft-cap " + num(p.final_softcap) + ";";
    s.back() = '\n';
  }
  return s;
}

}  // namespace weft::model
