// The executor: how a model runs over devices. It owns the model's
// definition (weft/model/model.h) bound to memory on the devices of a
// placement, a backend per device, the Scheduler when there are several,
// the graph kept for reuse, the batch slots and the pipelining of prompts
// and steps across stages. The Session (weft/runtime/session.h) owns one;
// tests and programs that bring their own devices use it directly:
//
//   auto file = weft::GgufFile::open("model.gguf");
//   auto cpu = weft::make_cpu_device();
//   weft::Executor m(*file, *cpu, /*n_ctx=*/512);
//   std::vector<float> logits = m.eval(prompt, 0);
//
//   std::vector<weft::LayerPlacement> pl{{cpu.get(), 0, 4}, {remote.get(), 4, 8}};
//   weft::Executor split(*file, pl, 512);   // layers 0-3 here, 4-7 on a worker
//
// docs/architecture.md ("The executor") draws the layers. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "weft/backend/backend.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"

namespace weft {

namespace detail {
class ExecutorState;  // src/runtime/executor_state.h
}

// Layers [first, last) of a model live on device (their weights and KV
// cache): a pipeline by layers, one entry per device in layer order.
struct LayerPlacement {
  Device* device = nullptr;
  int64_t first = 0;
  int64_t last = 0;
};

// Which device computes which part of each layer. A part is a device and a
// range of layers, and within them a range of attention heads (with the
// matching key/value heads and feed-forward columns): "layers 0-9 on A,
// 10-31 on B" is two parts of all heads; "heads 0-15 of every layer on A,
// 16-31 on B" is two parts over the same layers. Parts over the same layers
// with head ranges must tile [0, n_head) in order; runs of layers must
// follow each other from 0 to n_layer without gaps.
struct PlacementPart {
  Device* device = nullptr;
  std::string label;       // for descriptions: "host", "10.0.0.2:50052" (empty: the device's name)
  int64_t first_layer = 0;
  int64_t last_layer = 0;
  int64_t first_head = 0;  // heads [first_head, last_head); 0, 0: every head
  int64_t last_head = 0;
  // With heads cut: its share of the run's feed-forward columns, weighed
  // against the run's other parts' (0 in every part of the run: in
  // proportion to the heads). A part after the run's first may then hold
  // no heads at all ([h, h), h > 0): it computes feed-forward columns only,
  // as devices beyond the key/value head count do.
  double ffn_share = 0;
  bool all_heads() const { return first_head == 0 && last_head == 0; }
};

struct Placement {
  std::vector<PlacementPart> parts;

  // A pipeline by layers: one part per entry, all heads.
  static Placement by_layers(std::span<const LayerPlacement> layers);
  // Whether some layers are cut by heads (tensor parallelism).
  bool splits_heads() const;
  // The layer boundaries of a pipeline by layers (parts + 1, from 0).
  std::vector<int64_t> layer_bounds() const;
  // Throws Error(invalid_input) naming the first part that does not fit a
  // model of n_layer layers and n_head heads: no device, an empty or
  // reversed range, a gap or an overlap between runs of layers, head ranges
  // that do not tile [0, n_head) or do not keep whole key/value heads
  // (n_head_kv groups).
  void check(int64_t n_layer, int64_t n_head, int64_t n_head_kv) const;
  // One line per run of layers: "layers 0-9 on host", "layers 10-31: heads
  // 0-15 on A, 16-31 on B"; "layers 4-3" never (an empty part is "no
  // layers on C").
  std::string describe() const;
};

// Each part's share of the runs a placement cuts by heads
// (model::ModelLayout::tensor_shares): its key/value heads from its query
// heads, and feed-forward columns in proportion to them on whole blocks of
// the file's down projections. Empty when no run is cut by heads.
std::vector<model::TensorShare> tensor_shares(const GgufFile& file, const Placement& placement);

// Query head boundaries for n_parts parts sharing n_head_kv key/value heads
// in proportion to weights, each part at least one (the rest cut as
// layer_bounds cuts layers):
// n_parts + 1 of them from 0 to n_head. With more parts than key/value
// heads, the first n_head_kv parts get one each and the others none (they
// take feed-forward columns only: PlacementPart::ffn_share). Throws
// Error(invalid_input) when the weights are not valid (layer_bounds' rules).
std::vector<int64_t> head_bounds(const std::vector<double>& weights, int64_t n_head, int64_t n_head_kv);

class Executor {
 public:
  // The whole model on one device.
  Executor(const GgufFile& file, Device& device, int64_t n_ctx, const model::LoadProgress& progress = {},
           const model::LoadOptions& options = {});
  // Split by layers (pipeline): every node of layer L runs on a backend of
  // L's part's device, the embedding lookup on the first, the output on
  // the last (a tied output with the embedding); the Scheduler copies
  // activations between devices. The token embedding lives on the first
  // device, the output norm and a separate output matrix on the last.
  // A run of layers cut by heads (tensor parallelism) is held by its first
  // part (norms, biases, the residual and the sums of the partials) and
  // shared by all its parts (model::LlamaLayer::Shard): each computes its
  // heads' attention into its own slice of the KV cache and its columns of
  // the feed-forward. Throws Error(invalid_input) for a bad placement or a
  // cut the weights' blocks do not allow, Error(unsupported) for a model
  // whose attention cannot be cut (multi-head latent attention) or an
  // expert split beside heads.
  Executor(const GgufFile& file, std::span<const LayerPlacement> placement, int64_t n_ctx,
           const model::LoadProgress& progress = {}, const model::LoadOptions& options = {});
  Executor(const GgufFile& file, const Placement& placement, int64_t n_ctx, const model::LoadProgress& progress = {},
           const model::LoadOptions& options = {});
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  ~Executor();

  const model::LlamaModel& model() const;
  const model::LlamaParams& params() const { return model().params(); }
  const Placement& placement() const;
  int64_t n_ctx() const { return model().n_ctx(); }
  int64_t sliding_ring_rows() const { return model().sliding_ring_rows(); }
  bool fused_attention() const { return model().fused_attention(); }
  DType cache_type() const { return model().cache_type(); }
  // Weight bytes used in place from the file's mapping (LoadOptions).
  size_t mapped_weight_bytes() const;

  // Runs tokens at positions n_past.. and returns the logits of every token,
  // token-major (n * n_vocab floats). Throws invalid_input when the tokens
  // do not fit the context or an id is outside the vocabulary. The graph of
  // the last call is kept and reused while calls have its shape (the same
  // token count, a KV length in the same 32-row bucket): only its inputs
  // change, and its allocation (or the scheduler's plan) stays.
  // With LogitRows::last, the last token's logits only (n_vocab floats),
  // and the output product runs for that token alone; with
  // LogitRows::hidden, every token's hidden state after the output norm
  // (n * n_embd floats, no output product: embeddings).
  std::vector<float> eval(std::span<const int32_t> tokens, int64_t n_past,
                          model::LogitRows rows = model::LogitRows::all);
  // The same into logits (resized; no allocation once it has the capacity).
  void eval(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits,
            model::LogitRows rows = model::LogitRows::all);

  // One step over several sequences at once (continuous batching: each
  // sequence has its own part of the cache, model::BatchToken): evaluates
  // batch (any mix of sequences and positions; a sequence's tokens in
  // position order) and writes the logits of the tokens marked `logits`, in
  // batch order, into logits (n_vocab floats each). Throws
  // Error(invalid_input) when n_seq does not divide n_ctx, a sequence or
  // position is out of range, an id is outside the vocabulary, or no token
  // asks for logits. Reuses its graph as eval() does (same token count,
  // logit count and 32-row bucket of the highest cache row).
  // LogitRows::hidden: those tokens' hidden states after the output norm
  // (n_embd floats each) instead of their logits; any other value: logits.
  void eval_batch(std::span<const model::BatchToken> batch, int64_t n_seq, std::vector<float>& logits,
                  model::LogitRows rows = model::LogitRows::all);

  // Steps of eval_batch pipelined across the devices: up to batch_slots()
  // steps in flight at once, each in a slot of its own (a graph and a
  // memory set), so that while device k + 1 works on one slot's step,
  // device k works on another's. submit_batch puts a step (checked as
  // eval_batch checks it) in flight in slot without waiting for it;
  // finish_batch(slot, logits) waits for it and writes its logits, as
  // eval_batch would. Slots take turns in the order they were submitted,
  // and a slot's next submit follows its finish: Error(invalid_input)
  // otherwise, or for a slot outside [0, batch_slots()). Each step's
  // sequences write only their own cache rows, so steps of different
  // sequences may be in flight together. On one device a step runs at
  // submit and there is one slot. eval and eval_batch refuse to run while
  // a step is in flight (their graph would take a slot's memory set).
  int batch_slots() const;
  void submit_batch(int slot, std::span<const model::BatchToken> batch, int64_t n_seq);
  void finish_batch(int slot, std::vector<float>& logits);
  // Sizes every slot's memory set once for steps of up to n_tokens tokens
  // and n_out logit rows over the whole context, so that no later step
  // grows a buffer (a worker call, which would wait for the steps in flight
  // and drain the pipeline). Nothing on one device; no step may be in flight.
  void reserve_batch(int64_t n_tokens, int64_t n_out);

 private:
  friend struct ExecutorTestAccess;  // the white-box tests' switches (not installed)
  std::unique_ptr<detail::ExecutorState> state_;
};

}  // namespace weft
