// Llama-family models (llama, qwen2; dense or Mixtral-style mixture of
// experts) read from GGUF files, run as one weft graph per call on one device
// (FACTS.md, "Llama-family files").
//
//   auto file = weft::GgufFile::open("model.gguf");
//   auto dev = weft::make_cpu_device();
//   weft::model::LlamaModel m(*file, *dev, /*n_ctx=*/512);   // file may close now
//   std::vector<float> logits = m.eval(prompt, 0);           // [n][vocab]
//   int next = weft::model::greedy(&logits[(prompt.size() - 1) * vocab], vocab);
//   logits = m.eval({&next, 1}, prompt.size());              // uses the KV cache
//
// The model owns its weights buffers, its KV cache buffers and what runs
// them: one backend per device, and a Scheduler when split over several.
// eval() and build_forward() write the cache at the given positions. Not
// thread-safe. weft::Session (weft/runtime/session.h) adds device specs,
// placement and generation on top.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "weft/backend/alloc.h"
#include "weft/backend/backend.h"
#include "weft/backend/sched.h"
#include "weft/core/context.h"
#include "weft/core/graph.h"
#include "weft/gguf/gguf.h"

namespace weft::model {

enum class Arch { llama, qwen2 };

struct LlamaParams {
  Arch arch = Arch::llama;
  std::string arch_name;      // general.architecture
  int64_t n_vocab = 0;        // rows of token_embd
  int64_t n_embd = 0;         // embedding_length
  int64_t n_layer = 0;        // block_count
  int64_t n_ff = 0;           // feed_forward_length
  int64_t n_head = 0;         // attention.head_count
  int64_t n_head_kv = 0;      // attention.head_count_kv (default n_head)
  int64_t head_dim = 0;       // n_embd / n_head
  int64_t n_rot = 0;          // rope.dimension_count (default head_dim)
  int64_t n_ctx_train = 0;    // context_length
  float rms_eps = 0;          // attention.layer_norm_rms_epsilon
  float rope_base = 10000.f;  // rope.freq_base
  int64_t n_expert = 0;       // expert_count; 0: dense feed-forward layers
  int64_t n_expert_used = 0;  // expert_used_count: experts per token, in (0, n_expert]

  // Throws Error(invalid_input) naming a missing or impossible key.
  static LlamaParams from_gguf(const GgufFile& file);
};

// Weights of one block; biases are nullptr when the file has none. A dense
// model has w_gate, w_up and w_down; a mixture-of-experts one (n_expert > 0)
// has the router and the stacked experts instead, and those three are null.
struct LlamaLayer {
  Tensor* attn_norm = nullptr;
  Tensor* wq = nullptr;
  Tensor* wk = nullptr;
  Tensor* wv = nullptr;
  Tensor* wo = nullptr;
  Tensor* bq = nullptr;
  Tensor* bk = nullptr;
  Tensor* bv = nullptr;
  Tensor* ffn_norm = nullptr;
  Tensor* w_gate = nullptr;
  Tensor* w_up = nullptr;
  Tensor* w_down = nullptr;
  Tensor* ffn_gate_inp = nullptr;   // router [n_embd, n_expert]
  Tensor* ffn_gate_exps = nullptr;  // [n_embd, n_ff, n_expert]
  Tensor* ffn_up_exps = nullptr;    // [n_embd, n_ff, n_expert]
  Tensor* ffn_down_exps = nullptr;  // [n_ff, n_embd, n_expert]
  Tensor* k_cache = nullptr;        // f16 [head_dim * n_head_kv, n_ctx]
  Tensor* v_cache = nullptr;        // f16 [head_dim * n_head_kv, n_ctx]
};

// Layers [first, last) of a split model live on device (their weights and
// KV cache). See LlamaModel's placement constructor.
struct LayerPlacement {
  Device* device = nullptr;
  int64_t first = 0;
  int64_t last = 0;
};

// What one part of a split model holds (see LlamaModel::plan).
struct PartPlan {
  int64_t first_layer = 0;
  int64_t last_layer = 0;
  size_t weight_bytes = 0;
  size_t kv_cache_bytes = 0;
};

// Called while a model's weights are copied to their devices, after each
// tensor: bytes copied so far and the total (the same for every call).
using LoadProgress = std::function<void(size_t done, size_t total)>;

class LlamaModel {
 public:
  // Copies the model's tensors from file into one buffer of
  // device.default_buffer_type(), allocates a zeroed KV cache of n_ctx
  // positions in a second one, and makes a backend of device to run it. Throws Error(invalid_input) naming a missing
  // tensor or one of the wrong shape. device must outlive the model.
  LlamaModel(const GgufFile& file, Device& device, int64_t n_ctx, const LoadProgress& progress = {});
  // A model split across devices (pipeline by layers):
  //
  //   std::vector<LayerPlacement> pl{{cpu.get(), 0, 4}, {remote.get(), 4, 8}};
  //   LlamaModel m(*file, pl, 512);
  //   logits = m.eval(prompt, 0);
  //
  // Every node of layer L runs on a backend of L's placement's device, the
  // embedding lookup on the first, the output on the last; the model's
  // Scheduler copies activations between devices. placement covers layers 0..n_layer in order without gaps (a range may be
  // empty). The token embedding lives on the first device, the output norm
  // and a separate output matrix on the last (a tied output stays with the
  // embedding). Throws Error(invalid_input) for a bad placement.
  LlamaModel(const GgufFile& file, std::span<const LayerPlacement> placement, int64_t n_ctx,
             const LoadProgress& progress = {});
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;
  ~LlamaModel();

  // What each part of a split by layer boundaries bounds (parts + 1 of them,
  // from 0 to n_layer) would hold with a KV cache of n_ctx positions, after
  // the same checks of the file's tensors as the constructors make (and the
  // same errors), without allocating or reading any weight.
  static std::vector<PartPlan> plan(const GgufFile& file, std::span<const int64_t> bounds, int64_t n_ctx);

  const LlamaParams& params() const { return params_; }
  int64_t n_ctx() const { return n_ctx_; }
  const LlamaLayer& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }

  // What build_forward added: the logits f32 [n_vocab, n], and where each
  // segment of the graph begins in ctx (ctx.tensors() indices): segment 0
  // the embedding lookup, segment L + 1 layer L, segment n_layer + 1 the
  // output. segment_begin has n_layer + 2 entries; a segment ends where the
  // next begins (the last at ctx.size()).
  struct Forward {
    Tensor* logits = nullptr;
    std::vector<size_t> segment_begin;
  };

  // Adds to g the forward pass for n = tokens->ne[0] tokens at positions
  // n_past .. n_past + n - 1: tokens and positions are i32 [n], mask is f32
  // [n_kv, n] with n_past + n <= n_kv <= n_ctx (fill it with
  // fill_causal_mask). Writes the new keys and values into the caches at
  // rows `positions` and attends over cache rows [0, n_kv).
  Forward build_forward(Context& ctx, Graph& g, Tensor* tokens, Tensor* positions, Tensor* mask, int64_t n_past);

  // Runs tokens at positions n_past.. and returns the logits of every token,
  // token-major (n * n_vocab floats). Throws invalid_input when the tokens
  // do not fit the context or an id is outside the vocabulary.
  std::vector<float> eval(std::span<const int32_t> tokens, int64_t n_past);

 private:
  void init(const GgufFile& file, std::span<const LayerPlacement> placement, const LoadProgress& progress);
  void check_tokens(std::span<const int32_t> tokens, int64_t n_past) const;

  LlamaParams params_;
  Device& device_;
  int64_t n_ctx_ = 0;
  Context weights_ctx_;  // owns weight and cache tensor metadata
  Tensor* tok_embd_ = nullptr;
  Tensor* output_norm_ = nullptr;
  Tensor* output_ = nullptr;  // token_embd when tied
  std::vector<LlamaLayer> layers_;
  // One weights and one cache buffer per placement (none for an empty one),
  // and the placement index of each layer.
  std::vector<std::unique_ptr<Buffer>> bufs_;
  std::vector<int> layer_part_;
  int n_parts_ = 1;
  // What runs the graphs: one backend per placement; on one device a graph
  // allocator for compute memory (reused across evals), on several the
  // Scheduler (declared after the backends it uses, so destroyed first).
  std::vector<std::unique_ptr<Backend>> backends_;
  std::unique_ptr<GraphAllocator> galloc_;
  std::unique_ptr<Scheduler> sched_;
};

// Bytes of KV cache (keys and values, f16) that n_layers layers of a model
// with params p hold for n_ctx positions. Throws Error(invalid_input) if the
// size does not fit a size_t.
size_t kv_cache_bytes(const LlamaParams& p, int64_t n_layers, int64_t n_ctx);

// mask[i * n_kv + j] = 0 if key j is visible to query i (j <= n_past + i),
// else -INFINITY. mask has n_kv * n floats.
void fill_causal_mask(std::span<float> mask, int64_t n_kv, int64_t n, int64_t n_past);

// Index of the largest logit (the first one on ties).
int greedy(const float* logits, int vocab);

}  // namespace weft::model
