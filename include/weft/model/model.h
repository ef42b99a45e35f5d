// Llama-family models read from GGUF files (docs/models.md): Llama 2/3.x,
// Mistral/Mixtral, Qwen2, Qwen2-MoE, Qwen3, Qwen3-MoE, Phi-3, Gemma 2/3,
// DeepSeek-V2/V3 and gpt-oss, run as one weft graph per call.
//
// The parameters (LlamaParams), the weights and KV cache as named tensors,
// and the forward graph (LlamaModel::build_forward) of each family: what a
// model is. How it runs on devices (backends, the scheduler, graph reuse,
// batch slots, pipelining) is weft::Executor's (weft/runtime/executor.h):
//
//   auto file = weft::GgufFile::open("model.gguf");
//   auto dev = weft::make_cpu_device();
//   weft::Executor m(*file, *dev, /*n_ctx=*/512);             // file may close now
//   std::vector<float> logits = m.eval(prompt, 0);           // [n][vocab]
//   int next = weft::model::greedy(&logits[(prompt.size() - 1) * vocab], vocab);
//   logits = m.eval({&next, 1}, prompt.size());              // uses the KV cache
//
// weft::Session (weft/runtime/session.h) adds device specs, placement and
// generation on top.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "weft/backend/alloc.h"
#include "weft/backend/backend.h"
#include "weft/core/context.h"
#include "weft/core/graph.h"
#include "weft/gguf/gguf.h"

namespace weft::model {

namespace detail {
struct ModelWeights;
}

// The families weft runs (general.architecture): what differs between them
// is read into LlamaParams once, so the graph code asks "does this model
// have X" rather than "which family is this" (docs/models.md).
enum class Arch { llama, qwen2, qwen2moe, qwen3, qwen3moe, phi3, gemma2, gemma3, deepseek2, gptoss, bert };

// The architecture names weft runs, comma-separated (for error messages).
const char* known_architectures();
bool is_known_architecture(const std::string& name);

// How weft will run a model with these parameters, a few lines of text
// ending in a newline ("model: gemma2 (Gemma 2), 26 layers, ..."), as
// `weft gguf info` prints it.
struct LlamaParams;
std::string describe(const LlamaParams& p);

// How rope frequencies are scaled (rope.scaling.type, or a factors tensor).
enum class RopeScalingType {
  none,
  linear,    // freq_scale = 1 / rope.scaling.factor
  llama3,    // per-frequency factors (rope_freqs.weight, or computed from the keys)
  longrope,  // Phi-3: rope_factors_long / rope_factors_short by context length
  yarn,      // YaRN: per-frequency factors blending interpolation and extrapolation, scaled magnitudes
};

// The gated feed-forward's activation: silu(gate) * up, gelu(gate) * up, or
// gpt-oss's clamped SwiGLU (ops::swiglu_oai with alpha 1.702, limit 7).
enum class FfnActivation { silu, gelu_tanh, swiglu_oai };
inline constexpr float kSwigluOaiAlpha = 1.702f;
inline constexpr float kSwigluOaiLimit = 7.0f;

// How a mixture-of-experts router turns its logits into expert weights
// (expert_gating_func, the standard engine's numbering 1-3): softmax over
// all experts, then the top k of those probabilities (Mixtral, Qwen,
// DeepSeek-V2); an independent sigmoid per expert (DeepSeek-V3); or the top
// k logits, then softmax over those k alone (gpt-oss, "softmax weight").
enum class ExpertGating { softmax, sigmoid, softmax_weight };

struct LlamaParams {
  Arch arch = Arch::llama;
  std::string arch_name;      // general.architecture
  int64_t n_vocab = 0;        // rows of token_embd
  int64_t n_embd = 0;         // embedding_length
  int64_t n_layer = 0;        // block_count
  int64_t n_ff = 0;           // feed_forward_length
  int64_t n_head = 0;         // attention.head_count
  int64_t n_head_kv = 0;      // attention.head_count_kv (default n_head)
  int64_t head_dim = 0;       // attention.key_length (default n_embd / n_head)
  int64_t n_rot = 0;          // rope.dimension_count (default head_dim)
  int64_t n_ctx_train = 0;    // context_length
  // pooling_type, as the standard engine numbers it: 0 none, 1 mean, 2 cls,
  // 3 last, 4 rank; -1 when the file has no such key. Embeddings read it
  // (weft serve's /v1/embeddings); generation ignores it.
  int64_t pooling_type = -1;
  float rms_eps = 0;          // attention.layer_norm_rms_epsilon
  int64_t n_expert = 0;       // expert_count; 0: dense feed-forward layers
  int64_t n_expert_used = 0;  // expert_used_count: experts per token, in (0, n_expert]
  int64_t n_ff_expert = 0;    // expert_feed_forward_length (default n_ff)
  int64_t n_ff_shared = 0;    // expert_shared_feed_forward_length: qwen2moe's shared expert
  bool expert_weights_norm = true;  // renormalize the top-k probabilities to sum to 1
  // DeepSeek-V2/V3 routing (docs/models.md, "deepseek2"): scores by
  // softmax or sigmoid; a selection bias (exp_probs_b) added for the choice
  // only; experts in n_expert_groups equal groups of which the
  // n_group_used with the best sums of their two best biased scores are
  // eligible (0: no groups); the chosen weights times expert_weights_scale.
  ExpertGating expert_gating = ExpertGating::softmax;  // expert_gating_func
  float expert_weights_scale = 1.f;                     // expert_weights_scale
  int64_t n_expert_groups = 0;                          // expert_group_count
  int64_t n_group_used = 0;                             // expert_group_used_count
  int64_t n_layer_dense_lead = 0;  // leading_dense_block_count: the first layers have a dense FFN
  int64_t n_expert_shared = 0;     // expert_shared_count: an ungated shared expert of n_ff_shared = this * n_ff_expert

  // Multi-head latent attention (deepseek2; kv_lora_rank > 0). Each token
  // caches the normalized latent c_kv [kv_lora_rank] and the shared rope
  // key k_pe [n_rot]: one "kv head" of head_dim = kv_lora_rank + n_rot
  // (n_head_kv = 1), the values the first kv_lora_rank columns of it.
  // Queries are absorbed into that latent space per head (attn_k_b) and
  // each head's latent output expanded by attn_v_b.
  int64_t n_lora_q = 0;    // attention.q_lora_rank; 0: q = attn_q · x
  int64_t n_lora_kv = 0;   // attention.kv_lora_rank; 0: no MLA
  int64_t mla_k_dim = 0;   // a decompressed head's key: nope + rope (attention.key_length_mla)
  int64_t mla_v_dim = 0;   // a decompressed head's value (attention.value_length_mla)
  bool mla() const { return n_lora_kv > 0; }
  // Values per cached row and attended value width (head_dim unless MLA).
  int64_t value_dim() const { return mla() ? n_lora_kv : head_dim; }
  // Whether layer il routes experts (a deepseek2 file's leading layers are dense).
  bool is_moe_layer(int64_t il) const { return n_expert > 0 && il >= n_layer_dense_lead; }
  // gpt-oss: the router and each expert's three projections have biases
  // (ffn_gate_inp.bias, ffn_{gate,up,down}_exps.bias), and every head an
  // attention sink (attn_sinks.weight): each family that has them must.
  bool expert_biases = false;
  bool attn_sinks = false;

  // Rope. Global (non-sliding) layers use rope_base and rope_freq_scale;
  // sliding-window layers rope_base_swa and rope_freq_scale_swa (equal
  // unless the family gives local layers their own, as Gemma 3 does).
  RopeMode rope_mode = RopeMode::normal;
  float rope_base = 10000.f;  // rope.freq_base
  float rope_freq_scale = 1.f;
  float rope_base_swa = 10000.f;
  float rope_freq_scale_swa = 1.f;
  RopeScalingType rope_scaling = RopeScalingType::none;
  float rope_scaling_factor = 1.f;         // rope.scaling.factor
  int64_t rope_n_ctx_orig = 0;             // rope.scaling.original_context_length
  float rope_low_freq_factor = 1.f;        // llama3 scaling from keys
  float rope_high_freq_factor = 4.f;
  float rope_attn_factor = 1.f;            // rope.scaling.attn_factor (Phi-3 LongRoPE); YaRN's magnitude
  float rope_yarn_beta_fast = 32.f;        // rope.scaling.yarn_beta_fast: rotations where extrapolation ends
  float rope_yarn_beta_slow = 1.f;         // rope.scaling.yarn_beta_slow: rotations where interpolation starts
  float rope_yarn_ext_factor = 1.f;        // rope.scaling.yarn_ext_factor: how much of the ramp applies

  // Attention.
  float attn_scale = 0;        // multiplies q·k: attention.scale, or the family's rule
  float attn_softcap = 0;      // attn_logit_softcapping; 0: none
  float final_softcap = 0;     // final_logit_softcapping; 0: none
  int64_t n_swa = 0;           // attention.sliding_window; 0: none
  // attention.sliding_window_pattern as a period: layer il slides when
  // il % pattern < pattern - 1 (1: every layer); 0 when the file lists the
  // layers one by one. swa_layers holds the outcome, one flag per layer
  // (empty when n_swa is 0).
  int64_t swa_pattern = 0;
  std::vector<uint8_t> swa_layers;

  // An encoder (bert): absolute position and token-type embeddings, each
  // block's LayerNorms (with biases) after its residual adds, an ungated
  // GELU feed-forward with biases, no rope and no output matrix: it gives
  // hidden states (LogitRows::hidden) for embeddings, never logits.
  // rms_eps then holds attention.layer_norm_epsilon, and n_rot is 0.
  bool encoder = false;
  // attention.causal: false lets every token of a sequence attend to every
  // other (an encoder's default); a sequence is then evaluated whole, in
  // one call from position 0.
  bool causal = true;
  int64_t n_token_types = 0;  // tokenizer.ggml.token_type_count (bert; type 0 is used)

  // Block shape.
  bool embed_scale = false;    // token embeddings times sqrt(n_embd) (Gemma)
  FfnActivation ffn_act = FfnActivation::silu;

  // Throws Error(invalid_input) naming a missing or impossible key, or an
  // architecture weft does not run (with the list of those it does).
  static LlamaParams from_gguf(const GgufFile& file);

  // Whether layer il attends through a sliding window.
  bool is_swa(int64_t il) const {
    return n_swa > 0 && il >= 0 && il < static_cast<int64_t>(swa_layers.size()) && swa_layers[static_cast<size_t>(il)];
  }
  bool any_swa() const {
    for (int64_t il = 0; il < n_layer; ++il)
      if (is_swa(il)) return true;
    return false;
  }
};

// Weights of one block; what a family does not have is nullptr. Attention
// reads wq/wk/wv, or the fused wqkv (Phi-3: rows q, then k, then v), with
// optional biases; q_norm/k_norm normalize each head before rope (Qwen3,
// Gemma 3); attn_post_norm and ffn_post_norm normalize each half's output
// before the residual add (Gemma 2/3). A dense layer has w_gate, w_up and
// w_down, or w_up alone holding gate and up (Phi-3: [n_embd, 2 n_ff], the
// gate first); a mixture-of-experts one (n_expert > 0) the router and the
// stacked experts, and qwen2moe also a shared expert with its sigmoid gate.
// gpt-oss's ffn_norm is the file's post_attention_norm (the pre-FFN norm
// under that name).
struct LlamaLayer {
  Tensor* attn_norm = nullptr;
  Tensor* wq = nullptr;
  Tensor* wk = nullptr;
  Tensor* wv = nullptr;
  Tensor* wqkv = nullptr;
  Tensor* wo = nullptr;
  Tensor* bo = nullptr;              // attn_output.bias [n_embd] (gpt-oss)
  Tensor* attn_sinks = nullptr;      // f32 [n_head]: each head's sink logit (gpt-oss)
  Tensor* bq = nullptr;
  Tensor* bk = nullptr;
  Tensor* bv = nullptr;
  Tensor* q_norm = nullptr;          // [head_dim]
  Tensor* k_norm = nullptr;          // [head_dim]
  Tensor* attn_post_norm = nullptr;  // [n_embd]
  Tensor* ffn_norm = nullptr;
  Tensor* ffn_post_norm = nullptr;   // [n_embd]
  Tensor* w_gate = nullptr;
  Tensor* w_up = nullptr;            // [n_embd, n_ff], or [n_embd, 2 n_ff] without w_gate
  Tensor* w_down = nullptr;
  Tensor* ffn_gate_inp = nullptr;    // router [n_embd, n_expert]
  Tensor* ffn_gate_exps = nullptr;   // [n_embd, n_ff_expert, n_expert]
  Tensor* ffn_up_exps = nullptr;     // [n_embd, n_ff_expert, n_expert]
  Tensor* ffn_down_exps = nullptr;   // [n_ff_expert, n_embd, n_expert]
  Tensor* ffn_gate_inp_b = nullptr;   // [n_expert]: the router's bias (gpt-oss)
  Tensor* ffn_gate_exps_b = nullptr;  // [n_ff_expert, n_expert]: each expert's biases (gpt-oss)
  Tensor* ffn_up_exps_b = nullptr;    // [n_ff_expert, n_expert]
  Tensor* ffn_down_exps_b = nullptr;  // [n_embd, n_expert]
  Tensor* ffn_gate_inp_shexp = nullptr;  // [n_embd]: the shared expert's gate
  Tensor* ffn_gate_shexp = nullptr;      // [n_embd, n_ff_shared]
  Tensor* ffn_up_shexp = nullptr;        // [n_embd, n_ff_shared]
  Tensor* ffn_down_shexp = nullptr;      // [n_ff_shared, n_embd]
  Tensor* exp_probs_b = nullptr;         // [n_expert]: the selection bias (deepseek2 V3)
  // An encoder's (bert) post-residual LayerNorms and feed-forward biases:
  // attn_output_norm after attention's residual add, layer_output_norm
  // after the feed-forward's; w_up/w_down ungated.
  Tensor* attn_out_norm = nullptr;     // [n_embd]
  Tensor* attn_out_norm_b = nullptr;   // [n_embd]
  Tensor* layer_out_norm = nullptr;    // [n_embd]
  Tensor* layer_out_norm_b = nullptr;  // [n_embd]
  Tensor* b_up = nullptr;              // [n_ff]
  Tensor* b_down = nullptr;            // [n_embd]
  // Multi-head latent attention (LlamaParams::mla()): q from wq_a, q_a_norm
  // and wq_b ([n_lora_q, n_head * mla_k_dim]), or from wq alone; the latent
  // and rope key from wkv_a_mqa [n_embd, n_lora_kv + n_rot]; wk_b [nope,
  // n_lora_kv, n_head] and wv_b [n_lora_kv, mla_v_dim, n_head], read from
  // the file or cut at load from its attn_kv_b.
  Tensor* wq_a = nullptr;
  Tensor* q_a_norm = nullptr;
  Tensor* wq_b = nullptr;
  Tensor* wkv_a_mqa = nullptr;
  Tensor* kv_a_norm = nullptr;
  Tensor* wk_b = nullptr;
  Tensor* wv_b = nullptr;
  // With LoadOptions::expert_split: the stacked experts cut by placement
  // (ffn_*_exps are then nullptr): each slice holds experts [first, first +
  // ne[2]) of the layer on placement `part`'s device.
  struct ExpertSlice {
    int part = 0;
    int32_t first = 0;
    Tensor* gate = nullptr;  // [n_embd, n_ff_expert, count]
    Tensor* up = nullptr;
    Tensor* down = nullptr;  // [n_ff_expert, n_embd, count]
    // The whole stack's biases (gpt-oss; never set on a slice of a split).
    Tensor* gate_b = nullptr;
    Tensor* up_b = nullptr;
    Tensor* down_b = nullptr;
  };
  std::vector<ExpertSlice> expert_slices;
  // Tensor parallelism (ModelLayout::tensor_shares): the layer cut by
  // whole key/value heads and feed-forward columns over parts, each shard
  // computing its heads' attention (with its own slice of the KV cache) and
  // its columns of the feed-forward into a partial sum of the output; the
  // layer's part (the run's home) adds the partials. The layer's whole
  // wq/wk/wv/wqkv, their biases, wo, attn_sinks and caches are then
  // nullptr, and w_gate/w_up/w_down too when its feed-forward is dense
  // (a mixture-of-experts feed-forward stays whole on the home part).
  // Norms, bo and post-norms stay the layer's, on the home part.
  struct Shard {
    int part = 0;
    int64_t first_head = 0, n_head = 0;   // query heads [first_head, + n_head)
    int64_t first_kv = 0, n_kv = 0;       // key/value heads
    int64_t first_ff = 0, n_ff = 0;       // feed-forward columns (0: none of the feed-forward)
    Tensor* wq = nullptr;                 // [n_embd, n_head * head_dim]: rows of wq (or of wqkv's q)
    Tensor* wk = nullptr;
    Tensor* wv = nullptr;
    Tensor* bq = nullptr;
    Tensor* bk = nullptr;
    Tensor* bv = nullptr;
    Tensor* wo = nullptr;                 // [n_head * head_dim, n_embd]: wo's columns, gathered at load
    Tensor* attn_sinks = nullptr;         // [n_head]
    Tensor* q_norm = nullptr;             // the layer's, or this part's copy of it
    Tensor* k_norm = nullptr;
    Tensor* gate = nullptr;               // [n_embd, n_ff]: rows of w_gate (or of Phi-3's fused w_up)
    Tensor* up = nullptr;
    Tensor* down = nullptr;               // [n_ff, n_embd]: w_down's columns, gathered at load
    Tensor* k_cache = nullptr;            // [head_dim, rows, n_kv]
    Tensor* v_cache = nullptr;
  };
  std::vector<Shard> shards;
  // [head_dim, n_ctx, n_head_kv] of LoadOptions::cache_type: a kv head's
  // rows side by side, so attention over a head reads one run of memory.
  Tensor* k_cache = nullptr;
  Tensor* v_cache = nullptr;  // the same; nullptr with MLA (the values are k_cache's first n_lora_kv columns)
};

// LoadOptions::sliding_ring_step's default.
inline constexpr int64_t kSlidingRingStep = 512;

// Rows a sliding-window layer's ring keeps for n_ctx positions, steps of
// `step` tokens: n_swa + step - 1 rounded up to 32, or 0 (full caches) when
// that is not fewer than n_ctx, no layer slides, or step is 0.
int64_t sliding_ring_rows(const LlamaParams& p, int64_t n_ctx, int64_t step);

// What one part of a split model holds (see LlamaModel::plan).
struct PartPlan {
  int64_t first_layer = 0;
  int64_t last_layer = 0;
  int64_t n_experts = 0;  // its experts of each layer, with an expert split (else 0)
  // With tensor parallelism, the query heads of its run's layers it
  // computes (first_layer/last_layer then the run's); 0, 0: every head.
  int64_t first_head = 0;
  int64_t last_head = 0;
  double ffn_share = 0;  // weft::PlacementPart::ffn_share (0: feed-forward columns by the heads)
  size_t weight_bytes = 0;
  size_t kv_cache_bytes = 0;
};

// Called while a model's weights are copied to their devices, after each
// tensor: bytes copied so far and the total (the same for every call).
using LoadProgress = std::function<void(size_t done, size_t total)>;

// How a model's weights reach their devices.
struct LoadOptions {
  // On the host CPU device, the weights are the file's mapped bytes, used
  // in place: nothing is copied, loading takes milliseconds and the memory
  // is the page cache's (shared with other processes mapping the file; the
  // kernel may drop clean pages under pressure and read them back). The
  // mapping outlives the GgufFile. A share whose tensors are not 32-byte
  // aligned in the file, and any other device, gets copies. false: copy.
  bool map_weights = true;
  // Attention as one flash_attn node per layer (K and V read in place,
  // no score matrix) when every device of the placement runs it; else, or
  // false, the unfused products and soft_max.
  bool fused_attention = true;
  // The KV cache's element type: f16, or q8_0 (34 bytes per 32 values: 0.53
  // of the f16 bytes; needs fused attention on every device of the
  // placement and a head size that is a multiple of 32). Anything else, or
  // q8_0 without fused attention, is Error(unsupported) naming why.
  DType cache_type = DType::f16;
  // Tensor parallelism: how activations cross between a run's parts (the
  // normalized input out to the others, their partial sums back): f32
  // (exact up to the order of the additions), or q8_0 (34 bytes per 32
  // values, 0.27 of the bytes, for slow links; each crossing then rounds
  // the values as a q8_0 matrix product's activations are). Needs n_embd a
  // multiple of 32; anything else is Error(unsupported).
  DType tensor_partials = DType::f32;
  // Pipelined prompts: over a placement where two or more devices hold
  // layers, a prompt of more than this many tokens evaluated for its last
  // token's logits (LogitRows::last or none) goes in micro-batches of this
  // many, submitted without waiting, so device k works on micro-batch i
  // while device k + 1 works on i - 1 (the scheduler keeps a memory set per
  // stage, at most 4; submit_batch's slots are those sets).
  // 0: one batch.
  int64_t pipeline_micro_batch = 64;
  // Experts spread over devices (`weft run --experts-split`,
  // docs/experts-split.md): empty, or one count per placement summing to
  // n_expert. Placement i's device then holds experts [c_0 + ... + c_(i-1),
  // + c_i) of every mixture-of-experts layer and computes the (token,
  // expert) pairs routed to them; the layer's own device routes, sends the
  // other slices their inputs, computes its own slice while they run, and
  // adds the parts. Error(invalid_input) for counts that do not fit.
  std::vector<int64_t> expert_split;
  // With expert_split: false computes the layer's own slice before the
  // others are sent (serialised, what `weft bench model` measures the
  // overlap against).
  bool experts_overlap = true;
  // With expert_split: each other device's slice is sent only the rows of
  // the tokens routed to it, and sends back only theirs (routed_rows and
  // kFlagSparseRows: SET_TENSOR_ROWS and GET_TENSOR_ROWS on a 1.7 worker).
  // false: every row, as before (what the bench compares bytes against).
  bool experts_routed_rows = true;
  // Sliding-window layers keep a ring of the window plus one step of rows
  // (n_swa + step - 1, rounded up to 32) instead of n_ctx when that is
  // fewer: position p lives in row p mod rows. One eval then writes at most
  // `step` positions (longer ones are cut into steps), and it may go back
  // (a cached prefix) only as far as the ring still holds the window before
  // it (Error(invalid_input) otherwise). Batches over sequences (eval_batch,
  // submit_batch) need full caches: 0 turns the ring off.
  int64_t sliding_ring_step = kSlidingRingStep;
};

// Which tokens' logits an eval computes and returns: every token's (a
// perplexity, a test against a reference), the last one's (generation),
// none (the KV cache only: the last layer's output is computed, no output
// norm or product, and the logits come back empty), or every token's hidden
// state instead of its logits (embeddings: the last layer's output after
// the output norm, n_embd floats per token, no output product; with a
// batch's out_rows, those tokens' alone).
enum class LogitRows { all, last, none, hidden };

// One token of a batch over several sequences (LlamaModel::eval_batch). The
// KV cache is cut into n_seq equal parts of n_ctx / n_seq rows: sequence s
// owns rows [s * seq_ctx, (s + 1) * seq_ctx), and its token at position p
// writes row s * seq_ctx + p and attends to rows s * seq_ctx .. that row,
// never another sequence's.
struct BatchToken {
  int32_t token = 0;
  int32_t pos = 0;      // position in its sequence, [0, seq_ctx)
  int32_t seq = 0;      // [0, n_seq)
  bool logits = false;  // whether eval_batch returns this token's logits
};

// What one part computes of the layers of its home part's run when they
// are cut by heads (tensor parallelism; LlamaLayer::Shard): key/value heads
// [first_kv, last_kv) with the query heads that read them, and feed-forward
// columns [first_ff, last_ff). A part not in such a run: home is itself and
// the ranges are empty.
struct TensorShare {
  int home = 0;
  int64_t first_kv = 0, last_kv = 0;
  int64_t first_ff = 0, last_ff = 0;
};

// Feed-forward column boundaries for key/value head boundaries kv_bounds
// (n_head_kv at the end): each share's columns in proportion to its heads,
// on multiples of align (the down projection's block size), the last at
// n_ff. A share may get no columns when n_ff has few blocks.
std::vector<int64_t> ffn_bounds(std::span<const int64_t> kv_bounds, int64_t n_head_kv, int64_t n_ff, int64_t align);

// How a model is cut over the parts of a placement, as far as its graph
// and its memory need to know: which part holds each layer, each part's
// experts, and what the parts' devices run (the executor decides it from
// its devices: weft/runtime/executor.h). The model knows no device.
struct ModelLayout {
  // parts + 1 boundaries from 0 to n_layer, nondecreasing (a part may hold
  // no layer); empty: one part holding everything.
  std::vector<int64_t> layer_bounds;
  std::vector<int64_t> expert_split;  // LoadOptions::expert_split: one count per part, or empty
  // With expert_split, per part: whether its device computes routed_rows
  // (so the layers send its slice only its rows); empty: none does.
  std::vector<char> routes_rows;
  bool experts_overlap = true;        // LoadOptions::experts_overlap
  bool fused_attention = true;        // flash_attn nodes (every part's device runs them)
  DType cache_type = DType::f16;      // LoadOptions::cache_type
  int64_t sliding_ring_step = kSlidingRingStep;
  // Tensor parallelism: one share per part, or empty (none). A run of
  // layers cut by heads has one home part that holds the layers
  // (layer_bounds gives it the run; the run's other parts hold no layer of
  // their own) and shares of it on its own and other parts.
  std::vector<TensorShare> tensor_shares;
  // Per part, for the run cut by heads whose home it is: whether the
  // partial sums of the run's other parts are added on the first of them
  // (pushed to it over peer links) so that the home reads one sum per
  // layer's sum instead of one partial per part. Empty: none.
  std::vector<char> partials_meet;
  DType partials_type = DType::f32;  // LoadOptions::tensor_partials
  bool partials_meet_for(int home) const {
    return static_cast<size_t>(home) < partials_meet.size() && partials_meet[static_cast<size_t>(home)] != 0;
  }
};

// A tensor-parallel last run's output product cut by vocabulary rows
// (LlamaModel::output_split): part `part` multiplies rows [first, first +
// count) of the output matrix, held as its own row slice `w`, or (w
// nullptr) read in place from the token embedding the part holds (a tied
// output on the first part).
struct OutputSlice {
  int part = 0;
  int64_t first = 0;
  int64_t count = 0;
  Tensor* w = nullptr;
};

// A llama-family model's definition: its parameters, its weights and KV
// cache as named tensors, and the graphs of its forward pass, for a given
// batch and layout. It describes memory (which tensors each part holds,
// and fills weights from the file into memory it is given) but runs
// nothing: weft::Executor (weft/runtime/executor.h) owns the backends, the
// scheduler, the graphs and the slots that do.
class LlamaModel {
 public:
  // Reads the parameters and describes every tensor the model reads (not
  // loaded), cut by layout, with KV cache tensors of n_ctx positions: none
  // bound to memory until the executor binds them (load_part_weights,
  // part_caches). Throws Error(invalid_input) naming a missing tensor, one
  // of the wrong shape or a layout that does not fit; Error(unsupported)
  // for a cache type it cannot hold.
  LlamaModel(const GgufFile& file, int64_t n_ctx, const ModelLayout& layout = {});
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;
  ~LlamaModel();

  // What each part of a split by layer boundaries bounds (parts + 1 of them,
  // from 0 to n_layer) would hold with a KV cache of n_ctx positions, after
  // the same checks of the file's tensors as the constructor makes (and the
  // same errors), without allocating or reading any weight.
  // expert_split as LoadOptions::expert_split (one count per part).
  // sliding_ring_step as LoadOptions'. tensor_shares as
  // ModelLayout::tensor_shares: a part sharing a run holds its shards'
  // weights and its heads' share of the KV cache.
  static std::vector<PartPlan> plan(const GgufFile& file, std::span<const int64_t> bounds, int64_t n_ctx,
                                    DType cache_type = DType::f16, std::span<const int64_t> expert_split = {},
                                    int64_t sliding_ring_step = kSlidingRingStep,
                                    std::span<const TensorShare> tensor_shares = {});

  const LlamaParams& params() const { return params_; }
  const ModelLayout& layout() const { return layout_; }
  int64_t n_ctx() const { return n_ctx_; }
  int n_parts() const { return n_parts_; }
  int layer_part(int64_t il) const { return layer_part_[static_cast<size_t>(il)]; }
  // Whether the output product reads the token embedding (a tied output:
  // it then runs on the embedding's part, the first).
  bool output_tied() const { return output_ == tok_embd_; }
  // Whether the output product is cut by vocabulary rows over the parts of
  // a tensor-parallel last run (each part its share; docs/placement.md),
  // and the part the output norm and the logits' concatenation run on:
  // that run's home when cut, else the last part.
  bool output_split() const { return !output_slices_.empty(); }
  int output_part() const { return output_split() ? output_part_ : n_parts_ - 1; }
  // Rows each sliding-window layer keeps (LoadOptions::sliding_ring_step);
  // 0 when every layer keeps n_ctx.
  int64_t sliding_ring_rows() const { return ring_rows_; }
  bool fused_attention() const { return layout_.fused_attention; }
  DType cache_type() const { return layout_.cache_type; }
  const LlamaLayer& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }

  // Memory. The weights part holds (the embedding in the first, the output
  // norm and a separate output in the last, each layer's in its part), and
  // its KV cache tensors (zeroed by whoever allocates them).
  const std::vector<Tensor*>& part_weights(int part) const { return part_weights_[static_cast<size_t>(part)]; }
  std::vector<Tensor*> part_caches(int part) const;
  // Binds part's weights to memory of device and fills them from file:
  // with map, on the host CPU, the file's mapped bytes in place (nothing
  // copied; the mapping outlives the file), else copies in buffers of
  // device's default type. progress after each tensor copied or mapping
  // bound, with `done` (advanced here) and `total` bytes. Returns the
  // buffers, which must outlive every graph that reads the weights;
  // mapped_bytes grows by the bytes used in place.
  std::vector<std::unique_ptr<Buffer>> load_part_weights(const GgufFile& file, int part, Device& device, bool map,
                                                         const LoadProgress& progress, size_t& done, size_t total,
                                                         size_t& mapped_bytes) const;

  // What build_forward added: the logits f32 [n_vocab, n] ([n_vocab, 1] for
  // LogitRows::last), and where each segment of the graph begins in ctx (ctx.tensors() indices): segment 0
  // the embedding lookup, segment L + 1 layer L, segment n_layer + 1 the
  // output. segment_begin has n_layer + 2 entries; a segment ends where the
  // next begins (the last at ctx.size()). output_index: where the output
  // product (and the final soft-cap, when the family has one) begins.
  // part_nodes: nodes that run on part's device rather than their layer's,
  // ctx indices [begin, end): each expert slice (LoadOptions::expert_split)
  // and each tensor-parallel shard (ModelLayout::tensor_shares) of another
  // part.
  struct NodeRange {
    size_t begin = 0;
    size_t end = 0;
    int part = 0;
  };
  struct Forward {
    Tensor* logits = nullptr;
    std::vector<size_t> segment_begin;
    size_t output_index = 0;
    std::vector<NodeRange> part_nodes;
  };

  // The inputs of one forward pass of n tokens reading n_kv cache rows
  // (n_past + n <= n_kv <= n_ctx): token ids and positions i32 [n], the
  // causal mask f32 [n_kv, n], and when the model needs them the
  // sliding-window mask f32 [n_kv, n] and the rope frequency factors f32
  // [n_rot / 2]. Each is built once per graph and read by every layer.
  struct Inputs {
    Tensor* tokens = nullptr;
    Tensor* positions = nullptr;
    Tensor* kv_rows = nullptr;  // i32 [n, n_head_kv]: the positions again, per kv head (the cache rows written)
    Tensor* mask = nullptr;
    Tensor* mask_swa = nullptr;
    // i32 [n, n_head_kv]: the ring rows sliding layers write (p mod ring
    // rows), with a ring only; mask_swa then spans the ring's rows read.
    Tensor* kv_rows_swa = nullptr;
    Tensor* rope_factors = nullptr;
    // i32 [n_out]: the tokens whose logits a batch returns (new_inputs with
    // n_out > 0; build_forward then computes the output for those alone).
    Tensor* out_rows = nullptr;
  };
  // Creates them in ctx, flagged as graph inputs (out_rows when n_out > 0).
  Inputs new_inputs(Context& ctx, int64_t n, int64_t n_kv, int64_t n_out = 0) const;
  // Writes their values, after the tensors are bound to memory.
  void set_inputs(const Inputs& in, std::span<const int32_t> tokens, int64_t n_past) const;
  // The same for a batch over n_seq sequences (BatchToken): positions,
  // cache rows and a mask per token's sequence, and out_rows.
  void set_batch_inputs(const Inputs& in, std::span<const BatchToken> batch, int64_t n_seq) const;

  // Adds to g the forward pass for in.tokens (n of them) at positions
  // n_past .. n_past + n - 1. Writes the new keys and values into the caches
  // at rows `positions` and attends over cache rows [0, n_kv). The logits
  // are [n_vocab, n], or [n_vocab, 1] for LogitRows::last (the final norm
  // and output product then run for the last token alone), or with
  // in.out_rows [n_vocab, n_out] for the tokens it names (rows ignored but
  // for LogitRows::hidden). LogitRows::hidden: the normed hidden rows
  // [n_embd, n] (or [n_embd, n_out]) in place of the logits.
  Forward build_forward(Context& ctx, Graph& g, const Inputs& in, int64_t n_past,
                        LogitRows rows = LogitRows::all) const;

 private:
  // The attention half of layer il for the normalized input cur: whole, or
  // as the sum of its shards (their nodes recorded in f.part_nodes).
  Tensor* build_attention(Context& ctx, Graph& g, Forward& f, const LlamaLayer& l, int64_t il, Tensor* cur,
                          const Inputs& in) const;
  // An encoder's forward (LlamaParams::encoder): the hidden states of
  // every token (rows hidden, or out_rows) or the cache only (rows none).
  Forward build_encoder_forward(Context& ctx, Graph& g, const Inputs& in, int64_t n_past, LogitRows rows) const;
  // The output product of the normed rows x cut by vocabulary rows: each
  // part's rows (other parts' first, recorded in f.part_nodes), then
  // concatenated in vocabulary order on the output part.
  Tensor* build_output_slices(Context& ctx, Graph& g, Forward& f, Tensor* x) const;

  LlamaParams params_;
  int64_t n_ctx_ = 0;
  ModelLayout layout_;
  int n_parts_ = 1;
  std::vector<int> layer_part_;  // each layer's part
  Context ctx_;                  // owns weight and cache tensor metadata
  std::unique_ptr<detail::ModelWeights> weights_;  // the file's view of them (slices, derived weights)
  Tensor* tok_embd_ = nullptr;
  Tensor* output_norm_ = nullptr;
  Tensor* output_ = nullptr;  // token_embd when tied; nullptr for an encoder
  // An encoder's embeddings (LlamaParams::encoder): token types [n_embd,
  // n_token_types], positions [n_embd, n_ctx_train], and their LayerNorm.
  Tensor* type_embd_ = nullptr;
  Tensor* pos_embd_ = nullptr;
  Tensor* embd_norm_ = nullptr;
  Tensor* embd_norm_b_ = nullptr;
  std::vector<OutputSlice> output_slices_;  // output_split()
  int output_part_ = 0;
  std::vector<LlamaLayer> layers_;
  std::vector<std::vector<Tensor*>> part_weights_;
  // Rope frequency factors ([n_rot / 2]; empty when none): read from the
  // file (the one Phi-3 factor set this context length uses) or computed
  // from the llama3 keys; a graph input, so every device gets them.
  std::vector<float> rope_factors_;
  int64_t ring_rows_ = 0;
  // set_inputs' host copies, kept so that a token allocates nothing.
  mutable std::vector<int32_t> positions_scratch_;
  mutable std::vector<int32_t> kv_rows_scratch_;
  mutable std::vector<float> mask_scratch_;
  mutable std::vector<float> mask_swa_scratch_;
  mutable std::vector<int32_t> tokens_scratch_;
  mutable std::vector<int32_t> out_rows_scratch_;
};

// Throws Error(unsupported) unless LoadOptions::cache_type can hold p's
// heads (f16; q8_0 with a head size that is a multiple of 32).
void check_cache_type(const LlamaParams& p, DType cache_type);

// The nodes whose support on a device decides how the model's graphs are
// built, made in ctx for Device::supports_op: a layer's flash_attn (caches
// of cache_type, one position; ModelLayout::fused_attention), and the
// routed_rows of an expert split (a worker older than protocol 1.7 lacks
// it; ModelLayout::routes_rows).
Tensor* flash_attn_probe(Context& ctx, const LlamaParams& p, DType cache_type);
Tensor* routed_rows_probe(Context& ctx, const LlamaParams& p);

// Bytes of KV cache (keys and values of cache_type) that n_layers layers of
// a model with params p hold for n_ctx positions. Throws Error(invalid_input)
// if the size does not fit a size_t, Error(unsupported) for a cache type
// LoadOptions does not take or a head size it cannot store.
size_t kv_cache_bytes(const LlamaParams& p, int64_t n_layers, int64_t n_ctx, DType cache_type = DType::f16);
// The same for layers [first, last), sliding ones keeping ring_rows rows
// when ring_rows > 0 (sliding_ring_rows).
size_t kv_cache_bytes(const LlamaParams& p, int64_t first, int64_t last, int64_t n_ctx, DType cache_type,
                      int64_t ring_rows);

// mask[i * n_kv + j] = 0 if key j is visible to query i (j <= n_past + i,
// and with a sliding window > 0 also n_past + i - j < window), else
// -INFINITY. mask has n_kv * n floats.
void fill_causal_mask(std::span<float> mask, int64_t n_kv, int64_t n, int64_t n_past, int64_t window = 0);

// Index of the largest logit (the first one on ties).
int greedy(const float* logits, int vocab);

}  // namespace weft::model
