// The feed-forward half of a llama block, dense or mixture of experts
// (FACTS.md, "Llama-family files"), as LlamaModel::build_forward adds it.
#pragma once

#include "weft/core/context.h"
#include "weft/model/model.h"

namespace weft::model::detail {

// Adds to ctx the feed-forward output f32 [n_embd, n] of cur, the normalized
// input f32 [n_embd, n] (rms_norm(h) * ffn_norm; contiguous); the caller adds
// it to the residual. Dense layers: W_down·(act(W_gate·cur) ⊙ W_up·cur), act
// silu or gelu (tanh form) by p.ffn_act, gate and up separate or fused.
// Mixture-of-experts layers (p.n_expert > 0): per token, softmax of the
// router's logits over all experts, the p.n_expert_used most probable
// experts, their probabilities (renormalized to sum to 1 when
// p.expert_weights_norm), the sum of their gated outputs weighted by those,
// plus the shared expert when the layer has one. Uses only ops the CPU
// backend (and so the RPC worker) supports.
Tensor* build_ffn(Context& ctx, const LlamaParams& p, const LlamaLayer& l, Tensor* cur);

}  // namespace weft::model::detail
