// build_ffn: the dense SwiGLU feed-forward and its mixture-of-experts form.
#include "model/llama_ffn.h"

#include "weft/core/ops.h"

namespace weft::model::detail {
namespace {

Tensor* dense_ffn(Context& ctx, const LlamaLayer& l, Tensor* cur) {
  Tensor* ff = ops::swiglu(ctx, ops::mul_mat(ctx, l.w_gate, cur), ops::mul_mat(ctx, l.w_up, cur));
  return ops::mul_mat(ctx, l.w_down, ff);
}

// Mixtral routing: softmax over all experts, top k, renormalized weights,
// weighted sum of the k experts' SwiGLU outputs (mul_mat_id runs each token
// through its own k experts).
Tensor* moe_ffn(Context& ctx, const LlamaParams& p, const LlamaLayer& l, Tensor* cur) {
  const int64_t n = cur->ne[1], n_expert = p.n_expert, k = p.n_expert_used;
  Tensor* probs = ops::soft_max(ctx, ops::mul_mat(ctx, l.ffn_gate_inp, cur), nullptr, 1.0f);  // [n_expert, n]
  Tensor* selected = ops::top_k(ctx, probs, static_cast<int>(k));                             // i32 [k, n]
  // weights[0, i, t] = probs[selected[i, t], t]: probs viewed as one-value rows.
  Tensor* weights = ops::get_rows(ctx, ops::reshape(ctx, probs, {1, n_expert, n}), selected);  // [1, k, n]
  weights = ops::reshape(ctx, weights, {k, n});
  weights = ops::div(ctx, weights, ops::sum_rows(ctx, weights));  // each token's k weights sum to 1

  Tensor* x = ops::reshape(ctx, cur, {p.n_embd, 1, n});               // one input row per token, shared by its experts
  Tensor* gate = ops::mul_mat_id(ctx, l.ffn_gate_exps, x, selected);  // [n_ff, k, n]
  Tensor* up = ops::mul_mat_id(ctx, l.ffn_up_exps, x, selected);      // [n_ff, k, n]
  Tensor* out = ops::mul_mat_id(ctx, l.ffn_down_exps, ops::swiglu(ctx, gate, up), selected);  // [n_embd, k, n]
  out = ops::mul(ctx, out, ops::reshape(ctx, weights, {1, k, n}));
  // Sum over the k experts: rows of the transposed view [k, n_embd, n].
  out = ops::sum_rows(ctx, ops::transpose(ctx, out));  // [1, n_embd, n]
  return ops::reshape(ctx, out, {p.n_embd, n});
}

}  // namespace

Tensor* build_ffn(Context& ctx, const LlamaParams& p, const LlamaLayer& l, Tensor* cur) {
  return p.n_expert > 0 ? moe_ffn(ctx, p, l, cur) : dense_ffn(ctx, l, cur);
}

}  // namespace weft::model::detail
