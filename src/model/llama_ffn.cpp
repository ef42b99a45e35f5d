// build_ffn: the gated feed-forward (SwiGLU or GELU-gated, separate or fused
// gate and up), and its mixture-of-experts forms with an optional shared
// expert.
#include "model/llama_ffn.h"

#include "weft/core/ops.h"

namespace weft::model::detail {
namespace {

// act(gate) * up, elementwise.
Tensor* gated(Context& ctx, const LlamaParams& p, Tensor* gate, Tensor* up) {
  if (p.ffn_act == FfnActivation::gelu_tanh) return ops::mul(ctx, ops::gelu(ctx, gate), up);
  return ops::swiglu(ctx, gate, up);
}

Tensor* dense_ffn(Context& ctx, const LlamaParams& p, const LlamaLayer& l, Tensor* cur) {
  Tensor *gate, *up;
  if (l.w_gate) {
    gate = ops::mul_mat(ctx, l.w_gate, cur);
    up = ops::mul_mat(ctx, l.w_up, cur);
  } else {  // Phi-3: one product, the gate's rows first
    Tensor* both = ops::mul_mat(ctx, l.w_up, cur);  // [2 n_ff, n]
    const int64_t n = cur->ne[1];
    gate = ops::view_2d(ctx, both, p.n_ff, n, both->nb[1], 0);
    up = ops::view_2d(ctx, both, p.n_ff, n, both->nb[1], static_cast<size_t>(p.n_ff) * sizeof(float));
  }
  return ops::mul_mat(ctx, l.w_down, gated(ctx, p, gate, up));
}

// qwen2moe's shared expert: a dense SwiGLU every token goes through, scaled
// per token by sigmoid(ffn_gate_inp_shexp · x).
Tensor* shared_expert(Context& ctx, const LlamaParams& p, const LlamaLayer& l, Tensor* cur) {
  Tensor* ff = gated(ctx, p, ops::mul_mat(ctx, l.ffn_gate_shexp, cur), ops::mul_mat(ctx, l.ffn_up_shexp, cur));
  Tensor* out = ops::mul_mat(ctx, l.ffn_down_shexp, ff);                               // [n_embd, n]
  Tensor* gate = ops::sigmoid(ctx, ops::mul_mat(ctx, l.ffn_gate_inp_shexp, cur));  // [1, n]
  return ops::mul(ctx, out, gate);
}

// Routing: softmax over all experts, top k, the k probabilities (summing to
// 1 when p.expert_weights_norm), weighted sum of the k experts' outputs
// (mul_mat_id runs each token through its own k experts).
Tensor* moe_ffn(Context& ctx, const LlamaParams& p, const LlamaLayer& l, Tensor* cur) {
  const int64_t n = cur->ne[1], n_expert = p.n_expert, k = p.n_expert_used;
  Tensor* probs = ops::soft_max(ctx, ops::mul_mat(ctx, l.ffn_gate_inp, cur), nullptr, 1.0f);  // [n_expert, n]
  Tensor* selected = ops::top_k(ctx, probs, static_cast<int>(k));                             // i32 [k, n]
  // weights[0, i, t] = probs[selected[i, t], t]: probs viewed as one-value rows.
  Tensor* weights = ops::get_rows(ctx, ops::reshape(ctx, probs, {1, n_expert, n}), selected);  // [1, k, n]
  weights = ops::reshape(ctx, weights, {k, n});
  if (p.expert_weights_norm) weights = ops::div(ctx, weights, ops::sum_rows(ctx, weights));

  Tensor* x = ops::reshape(ctx, cur, {p.n_embd, 1, n});               // one input row per token, shared by its experts
  Tensor* gate = ops::mul_mat_id(ctx, l.ffn_gate_exps, x, selected);  // [n_ff_expert, k, n]
  Tensor* up = ops::mul_mat_id(ctx, l.ffn_up_exps, x, selected);      // [n_ff_expert, k, n]
  Tensor* out = ops::mul_mat_id(ctx, l.ffn_down_exps, gated(ctx, p, gate, up), selected);  // [n_embd, k, n]
  out = ops::mul(ctx, out, ops::reshape(ctx, weights, {1, k, n}));
  // Sum over the k experts: rows of the transposed view [k, n_embd, n].
  out = ops::sum_rows(ctx, ops::transpose(ctx, out));  // [1, n_embd, n]
  out = ops::reshape(ctx, out, {p.n_embd, n});
  if (l.ffn_gate_inp_shexp) out = ops::add(ctx, out, shared_expert(ctx, p, l, cur));
  return out;
}

}  // namespace

Tensor* build_ffn(Context& ctx, const LlamaParams& p, const LlamaLayer& l, Tensor* cur) {
  return p.n_expert > 0 ? moe_ffn(ctx, p, l, cur) : dense_ffn(ctx, p, l, cur);
}

}  // namespace weft::model::detail
