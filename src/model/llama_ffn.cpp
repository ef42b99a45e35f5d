// build_ffn: the gated feed-forward (SwiGLU or GELU-gated, separate or fused
// gate and up), and its mixture-of-experts forms with an optional shared
// expert.
#include "model/llama_ffn.h"

#include <algorithm>

#include "weft/core/ops.h"

namespace weft::model::detail {
namespace {

// act(gate) * up, elementwise (gpt-oss: the clamped form).
Tensor* gated(Context& ctx, const LlamaParams& p, Tensor* gate, Tensor* up) {
  if (p.ffn_act == FfnActivation::gelu_tanh) return ops::mul(ctx, ops::gelu(ctx, gate), up);
  if (p.ffn_act == FfnActivation::swiglu_oai) return ops::swiglu_oai(ctx, gate, up, kSwigluOaiAlpha, kSwigluOaiLimit);
  return ops::swiglu(ctx, gate, up);
}

// out [m, k, n] plus each pair's expert's bias row: bias [m, n_expert],
// selected i32 [k, n]; the standard engine's add_id, as get_rows of the
// selected rows and an add.
Tensor* add_expert_bias(Context& ctx, Tensor* out, Tensor* bias, Tensor* selected) {
  if (bias == nullptr) return out;
  const int64_t m = out->ne[0], k = selected->ne[0], n = selected->ne[1];
  Tensor* rows = ops::get_rows(ctx, bias, ops::reshape(ctx, selected, {k * n}));  // [m, k n]
  return ops::add(ctx, out, ops::reshape(ctx, rows, {m, k, n}));
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

// The shared expert: a dense SwiGLU every token goes through; qwen2moe's
// scaled per token by sigmoid(ffn_gate_inp_shexp · x), deepseek2's ungated.
Tensor* shared_expert(Context& ctx, const LlamaParams& p, const LlamaLayer& l, Tensor* cur) {
  Tensor* ff = gated(ctx, p, ops::mul_mat(ctx, l.ffn_gate_shexp, cur), ops::mul_mat(ctx, l.ffn_up_shexp, cur));
  Tensor* out = ops::mul_mat(ctx, l.ffn_down_shexp, ff);                               // [n_embd, n]
  if (!l.ffn_gate_inp_shexp) return out;
  Tensor* gate = ops::sigmoid(ctx, ops::mul_mat(ctx, l.ffn_gate_inp_shexp, cur));  // [1, n]
  return ops::mul(ctx, out, gate);
}

// The weighted sum over the k selected experts of those one slice holds
// ([e.first, e.first + count); the whole stack with first 0): f32 [n_embd,
// n]. x: [n_embd, 1, n]; selected: i32 [k, n]; weights: [1, k, n]. A pair
// routed elsewhere adds zeros and costs nothing (mul_mat_id's id_base).
// packed: the sum as a packed [n_embd, n] flagged kFlagSparseRows (the rows
// of tokens routed elsewhere are zeros), for a slice whose sum travels.
Tensor* experts_sum(Context& ctx, const LlamaParams& p, const LlamaLayer::ExpertSlice& e, Tensor* x,
                    Tensor* selected, Tensor* weights, bool packed = false) {
  const int64_t n = selected->ne[1];
  Tensor* gate = ops::mul_mat_id(ctx, e.gate, x, selected, e.first);  // [n_ff_expert, k, n]
  Tensor* up = ops::mul_mat_id(ctx, e.up, x, selected, e.first);      // [n_ff_expert, k, n]
  // Expert biases (gpt-oss) come only with the whole stack (split_experts
  // refuses a split of such a model).
  gate = add_expert_bias(ctx, gate, e.gate_b, selected);
  up = add_expert_bias(ctx, up, e.up_b, selected);
  Tensor* out = ops::mul_mat_id(ctx, e.down, gated(ctx, p, gate, up), selected, e.first);  // [n_embd, k, n]
  out = add_expert_bias(ctx, out, e.down_b, selected);
  out = ops::mul(ctx, out, weights);
  // Sum over the k experts: rows of the transposed view [k, n_embd, n].
  out = ops::sum_rows(ctx, ops::transpose(ctx, out));  // [1, n_embd, n]
  out = ops::reshape(ctx, out, {p.n_embd, n});
  if (!packed) return out;
  out = ops::cont(ctx, out);
  out->flags |= kFlagSparseRows;
  return out;
}

}  // namespace

// Composed of existing ops: each group's top two (top_k, get_rows,
// sum_rows), the best groups (top_k), and their rows written (set_rows)
// over a tensor of -inf made from sel itself (-1 / (sel * 0)², the zero
// made +0: sel * 0 is ±0 for the finite scores a router gives).
Tensor* limit_expert_groups(Context& ctx, const LlamaParams& p, Tensor* sel) {
  const int64_t n = sel->ne[1], G = p.n_expert_groups, per = p.n_expert / G;
  Tensor* groups = ops::reshape(ctx, sel, {per, G, n});
  const int64_t best = std::min<int64_t>(2, per);
  Tensor* top = ops::top_k(ctx, groups, static_cast<int>(best));  // i32 [best, G, n]
  Tensor* vals = ops::get_rows(ctx, ops::reshape(ctx, groups, {1, per, G * n}), ops::reshape(ctx, top, {best, G * n}));
  Tensor* score = ops::sum_rows(ctx, ops::reshape(ctx, vals, {best, G, n}));            // [1, G, n]
  Tensor* chosen = ops::top_k(ctx, ops::reshape(ctx, score, {G, n}), static_cast<int>(p.n_group_used));  // [gu, n]
  Tensor* zeros = ops::scale(ctx, groups, 0.0f);  // -0 where a score is negative: squared below
  Tensor* neg_inf = ops::div(ctx, ops::scale(ctx, ops::sigmoid(ctx, zeros), -2.0f), ops::sqr(ctx, zeros));  // -1 / +0
  Tensor* kept = ops::get_rows(ctx, groups, chosen);                                         // [per, gu, n]
  return ops::reshape(ctx, ops::set_rows(ctx, neg_inf, kept, chosen), {p.n_expert, n});
}

namespace {

// Routing: the router's logits (plus its bias, gpt-oss) into scores by
// p.expert_gating (softmax over all experts, a sigmoid each, or for
// softmax_weight the logits themselves); the top k of them (plus the
// selection bias exp_probs_b when the layer has one, and among the best
// groups' experts with p.n_expert_groups); the k unbiased scores as weights
// (softmax_weight: softmax over those k; divided by their sum when
// p.expert_weights_norm; times p.expert_weights_scale); the weighted sum of
// the k experts' outputs (mul_mat_id runs each token through its own k
// experts).
Tensor* moe_ffn(Context& ctx, Graph& g, const LlamaParams& p, const LlamaLayer& l, Tensor* cur,
                const ExpertsBuild& build) {
  const int64_t n = cur->ne[1], n_expert = p.n_expert, k = p.n_expert_used;
  Tensor* logits = ops::mul_mat(ctx, l.ffn_gate_inp, cur);  // [n_expert, n]
  if (l.ffn_gate_inp_b) logits = ops::add(ctx, logits, l.ffn_gate_inp_b);
  const bool weight_softmax = p.expert_gating == ExpertGating::softmax_weight;
  Tensor* probs = p.expert_gating == ExpertGating::sigmoid ? ops::sigmoid(ctx, logits)
                  : weight_softmax                         ? logits
                                                           : ops::soft_max(ctx, logits, nullptr, 1.0f);
  Tensor* sel = l.exp_probs_b ? ops::add(ctx, probs, l.exp_probs_b) : probs;
  if (p.n_expert_groups > 1) sel = limit_expert_groups(ctx, p, sel);
  Tensor* selected = ops::top_k(ctx, sel, static_cast<int>(k));  // i32 [k, n]
  // weights[0, i, t] = probs[selected[i, t], t]: probs viewed as one-value rows.
  Tensor* weights = ops::get_rows(ctx, ops::reshape(ctx, probs, {1, n_expert, n}), selected);  // [1, k, n]
  weights = ops::reshape(ctx, weights, {k, n});
  if (weight_softmax) weights = ops::soft_max(ctx, weights, nullptr, 1.0f);
  if (p.expert_weights_norm) weights = ops::div(ctx, weights, ops::sum_rows(ctx, weights));
  if (p.expert_weights_scale != 1.f) weights = ops::scale(ctx, weights, p.expert_weights_scale);

  Tensor* x = ops::reshape(ctx, cur, {p.n_embd, 1, n});  // one input row per token, shared by its experts
  weights = ops::reshape(ctx, weights, {1, k, n});
  Tensor* out = nullptr;
  if (l.expert_slices.empty()) {
    out = experts_sum(ctx, p,
                      {-1, 0, l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps, l.ffn_gate_exps_b, l.ffn_up_exps_b,
                       l.ffn_down_exps_b},
                      x, selected, weights);
  } else {
    g.expand(weights);  // the routing, whole, before any slice
    // With routed_rows, each other part's input rows too: in the same run
    // of the home part's nodes, not between the slices.
    std::vector<Tensor*> slice_x(l.expert_slices.size(), x);
    for (size_t i = 0; i < l.expert_slices.size(); ++i) {
      const LlamaLayer::ExpertSlice& e = l.expert_slices[i];
      if (!build.routed_rows || e.part == build.home_part) continue;
      const auto count = static_cast<int32_t>(e.gate->ne[2]);
      slice_x[i] = ops::reshape(ctx, ops::routed_rows(ctx, cur, selected, e.first, count), {p.n_embd, 1, n});
      g.expand(slice_x[i]);
    }
    // Two passes over the slices: the other devices' first (each submitted
    // as it is reached, so they run while the home part computes its own).
    // Each slice is added to g whole, in that order, before any sum reads
    // it: a sum of two remote parts must not come before the home slice.
    for (const bool home : {!build.overlap, build.overlap}) {
      for (size_t i = 0; i < l.expert_slices.size(); ++i) {
        const LlamaLayer::ExpertSlice& e = l.expert_slices[i];
        if ((e.part == build.home_part) != home) continue;
        const bool travels = slice_x[i] != x;
        const size_t begin = ctx.size();
        Tensor* part = experts_sum(ctx, p, e, slice_x[i], selected, weights, travels);
        if (build.slice_nodes) build.slice_nodes->push_back({begin, ctx.size(), e.part});
        g.expand(part);
        out = out ? ops::add(ctx, out, part) : part;
      }
    }
  }
  if (l.ffn_gate_shexp) out = ops::add(ctx, out, shared_expert(ctx, p, l, cur));
  return out;
}

}  // namespace

Tensor* build_ffn(Context& ctx, Graph& g, const LlamaParams& p, const LlamaLayer& l, Tensor* cur,
                  const ExpertsBuild& e) {
  return l.ffn_gate_inp ? moe_ffn(ctx, g, p, l, cur, e) : dense_ffn(ctx, p, l, cur);
}

namespace {

// An activation as it crosses between parts (ShardSum::wire): as it is, or
// quantized to q8_0 on the sending part and dequantized on the receiving.
Tensor* to_wire(Context& ctx, const ShardSum& where, Tensor* t) {
  if (where.wire == DType::f32) return t;
  return ops::cpy(ctx, t, ctx.new_tensor(where.wire, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}));
}
Tensor* from_wire(Context& ctx, const ShardSum& where, Tensor* t) {
  if (where.wire == DType::f32) return t;
  return ops::cpy(ctx, t, ctx.new_tensor(DType::f32, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}));
}

}  // namespace

Tensor* sum_shards(Context& ctx, Graph& g, std::span<const LlamaLayer::Shard> shards, const ShardSum& where,
                   Tensor* input, std::vector<LlamaModel::NodeRange>& part_nodes,
                   const std::function<Tensor*(const LlamaLayer::Shard&, Tensor*)>& partial) {
  g.expand(input);
  Tensor* sent = to_wire(ctx, where, input);  // what the other parts are sent, made once on the home
  // The other parts' partials as computed (f32) and as sent, each made on
  // its own part; only what the sums read joins the graph.
  struct Other {
    int part;
    Tensor* raw;
    Tensor* sent;
  };
  std::vector<Other> others;
  for (const LlamaLayer::Shard& s : shards) {
    if (s.part == where.home) continue;
    const size_t begin = ctx.size();
    Tensor* t = partial(s, from_wire(ctx, where, sent));
    if (t == nullptr) continue;  // nothing of this layer's sum on this part
    others.push_back({s.part, t, to_wire(ctx, where, t)});
    part_nodes.push_back({begin, ctx.size(), s.part});
  }
  std::vector<Tensor*> arriving;  // at the home, as sent
  if (where.others_meet && others.size() >= 2) {
    // The other parts' partials meet on the first of them, before the
    // home's shard in the graph (so that part adds them while the home
    // computes); the order of the additions is the same either way.
    const size_t begin = ctx.size();
    Tensor* sum = others.front().raw;
    for (size_t i = 1; i < others.size(); ++i) sum = ops::add(ctx, sum, from_wire(ctx, where, others[i].sent));
    sum = to_wire(ctx, where, sum);
    g.expand(sum);
    part_nodes.push_back({begin, ctx.size(), others.front().part});
    arriving.push_back(sum);
  } else {
    for (const Other& o : others) {
      g.expand(o.sent);
      arriving.push_back(o.sent);
    }
  }
  Tensor* home = nullptr;
  for (const LlamaLayer::Shard& s : shards)
    if (s.part == where.home) home = partial(s, input);
  Tensor* sum = nullptr;
  for (Tensor* t : arriving) {
    Tensor* f = from_wire(ctx, where, t);
    sum = sum == nullptr ? f : ops::add(ctx, sum, f);
  }
  if (home != nullptr) {
    g.expand(home);
    sum = sum == nullptr ? home : ops::add(ctx, sum, home);
  }
  return sum;
}

Tensor* build_ffn_shards(Context& ctx, Graph& g, const LlamaParams& p, const LlamaLayer& l, Tensor* cur,
                         const ShardSum& where, std::vector<LlamaModel::NodeRange>& part_nodes) {
  return sum_shards(ctx, g, l.shards, where, cur, part_nodes, [&](const LlamaLayer::Shard& s, Tensor* x) -> Tensor* {
    if (s.down == nullptr) return nullptr;  // no columns on this part
    return ops::mul_mat(ctx, s.down, gated(ctx, p, ops::mul_mat(ctx, s.gate, x), ops::mul_mat(ctx, s.up, x)));
  });
}

}  // namespace weft::model::detail
