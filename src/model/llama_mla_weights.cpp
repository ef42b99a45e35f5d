// The weights of multi-head latent attention (deepseek2): which tensors a
// layer reads, and attn_k_b / attn_v_b cut from an older converter's
// attn_kv_b at load (ModelWeights::derived).
#include <string>
#include <vector>

#include "model/llama_weights.h"
#include "weft/core/error.h"

namespace weft::model::detail {
namespace {

constexpr const char* kLlamaMlaWeightsWhere = "model";

}  // namespace

// The per-head products attn_k_b and attn_v_b, or, from an older converter,
// attn_kv_b (each head's nope key rows, then its value rows), which is cut
// into the two at load (cut_kv_b): f32 tensors, counted so by plan().
void describe_mla(Context& ctx, const GgufFile& file, const LlamaParams& p, const std::string& b, LlamaLayer& l,
                  ModelWeights& w) {
  const int64_t q_dim = p.n_head * p.mla_k_dim, nope = p.mla_k_dim - p.n_rot;
  l.attn_norm = describe_weight(ctx, file, b + "attn_norm.weight", {p.n_embd});
  if (p.n_lora_q > 0) {
    l.wq_a = describe_weight(ctx, file, b + "attn_q_a.weight", {p.n_embd, p.n_lora_q});
    l.q_a_norm = describe_weight(ctx, file, b + "attn_q_a_norm.weight", {p.n_lora_q});
    l.wq_b = describe_weight(ctx, file, b + "attn_q_b.weight", {p.n_lora_q, q_dim});
  } else {
    l.wq = describe_weight(ctx, file, b + "attn_q.weight", {p.n_embd, q_dim});
  }
  l.wkv_a_mqa = describe_weight(ctx, file, b + "attn_kv_a_mqa.weight", {p.n_embd, p.n_lora_kv + p.n_rot});
  l.kv_a_norm = describe_weight(ctx, file, b + "attn_kv_a_norm.weight", {p.n_lora_kv});
  if (!file.find_tensor(b + "attn_k_b.weight") && !file.find_tensor(b + "attn_kv_b.weight"))
    fail(ErrorKind::invalid_input, kLlamaMlaWeightsWhere,
         file.path() + ": missing tensor " + b + "attn_k_b.weight (or " + b + "attn_kv_b.weight, which holds it)");
  if (file.find_tensor(b + "attn_k_b.weight")) {
    l.wk_b = describe_weight(ctx, file, b + "attn_k_b.weight", {nope, p.n_lora_kv, p.n_head});
    l.wv_b = describe_weight(ctx, file, b + "attn_v_b.weight", {p.n_lora_kv, p.mla_v_dim, p.n_head});
  } else {
    const Tensor* kv_b = describe_weight(ctx, file, b + "attn_kv_b.weight", {p.n_lora_kv, p.n_head * (nope + p.mla_v_dim)});
    // Cut at load (ModelWeights::derived), f32 whatever kv_b's type.
    auto derive = [&](std::initializer_list<int64_t> ne, const char* name, bool key) {
      Tensor* t = ctx.new_tensor(DType::f32, ne);
      t->name = b + name;
      t->flags |= kFlagWeight;
      w.derived[t] = {kv_b->name, key};
      return t;
    };
    l.wk_b = derive({nope, p.n_lora_kv, p.n_head}, "attn_k_b.weight", true);
    l.wv_b = derive({p.n_lora_kv, p.mla_v_dim, p.n_head}, "attn_v_b.weight", false);
  }
  l.wo = describe_weight(ctx, file, b + "attn_output.weight", {p.n_head * p.mla_v_dim, p.n_embd});
}

// attn_k_b or attn_v_b of one layer from its attn_kv_b [kv_lora, n_head *
// (nope + v)] (rows: each head's nope key rows, then its value rows), as
// the converter cuts them: k_b[h][c][d] = kv_b row (h (nope + v) + d)[c]
// (transposed, [nope, kv_lora, n_head]); v_b[h][j] = kv_b row (h (nope + v)
// + nope + j) ([kv_lora, v, n_head]).
std::vector<uint8_t> cut_kv_b(const GgufFile& file, const std::string& source, bool key, const Tensor& t) {
  const GgufTensorInfo* info = file.find_tensor(source);
  if (info == nullptr) fail(ErrorKind::internal, kLlamaMlaWeightsWhere, file.path() + ": " + source + " went missing");
  const int64_t rank = info->ne[0];
  const int64_t n_head = t.ne[2];
  const int64_t per_head = info->ne[1] / n_head;
  const int64_t nope = key ? t.ne[0] : per_head - t.ne[1];
  const size_t row = row_bytes(info->dtype(), rank);
  const auto* src = static_cast<const uint8_t*>(file.tensor_data(*info));
  std::vector<uint8_t> out(t.nbytes());
  auto* dst = reinterpret_cast<float*>(out.data());
  std::vector<float> r(static_cast<size_t>(rank));
  for (int64_t h = 0; h < n_head; ++h) {
    const int64_t first = key ? 0 : nope, count = key ? nope : t.ne[1];
    for (int64_t i = 0; i < count; ++i) {
      to_f32(info->dtype(), src + static_cast<size_t>(h * per_head + first + i) * row, r.data(), rank);
      for (int64_t c = 0; c < rank; ++c) {
        const int64_t at = key ? (h * rank + c) * nope + i : (h * count + i) * rank + c;
        dst[at] = r[static_cast<size_t>(c)];
      }
    }
  }
  return out;
}

}  // namespace weft::model::detail
