// LlamaModel: weights and KV cache on one device, and the forward graph.
#include <cmath>
#include <string>

#include "weft/error.h"
#include "weft/model.h"
#include "weft/ops.h"

namespace weft::model {
namespace {

constexpr const char* kWhere = "model";

std::string dims_string(std::span<const int64_t> ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

Tensor* LlamaModel::load(const GgufFile& file, const std::string& name, std::initializer_list<int64_t> ne,
                         bool optional) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (!info) {
    if (optional) return nullptr;
    fail(ErrorKind::invalid_input, kWhere, file.path() + ": missing tensor " + name);
  }
  std::span<const int64_t> want(ne.begin(), ne.size());
  bool ok = info->n_dims == static_cast<int>(ne.size());
  for (size_t i = 0; ok && i < ne.size(); ++i) ok = info->ne[i] == want[i];
  if (!ok)
    fail(ErrorKind::invalid_input, kWhere,
         file.path() + ": tensor " + name + " has shape " +
             dims_string(std::span<const int64_t>(info->ne, static_cast<size_t>(info->n_dims))) + ", expected " +
             dims_string(want));
  Tensor* t = weights_ctx_.new_tensor(info->dtype(), want);
  t->name = name;
  t->flags |= kFlagWeight;
  return t;
}

LlamaModel::LlamaModel(const GgufFile& file, Device& device, int64_t n_ctx)
    : params_(LlamaParams::from_gguf(file)), device_(device), n_ctx_(n_ctx) {
  if (n_ctx <= 0 || n_ctx > (int64_t{1} << 24))
    fail(ErrorKind::invalid_input, kWhere, "n_ctx " + std::to_string(n_ctx) + " is out of range");
  const LlamaParams& p = params_;
  const int64_t q_dim = p.head_dim * p.n_head;
  const int64_t kv_dim = p.head_dim * p.n_head_kv;

  tok_embd_ = load(file, "token_embd.weight", {p.n_embd, p.n_vocab});
  output_norm_ = load(file, "output_norm.weight", {p.n_embd});
  output_ = load(file, "output.weight", {p.n_embd, p.n_vocab}, /*optional=*/true);
  if (!output_) output_ = tok_embd_;  // tied embeddings
  layers_.resize(static_cast<size_t>(p.n_layer));
  for (int64_t i = 0; i < p.n_layer; ++i) {
    LlamaLayer& l = layers_[static_cast<size_t>(i)];
    const std::string b = "blk." + std::to_string(i) + ".";
    l.attn_norm = load(file, b + "attn_norm.weight", {p.n_embd});
    l.wq = load(file, b + "attn_q.weight", {p.n_embd, q_dim});
    l.wk = load(file, b + "attn_k.weight", {p.n_embd, kv_dim});
    l.wv = load(file, b + "attn_v.weight", {p.n_embd, kv_dim});
    l.wo = load(file, b + "attn_output.weight", {q_dim, p.n_embd});
    l.bq = load(file, b + "attn_q.bias", {q_dim}, true);
    l.bk = load(file, b + "attn_k.bias", {kv_dim}, true);
    l.bv = load(file, b + "attn_v.bias", {kv_dim}, true);
    l.ffn_norm = load(file, b + "ffn_norm.weight", {p.n_embd});
    l.w_gate = load(file, b + "ffn_gate.weight", {p.n_embd, p.n_ff});
    l.w_up = load(file, b + "ffn_up.weight", {p.n_embd, p.n_ff});
    l.w_down = load(file, b + "ffn_down.weight", {p.n_ff, p.n_embd});
  }

  // Every weight tensor created so far goes into one buffer.
  std::vector<Tensor*> weights;
  for (Tensor& t : weights_ctx_.tensors()) weights.push_back(&t);
  weights_buf_ = allocate_tensors(device.default_buffer_type(), weights);
  weights_buf_->set_usage(BufferUsage::weights);
  for (Tensor* t : weights) {
    const GgufTensorInfo* info = file.find_tensor(t->name);
    tensor_set(*t, file.tensor_data(*info), 0, t->nbytes());
  }

  std::vector<Tensor*> caches;
  for (int64_t i = 0; i < p.n_layer; ++i) {
    LlamaLayer& l = layers_[static_cast<size_t>(i)];
    l.k_cache = weights_ctx_.new_tensor(DType::f16, {kv_dim, n_ctx});
    l.v_cache = weights_ctx_.new_tensor(DType::f16, {kv_dim, n_ctx});
    l.k_cache->name = "cache_k." + std::to_string(i);
    l.v_cache->name = "cache_v." + std::to_string(i);
    caches.push_back(l.k_cache);
    caches.push_back(l.v_cache);
  }
  cache_buf_ = allocate_tensors(device.default_buffer_type(), caches);
  cache_buf_->clear(0);
  galloc_ = std::make_unique<GraphAllocator>(std::vector<BufferType*>{&device.default_buffer_type()});
}

LlamaModel::~LlamaModel() = default;

Tensor* LlamaModel::build_forward(Context& ctx, Graph& g, Tensor* tokens, Tensor* positions, Tensor* mask,
                                  int64_t n_past) {
  const LlamaParams& p = params_;
  const int64_t n = tokens->ne[0];
  const int64_t n_kv = n_past + n;
  if (n <= 0 || n_past < 0 || n_kv > n_ctx_)
    fail(ErrorKind::invalid_input, kWhere,
         "tokens [" + std::to_string(n_past) + ", " + std::to_string(n_kv) + ") do not fit the context of " +
             std::to_string(n_ctx_));
  if (positions->ne[0] != n || mask->ne[0] != n_kv || mask->ne[1] < n)
    fail(ErrorKind::invalid_input, kWhere,
         "positions " + shape_string(*positions) + " or mask " + shape_string(*mask) + " do not fit " +
             std::to_string(n) + " tokens after " + std::to_string(n_past));
  const RopeMode mode = p.arch == Arch::qwen2 ? RopeMode::neox : RopeMode::normal;
  const int n_rot = static_cast<int>(p.n_rot);
  const int64_t hd = p.head_dim;
  const int64_t kv_dim = hd * p.n_head_kv;
  const float kq_scale = 1.0f / std::sqrt(static_cast<float>(hd));

  Tensor* x = ops::get_rows(ctx, tok_embd_, tokens);  // [n_embd, n]
  for (const LlamaLayer& l : layers_) {
    // Attention.
    Tensor* cur = ops::mul(ctx, ops::rms_norm(ctx, x, p.rms_eps), l.attn_norm);
    Tensor* q = ops::mul_mat(ctx, l.wq, cur);
    Tensor* k = ops::mul_mat(ctx, l.wk, cur);
    Tensor* v = ops::mul_mat(ctx, l.wv, cur);
    if (l.bq) q = ops::add(ctx, q, l.bq);
    if (l.bk) k = ops::add(ctx, k, l.bk);
    if (l.bv) v = ops::add(ctx, v, l.bv);
    q = ops::rope(ctx, ops::reshape(ctx, q, {hd, p.n_head, n}), positions, n_rot, mode, p.rope_base);
    k = ops::rope(ctx, ops::reshape(ctx, k, {hd, p.n_head_kv, n}), positions, n_rot, mode, p.rope_base);

    // Write the new rows, then read [0, n_kv) through views of the writes so
    // the graph orders each read after its write.
    Tensor* k_written = ops::set_rows(ctx, l.k_cache, ops::reshape(ctx, k, {kv_dim, n}), positions);
    Tensor* v_written = ops::set_rows(ctx, l.v_cache, v, positions);
    const size_t row = l.k_cache->nb[1];
    const size_t f16 = sizeof(uint16_t);
    // keys [hd, n_kv, n_head_kv]: a of mul_mat, kv heads in dim 2 (GQA broadcast).
    const int64_t k_ne[3] = {hd, n_kv, p.n_head_kv};
    const size_t k_nb[3] = {f16, row, static_cast<size_t>(hd) * f16};
    Tensor* keys = ops::view(ctx, k_written, k_ne, k_nb, 0);
    // values transposed [n_kv, hd, n_head_kv], packed so its rows are contiguous.
    const int64_t v_ne[3] = {n_kv, hd, p.n_head_kv};
    const size_t v_nb[3] = {row, f16, static_cast<size_t>(hd) * f16};
    Tensor* values_t = ops::cont(ctx, ops::view(ctx, v_written, v_ne, v_nb, 0));

    Tensor* qh = ops::permute(ctx, q, 0, 2, 1, 3);      // [hd, n, n_head]
    Tensor* kq = ops::mul_mat(ctx, keys, qh);           // [n_kv, n, n_head]
    kq = ops::soft_max(ctx, kq, mask, kq_scale);
    Tensor* kqv = ops::mul_mat(ctx, values_t, kq);      // [hd, n, n_head]
    kqv = ops::cont(ctx, ops::permute(ctx, kqv, 0, 2, 1, 3));  // [hd, n_head, n]
    kqv = ops::reshape(ctx, kqv, {hd * p.n_head, n});
    x = ops::add(ctx, x, ops::mul_mat(ctx, l.wo, kqv));

    // Feed-forward.
    cur = ops::mul(ctx, ops::rms_norm(ctx, x, p.rms_eps), l.ffn_norm);
    Tensor* ff = ops::swiglu(ctx, ops::mul_mat(ctx, l.w_gate, cur), ops::mul_mat(ctx, l.w_up, cur));
    x = ops::add(ctx, x, ops::mul_mat(ctx, l.w_down, ff));
  }
  x = ops::mul(ctx, ops::rms_norm(ctx, x, p.rms_eps), output_norm_);
  Tensor* logits = ops::mul_mat(ctx, output_, x);  // [n_vocab, n]
  logits->name = "logits";
  g.expand(logits);
  return logits;
}

std::vector<float> LlamaModel::eval(Backend& backend, std::span<const int32_t> tokens, int64_t n_past) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) fail(ErrorKind::invalid_input, kWhere, "eval needs at least one token");
  if (n_past < 0 || n_past > n_ctx_ || n > n_ctx_ - n_past)
    fail(ErrorKind::invalid_input, kWhere,
         std::to_string(n) + " tokens after " + std::to_string(n_past) + " do not fit the context of " +
             std::to_string(n_ctx_));
  for (int32_t t : tokens)
    if (t < 0 || t >= params_.n_vocab)
      fail(ErrorKind::invalid_input, kWhere,
           "token id " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(params_.n_vocab));
  const int64_t n_kv = n_past + n;

  Context ctx;
  Graph g;
  Tensor* tok = ctx.new_tensor(DType::i32, {n});
  Tensor* pos = ctx.new_tensor(DType::i32, {n});
  Tensor* mask = ctx.new_tensor(DType::f32, {n_kv, n});
  for (Tensor* t : {tok, pos, mask}) t->flags |= kFlagInput;
  Tensor* logits = build_forward(ctx, g, tok, pos, mask, n_past);
  logits->flags |= kFlagOutput;
  galloc_->allocate(g, GraphLayout{});

  std::vector<int32_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = static_cast<int32_t>(n_past + i);
  std::vector<float> mask_data(static_cast<size_t>(n_kv * n));
  fill_causal_mask(mask_data, n_kv, n, n_past);
  tensor_set(*tok, tokens.data(), 0, tok->nbytes());
  tensor_set(*pos, positions.data(), 0, pos->nbytes());
  tensor_set(*mask, mask_data.data(), 0, mask->nbytes());
  backend.compute(g);
  backend.synchronize();
  std::vector<float> out(static_cast<size_t>(params_.n_vocab * n));
  tensor_get(*logits, out.data(), 0, logits->nbytes());
  return out;
}

void fill_causal_mask(std::span<float> mask, int64_t n_kv, int64_t n, int64_t n_past) {
  if (n_kv < 0 || n < 0 || static_cast<uint64_t>(n_kv) * static_cast<uint64_t>(n) != mask.size())
    fail(ErrorKind::invalid_input, kWhere, "mask of " + std::to_string(mask.size()) + " floats is not [" +
                                               std::to_string(n_kv) + ", " + std::to_string(n) + "]");
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n_kv; ++j)
      mask[static_cast<size_t>(i * n_kv + j)] = j <= n_past + i ? 0.0f : -INFINITY;
}

int greedy(const float* logits, int vocab) {
  int best = 0;
  for (int i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

}  // namespace weft::model
