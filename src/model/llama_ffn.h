// The feed-forward half of a llama block, dense or mixture of experts
// (FACTS.md, "Llama-family files"), as LlamaModel::build_forward adds it.
#pragma once

#include <vector>

#include "weft/core/context.h"
#include "weft/model/model.h"

namespace weft::model::detail {

// Adds to ctx the feed-forward output f32 [n_embd, n] of cur, the normalized
// input f32 [n_embd, n] (rms_norm(h) * ffn_norm; contiguous); the caller adds
// it to the residual. Dense layers: W_down·(act(W_gate·cur) ⊙ W_up·cur), act
// silu, gelu (tanh form) or gpt-oss's clamped SwiGLU by p.ffn_act, gate and
// up separate or fused. Mixture-of-experts layers (p.n_expert > 0): per
// token, the router's logits (plus its bias, gpt-oss); softmax over all
// experts and the p.n_expert_used most probable, or (p.expert_gating
// softmax_weight) the top logits and softmax over those alone; the weights
// renormalized to sum to 1 when p.expert_weights_norm; the sum of the
// selected experts' gated outputs (each projection plus its expert's bias
// row when the layer has expert biases) weighted by those, plus the shared
// expert when the layer has one. Uses only ops the CPU backend (and so the
// RPC worker, 1.9 for swiglu_oai) supports.
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
struct ExpertsBuild {
  int home_part = 0;
  bool overlap = true;
  bool routed_rows = false;
  std::vector<LlamaModel::NodeRange>* slice_nodes = nullptr;
};
Tensor* build_ffn(Context& ctx, Graph& g, const LlamaParams& p, const LlamaLayer& l, Tensor* cur,
                  const ExpertsBuild& e = {});

}  // namespace weft::model::detail
