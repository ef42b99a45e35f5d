// The feed-forward half of a llama block, dense or mixture of experts
// (FACTS.md, "Llama-family files"), as LlamaModel::build_forward adds it.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "weft/core/context.h"
#include "weft/model/model.h"

namespace weft::model::detail {

// Adds to ctx the feed-forward output f32 [n_embd, n] of cur, the normalized
// input f32 [n_embd, n] (rms_norm(h) * ffn_norm; contiguous); the caller adds
// it to the residual. Dense layers: W_down·(act(W_gate·cur) ⊙ W_up·cur), act
// silu, gelu (tanh form) or gpt-oss's clamped SwiGLU by p.ffn_act, gate
// and up separate or fused. Mixture-of-experts layers (those with a router,
// l.ffn_gate_inp; a deepseek2 file's leading layers are dense): per token,
// the router's logits (plus its bias, gpt-oss) into scores by
// p.expert_gating (softmax over all experts, a sigmoid each, or the logits
// themselves for softmax_weight); the p.n_expert_used best (after the
// selection bias l.exp_probs_b and the group limit, when the model has
// them); their unbiased scores as weights (softmax_weight: softmax over
// those k; renormalized to sum to 1 when p.expert_weights_norm; times
// p.expert_weights_scale); the sum of the selected experts' gated outputs
// (each projection plus its expert's bias row when the layer has expert
// biases) weighted by those; plus the shared expert when the layer has one
// (gated by sigmoid when it has ffn_gate_inp_shexp). Uses only ops the CPU
// backend (and so the RPC worker, 1.9 for swiglu_oai) supports.
//
// With l.expert_slices (an expert split): each slice's weighted sum over the
// pairs routed to it (mul_mat_id with the slice's id_base), the parts added
// on the layer's device, e.home_part. Slices on other parts come first, so
// their devices start before the home part computes its own (e.overlap
// false: the home slice first); each slice's nodes are appended to
// e.slice_nodes, to run on its part's device. The routing is added to g
// first (g.expand), so that it is one run of the home device's nodes before
// the slices rather than interleaved with them (each switch of device is a
// split, and a remote split is a message). With e.routed_rows, each other
// part's slice reads routed_rows of the input, computed on the home part,
// and its sum is a packed [n_embd, n]: both are flagged kFlagSparseRows, so
// each device is sent only its tokens' rows and sends back only theirs.
// Group-limited selection (DeepSeek-V3): sel f32 [n_expert, n] (contiguous:
// each token's biased router scores) with the experts outside each token's
// p.n_group_used best groups set to -inf; experts in p.n_expert_groups
// equal groups of consecutive ids, a group scored by the sum of its two
// best (ties: the lower index first, as top_k). f32 [n_expert, n].
Tensor* limit_expert_groups(Context& ctx, const LlamaParams& p, Tensor* sel);

struct ExpertsBuild {
  int home_part = 0;
  bool overlap = true;
  bool routed_rows = false;
  std::vector<LlamaModel::NodeRange>* slice_nodes = nullptr;
};
Tensor* build_ffn(Context& ctx, Graph& g, const LlamaParams& p, const LlamaLayer& l, Tensor* cur,
                  const ExpertsBuild& e = {});

// Where a tensor-parallel layer's partials are added: the run's home part
// adds them all, or (others_meet) the partials of the run's other parts
// are first added on the first of them, and the home adds that one sum to
// its own: with peer links between the other parts, the home then reads
// one partial per sum instead of one per part (LlamaModel::shard_sum).
// The activations cross between parts as wire (f32, or q8_0:
// LoadOptions::tensor_partials).
struct ShardSum {
  int home = 0;
  bool others_meet = false;
  DType wire = DType::f32;
};

// The sum of a tensor-parallel layer's partials, partial(shard, x) for
// each shard that has one (nullptr: none), f32 [n_embd, n], where x is
// input as that shard's part sees it. The input is added to g first (one
// run of the home part's nodes); then the other parts' shards, each whole
// and recorded in part_nodes to run on its part's device, so that they
// start before the home part computes its own shard; then, with
// where.others_meet, their sum on the first of them; then the home shard;
// then the sums, on the home part. The additions go in shard order, other
// parts first, however they are placed.
Tensor* sum_shards(Context& ctx, Graph& g, std::span<const LlamaLayer::Shard> shards, const ShardSum& where,
                   Tensor* input, std::vector<LlamaModel::NodeRange>& part_nodes,
                   const std::function<Tensor*(const LlamaLayer::Shard&, Tensor*)>& partial);
// A dense layer's feed-forward cut by columns (LlamaLayer::Shard): each
// shard's W_down columns · (act(gate rows · cur) ⊙ up rows · cur), summed
// as sum_shards does.
Tensor* build_ffn_shards(Context& ctx, Graph& g, const LlamaParams& p, const LlamaLayer& l, Tensor* cur,
                         const ShardSum& where, std::vector<LlamaModel::NodeRange>& part_nodes);

}  // namespace weft::model::detail
