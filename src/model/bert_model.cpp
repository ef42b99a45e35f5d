// BERT encoders (general.architecture "bert", LlamaParams::encoder): their
// weights and forward graph, as the standard engine's converter writes the
// files (docs/models.md "bert"). A token's input is its embedding plus the
// token-type-0 row plus its position's embedding, LayerNormed; each block
// adds attention (q/k/v/output with biases, every token of the sequence
// seeing every other) to its input and LayerNorms the sum, then adds an
// ungated GELU feed-forward (with biases) and LayerNorms again. The last
// block's output is the hidden state embeddings pool; there is no output
// matrix, so no logits.
#include <string>

#include "model/llama_weights.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"
#include "weft/model/model.h"

namespace weft::model {
namespace detail {

ModelWeights describe_encoder_weights(const GgufFile& file, const LlamaParams& p, Context& ctx) {
  const int64_t d = p.n_embd;
  ModelWeights w;
  w.tok_embd = describe_weight(ctx, file, "token_embd.weight", {d, p.n_vocab});
  if (p.n_token_types > 0) w.type_embd = describe_weight(ctx, file, "token_types.weight", {d, p.n_token_types});
  w.pos_embd = describe_weight(ctx, file, "position_embd.weight", {d, p.n_ctx_train});
  w.embd_norm = describe_weight(ctx, file, "token_embd_norm.weight", {d});
  w.embd_norm_b = describe_weight(ctx, file, "token_embd_norm.bias", {d});
  if (p.n_head_kv != p.n_head || p.head_dim * p.n_head != d)
    fail(ErrorKind::invalid_input, "model",
         file.path() + ": a " + p.arch_name + " file has as many key/value heads as heads, of n_embd / heads each");
  w.layers.resize(static_cast<size_t>(p.n_layer));
  for (int64_t i = 0; i < p.n_layer; ++i) {
    LlamaLayer& l = w.layers[static_cast<size_t>(i)];
    const std::string b = "blk." + std::to_string(i) + ".";
    auto weight = [&](const std::string& name, std::initializer_list<int64_t> ne) {
      return describe_weight(ctx, file, b + name, ne);
    };
    l.wq = weight("attn_q.weight", {d, d});
    l.bq = weight("attn_q.bias", {d});
    l.wk = weight("attn_k.weight", {d, d});
    l.bk = weight("attn_k.bias", {d});
    l.wv = weight("attn_v.weight", {d, d});
    l.bv = weight("attn_v.bias", {d});
    l.wo = weight("attn_output.weight", {d, d});
    l.bo = weight("attn_output.bias", {d});
    l.attn_out_norm = weight("attn_output_norm.weight", {d});
    l.attn_out_norm_b = weight("attn_output_norm.bias", {d});
    l.w_up = weight("ffn_up.weight", {d, p.n_ff});
    l.b_up = weight("ffn_up.bias", {p.n_ff});
    l.w_down = weight("ffn_down.weight", {p.n_ff, d});
    l.b_down = weight("ffn_down.bias", {d});
    l.layer_out_norm = weight("layer_output_norm.weight", {d});
    l.layer_out_norm_b = weight("layer_output_norm.bias", {d});
  }
  return w;
}

}  // namespace detail

namespace {

// LayerNorm of x's rows with a scale and a bias.
Tensor* layer_norm(Context& ctx, Tensor* x, Tensor* w, Tensor* b, float eps) {
  return ops::add(ctx, ops::mul(ctx, ops::norm(ctx, x, eps), w), b);
}

}  // namespace

LlamaModel::Forward LlamaModel::build_encoder_forward(Context& ctx, Graph& g, const Inputs& in, int64_t n_past,
                                                      LogitRows rows) const {
  const LlamaParams& p = params_;
  if (rows != LogitRows::hidden && rows != LogitRows::none)
    fail(ErrorKind::unsupported, "model",
         p.arch_name + " is an encoder: it gives embeddings (hidden states), not logits (it has no output matrix)");
  (void)n_past;  // a graph serves every n_past of its shape: set_inputs refuses n_past > 0
  Forward f;
  f.segment_begin.push_back(ctx.size());
  Tensor* x = ops::get_rows(ctx, tok_embd_, in.tokens);                              // [n_embd, n]
  if (type_embd_) x = ops::add(ctx, x, ops::view_1d(ctx, type_embd_, p.n_embd, 0));  // type 0 ("sentence A")
  x = ops::add(ctx, x, ops::get_rows(ctx, pos_embd_, in.positions));
  x = layer_norm(ctx, x, embd_norm_, embd_norm_b_, p.rms_eps);
  for (int64_t il = 0; il < p.n_layer; ++il) {
    const LlamaLayer& l = layers_[static_cast<size_t>(il)];
    f.segment_begin.push_back(ctx.size());
    // build_attention adds attn_output.bias; the norm follows the residual add.
    x = layer_norm(ctx, ops::add(ctx, x, build_attention(ctx, g, f, l, il, x, in)), l.attn_out_norm, l.attn_out_norm_b,
                   p.rms_eps);
    Tensor* up = ops::gelu_erf(ctx, ops::add(ctx, ops::mul_mat(ctx, l.w_up, x), l.b_up));
    Tensor* down = ops::add(ctx, ops::mul_mat(ctx, l.w_down, up), l.b_down);
    x = layer_norm(ctx, ops::add(ctx, x, down), l.layer_out_norm, l.layer_out_norm_b, p.rms_eps);
  }
  f.segment_begin.push_back(ctx.size());
  if (in.out_rows) x = ops::get_rows(ctx, x, in.out_rows);  // [n_embd, n_out]
  f.output_index = ctx.size();
  x->name = rows == LogitRows::none ? "last_layer_out" : "hidden";
  g.expand(x);
  f.logits = x;
  return f;
}

}  // namespace weft::model
