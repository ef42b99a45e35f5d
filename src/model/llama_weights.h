// The weights a llama-family model reads from its GGUF file, described (not
// loaded) and grouped by the part of a split model that holds them. Shared
// by LlamaModel's constructors and LlamaModel::plan so the plan checks and
// counts exactly what loading will.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "weft/core/context.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"

namespace weft::model::detail {

struct ModelWeights {
  Tensor* tok_embd = nullptr;
  Tensor* output_norm = nullptr;
  Tensor* output = nullptr;  // == tok_embd when the file ties them; nullptr for an encoder
  // An encoder's (bert) embedding tensors, else nullptr.
  Tensor* type_embd = nullptr;     // token_types.weight [n_embd, n_token_types]
  Tensor* pos_embd = nullptr;      // position_embd.weight [n_embd, n_ctx_train]
  Tensor* embd_norm = nullptr;     // token_embd_norm.weight [n_embd]
  Tensor* embd_norm_b = nullptr;   // token_embd_norm.bias [n_embd]
  std::vector<LlamaLayer> layers;  // without KV caches
  // Where each expert slice's bytes start within its file tensor (the
  // tensor of the same name); any other weight is a file tensor whole.
  std::unordered_map<const Tensor*, size_t> slice_offset;
  // Weights made at load from a file tensor of another layout: an MLA
  // layer's attn_k_b (transposed per head) and attn_v_b, f32, cut from the
  // attn_kv_b an older converter writes. Their bytes are computed on first
  // use (data()) and kept here.
  // Also a tensor-parallel shard's columns of wo or ffn_down (rows of a
  // block type cut at block boundaries), gathered from every row.
  struct Derived {
    std::string source;         // the file tensor's name
    bool key = false;           // attn_k_b (else attn_v_b)
    int64_t first_column = -1;  // >= 0: columns [first_column, + t->ne[0]) of source's rows
  };
  std::unordered_map<const Tensor*, Derived> derived;
  mutable std::unordered_map<const Tensor*, std::vector<uint8_t>> derived_bytes;
  // A tensor-parallel last run's output product, cut by vocabulary rows
  // (split_tensor_parallel). The output norm, the products' concatenation
  // and any final soft-cap run on output_part, the run's home. Empty: the
  // output is whole, on the last part (the first when tied).
  std::vector<OutputSlice> output_slices;
  int output_part = 0;

  // The bytes weight t is loaded from (t->nbytes() of them): the file's, or
  // a derived weight's.
  const uint8_t* data(const GgufFile& file, const Tensor& t) const;
  bool is_derived(const Tensor* t) const { return derived.count(t) != 0; }
  // Frees a derived weight's bytes once they are copied to its device.
  void release(const Tensor* t) const { derived_bytes.erase(t); }
};

// The metadata of file tensor `name` in ctx (its dtype, flagged a weight),
// checked to have shape ne; nullptr when optional and absent. Throws
// Error(invalid_input) naming the file and the tensor, missing or of
// another shape.
Tensor* describe_weight(Context& ctx, const GgufFile& file, const std::string& name, std::initializer_list<int64_t> ne,
                        bool optional = false);

// A multi-head latent attention layer's weights (LlamaParams::mla()), with
// its attn_k_b / attn_v_b recorded in w.derived when the file has only
// attn_kv_b. Throws as describe_weight.
void describe_mla(Context& ctx, const GgufFile& file, const LlamaParams& p, const std::string& b, LlamaLayer& l,
                  ModelWeights& w);
// The bytes of a derived attn_k_b (key) or attn_v_b t, f32, from file
// tensor source (attn_kv_b [kv_lora_rank, n_head * (nope + v)]).
std::vector<uint8_t> cut_kv_b(const GgufFile& file, const std::string& source, bool key, const Tensor& t);

// Creates in ctx the metadata of every weight the model reads (named, flagged
// as weights, of the file's dtypes): per layer the dense feed-forward
// matrices, or the router and stacked experts when p.n_expert > 0. Throws Error(invalid_input) naming the
// file and a missing tensor, or one whose shape is not what p implies.
ModelWeights describe_weights(const GgufFile& file, const LlamaParams& p, Context& ctx);
// The same for an encoder (LlamaParams::encoder, bert_model.cpp): its
// embeddings and their norm, per layer q/k/v/output with biases, the two
// post-residual LayerNorms and the ungated feed-forward with biases; no
// output norm or matrix.
ModelWeights describe_encoder_weights(const GgufFile& file, const LlamaParams& p, Context& ctx);

// The rope frequency factors a model with a context of n_ctx uses (empty
// when none): rope_freqs.weight, or for llama3 scaling without it the
// factors computed from the keys; for Phi-3 the long factors when n_ctx
// exceeds rope.scaling.original_context_length, else the short ones.
// Throws Error(invalid_input) naming a missing tensor or one that is not f32
// [n_rot / 2] of finite positive values.
std::vector<float> rope_factors(const GgufFile& file, const LlamaParams& p, int64_t n_ctx);

// Llama 3.1's factors from rope.scaling.factor, original_context_length and
// the low/high frequency factors.
std::vector<float> llama3_rope_factors(const LlamaParams& p);
// YaRN's frequency divisors from rope_base, n_rot, the factor, the original
// context and the beta/ext keys.
std::vector<float> yarn_rope_factors(const LlamaParams& p);

// Cuts every layer's stacked experts by part (LoadOptions::expert_split):
// counts has one entry per part (n_parts of them), each >= 0, summing to
// p.n_expert; each part with a nonzero count gets a slice
// (LlamaLayer::ExpertSlice) described in ctx, and the layer's whole
// ffn_*_exps go. Throws Error(invalid_input) naming what does not fit (the
// number of counts, a dense model, a count, the sum).
void split_experts(ModelWeights& w, const LlamaParams& p, std::span<const int64_t> counts, size_t n_parts,
                   Context& ctx);

// Cuts the layers of tensor-parallel runs into shards (LlamaLayer::Shard)
// by shares (ModelLayout::tensor_shares, one per part; layer_part gives
// each layer's home part): row slices of wq/wk/wv (or of Phi-3's fused
// wqkv), their biases, attn_sinks, w_gate/w_up (or Phi-3's fused w_up) as
// runs of the file's bytes; wo's and w_down's columns gathered at load
// (Derived). When the last layer's run is cut, the output matrix is cut
// too, by vocabulary rows in proportion to the key/value heads
// (ModelWeights::output_slices). Throws Error(invalid_input) naming what
// does not fit: shares that do not tile the heads or columns, an MLA
// model, a column boundary off the weight's blocks.
void split_tensor_parallel(ModelWeights& w, const LlamaParams& p, std::span<const int> layer_part,
                           std::span<const TensorShare> shares, Context& ctx);
// The bytes of a derived column cut t of file tensor source.
std::vector<uint8_t> cut_columns(const GgufFile& file, const std::string& source, int64_t first, const Tensor& t);

// Each layer's part from placement-style ranges: parts + 1 boundaries, from
// 0, non-decreasing, ending at n_layer. Throws Error(invalid_input) naming
// the first range that does not continue the previous one.
std::vector<int> layer_parts(std::span<const int64_t> bounds, int64_t n_layer);

// The tensors each part holds: the embedding in the first, the output norm
// and a separate output matrix in the last (or the norm on the output's
// home and each output slice on its part), each layer's weights in its part.
std::vector<std::vector<Tensor*>> weights_by_part(const ModelWeights& w, std::span<const int> layer_part, int n_parts);


// Binds a placement's weights to the file's mapped bytes in place
// (LoadOptions::map_weights) and returns the read-only buffers holding them,
// one per file part they lie in (one for a single file), after asking the
// kernel to read them ahead (MADV_WILLNEED). Empty (bind nothing) when device
// is not the host CPU, or a tensor's bytes are not 32-byte aligned in the
// file; the caller then copies.
std::vector<std::unique_ptr<Buffer>> map_weights(const GgufFile& file, const ModelWeights& w, Device& device,
                                                 std::span<Tensor* const> tensors);


// Throws Error(invalid_input) unless 0 < n_ctx <= 2^24.
void check_n_ctx(int64_t n_ctx);

}  // namespace weft::model::detail
