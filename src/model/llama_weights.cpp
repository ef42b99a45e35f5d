// describe_weights, layer_parts, weights_by_part and LlamaModel::plan.
#include "model/llama_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "weft/core/error.h"
#include "weft/core/ops.h"

namespace weft::model {
namespace detail {
namespace {

constexpr const char* kLlamaWeightsWhere = "model";

std::string dims_string(std::span<const int64_t> ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

Tensor* describe(Context& ctx, const GgufFile& file, const std::string& name, std::initializer_list<int64_t> ne,
                 bool optional = false) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (!info) {
    if (optional) return nullptr;
    fail(ErrorKind::invalid_input, kLlamaWeightsWhere, file.path() + ": missing tensor " + name);
  }
  std::span<const int64_t> want(ne.begin(), ne.size());
  bool ok = info->n_dims == static_cast<int>(ne.size());
  for (size_t i = 0; ok && i < ne.size(); ++i) ok = info->ne[i] == want[i];
  if (!ok)
    fail(ErrorKind::invalid_input, kLlamaWeightsWhere,
         file.path() + ": tensor " + name + " has shape " +
             dims_string(std::span<const int64_t>(info->ne, static_cast<size_t>(info->n_dims))) + ", expected " +
             dims_string(want));
  Tensor* t = ctx.new_tensor(info->dtype(), want);
  t->name = name;
  t->flags |= kFlagWeight;
  return t;
}

}  // namespace

Tensor* describe_weight(Context& ctx, const GgufFile& file, const std::string& name, std::initializer_list<int64_t> ne,
                        bool optional) {
  return describe(ctx, file, name, ne, optional);
}

namespace {

void describe_attention(Context& ctx, const GgufFile& file, const LlamaParams& p, const std::string& b, LlamaLayer& l,
                        ModelWeights& w) {
  if (p.mla()) return describe_mla(ctx, file, p, b, l, w);
  const int64_t q_dim = p.head_dim * p.n_head;
  const int64_t kv_dim = p.head_dim * p.n_head_kv;
  l.attn_norm = describe(ctx, file, b + "attn_norm.weight", {p.n_embd});
  // Phi-3 fuses q, k and v into one matrix; other files (and some Phi-3
  // conversions) keep them apart.
  if (p.arch == Arch::phi3 && (file.find_tensor(b + "attn_qkv.weight") || !file.find_tensor(b + "attn_q.weight"))) {
    l.wqkv = describe(ctx, file, b + "attn_qkv.weight", {p.n_embd, q_dim + 2 * kv_dim});
  } else {
    l.wq = describe(ctx, file, b + "attn_q.weight", {p.n_embd, q_dim});
    l.wk = describe(ctx, file, b + "attn_k.weight", {p.n_embd, kv_dim});
    l.wv = describe(ctx, file, b + "attn_v.weight", {p.n_embd, kv_dim});
    l.bq = describe(ctx, file, b + "attn_q.bias", {q_dim}, true);
    l.bk = describe(ctx, file, b + "attn_k.bias", {kv_dim}, true);
    l.bv = describe(ctx, file, b + "attn_v.bias", {kv_dim}, true);
  }
  l.wo = describe(ctx, file, b + "attn_output.weight", {q_dim, p.n_embd});
  l.bo = describe(ctx, file, b + "attn_output.bias", {p.n_embd}, true);
  if (p.attn_sinks) l.attn_sinks = describe(ctx, file, b + "attn_sinks.weight", {p.n_head});
  const bool qk_norm = p.arch == Arch::qwen3 || p.arch == Arch::qwen3moe || p.arch == Arch::gemma3;
  if (qk_norm) {
    l.q_norm = describe(ctx, file, b + "attn_q_norm.weight", {p.head_dim});
    l.k_norm = describe(ctx, file, b + "attn_k_norm.weight", {p.head_dim});
  }
  if (p.arch == Arch::gemma2 || p.arch == Arch::gemma3)
    l.attn_post_norm = describe(ctx, file, b + "post_attention_norm.weight", {p.n_embd});
}

void describe_ffn(Context& ctx, const GgufFile& file, const LlamaParams& p, int64_t il, const std::string& b,
                  LlamaLayer& l) {
  // gpt-oss names its pre-FFN norm post_attention_norm.
  l.ffn_norm = describe(ctx, file, b + (p.arch == Arch::gptoss ? "post_attention_norm.weight" : "ffn_norm.weight"),
                        {p.n_embd});
  if (p.arch == Arch::gemma2 || p.arch == Arch::gemma3)
    l.ffn_post_norm = describe(ctx, file, b + "post_ffw_norm.weight", {p.n_embd});
  if (p.is_moe_layer(il)) {
    const int64_t ff = p.n_ff_expert;
    l.ffn_gate_inp = describe(ctx, file, b + "ffn_gate_inp.weight", {p.n_embd, p.n_expert});
    l.ffn_gate_exps = describe(ctx, file, b + "ffn_gate_exps.weight", {p.n_embd, ff, p.n_expert});
    l.ffn_up_exps = describe(ctx, file, b + "ffn_up_exps.weight", {p.n_embd, ff, p.n_expert});
    l.ffn_down_exps = describe(ctx, file, b + "ffn_down_exps.weight", {ff, p.n_embd, p.n_expert});
    l.exp_probs_b = describe(ctx, file, b + "exp_probs_b.bias", {p.n_expert}, true);
    if (p.expert_biases) {
      l.ffn_gate_inp_b = describe(ctx, file, b + "ffn_gate_inp.bias", {p.n_expert});
      l.ffn_gate_exps_b = describe(ctx, file, b + "ffn_gate_exps.bias", {ff, p.n_expert});
      l.ffn_up_exps_b = describe(ctx, file, b + "ffn_up_exps.bias", {ff, p.n_expert});
      l.ffn_down_exps_b = describe(ctx, file, b + "ffn_down_exps.bias", {p.n_embd, p.n_expert});
    }
    if (p.n_ff_shared > 0 && p.n_expert_shared > 0) {  // deepseek2: ungated
      l.ffn_gate_shexp = describe(ctx, file, b + "ffn_gate_shexp.weight", {p.n_embd, p.n_ff_shared});
      l.ffn_up_shexp = describe(ctx, file, b + "ffn_up_shexp.weight", {p.n_embd, p.n_ff_shared});
      l.ffn_down_shexp = describe(ctx, file, b + "ffn_down_shexp.weight", {p.n_ff_shared, p.n_embd});
    } else if (p.n_ff_shared > 0) {
      l.ffn_gate_inp_shexp = describe(ctx, file, b + "ffn_gate_inp_shexp.weight", {p.n_embd});
      l.ffn_gate_shexp = describe(ctx, file, b + "ffn_gate_shexp.weight", {p.n_embd, p.n_ff_shared});
      l.ffn_up_shexp = describe(ctx, file, b + "ffn_up_shexp.weight", {p.n_embd, p.n_ff_shared});
      l.ffn_down_shexp = describe(ctx, file, b + "ffn_down_shexp.weight", {p.n_ff_shared, p.n_embd});
    }
  } else if (p.arch == Arch::phi3 && !file.find_tensor(b + "ffn_gate.weight")) {  // the usual Phi-3 layout
    l.w_up = describe(ctx, file, b + "ffn_up.weight", {p.n_embd, 2 * p.n_ff});  // gate and up, fused
    l.w_down = describe(ctx, file, b + "ffn_down.weight", {p.n_ff, p.n_embd});
  } else {
    l.w_gate = describe(ctx, file, b + "ffn_gate.weight", {p.n_embd, p.n_ff});
    l.w_up = describe(ctx, file, b + "ffn_up.weight", {p.n_embd, p.n_ff});
    l.w_down = describe(ctx, file, b + "ffn_down.weight", {p.n_ff, p.n_embd});
  }
}

}  // namespace

ModelWeights describe_weights(const GgufFile& file, const LlamaParams& p, Context& ctx) {
  if (p.encoder) return describe_encoder_weights(file, p, ctx);
  ModelWeights w;
  w.tok_embd = describe(ctx, file, "token_embd.weight", {p.n_embd, p.n_vocab});
  w.output_norm = describe(ctx, file, "output_norm.weight", {p.n_embd});
  w.output = describe(ctx, file, "output.weight", {p.n_embd, p.n_vocab}, /*optional=*/true);
  if (!w.output) w.output = w.tok_embd;  // tied embeddings
  w.layers.resize(static_cast<size_t>(p.n_layer));
  for (int64_t i = 0; i < p.n_layer; ++i) {
    LlamaLayer& l = w.layers[static_cast<size_t>(i)];
    const std::string b = "blk." + std::to_string(i) + ".";
    describe_attention(ctx, file, p, b, l, w);
    describe_ffn(ctx, file, p, i, b, l);
  }
  return w;
}

std::vector<float> rope_factors(const GgufFile& file, const LlamaParams& p, int64_t n_ctx) {
  const int64_t half = p.n_rot / 2;
  std::string name;
  if (p.rope_scaling == RopeScalingType::llama3) {
    name = "rope_freqs.weight";
    if (!file.find_tensor(name)) return llama3_rope_factors(p);
  } else if (p.rope_scaling == RopeScalingType::yarn) {
    return yarn_rope_factors(p);
  } else if (p.rope_scaling == RopeScalingType::longrope) {
    name = n_ctx > p.rope_n_ctx_orig ? "rope_factors_long.weight" : "rope_factors_short.weight";
  } else {
    return {};
  }
  const GgufTensorInfo* info = file.find_tensor(name);
  if (!info) fail(ErrorKind::invalid_input, kLlamaWeightsWhere, file.path() + ": missing tensor " + name);
  if (info->dtype() != DType::f32 || info->n_dims != 1 || info->ne[0] != half)
    fail(ErrorKind::invalid_input, kLlamaWeightsWhere,
         file.path() + ": tensor " + name + " must be f32 [" + std::to_string(half) + "] (rope.dimension_count / 2)");
  std::vector<float> f(static_cast<size_t>(half));
  std::memcpy(f.data(), file.tensor_data(*info), f.size() * sizeof(float));
  for (size_t i = 0; i < f.size(); ++i)
    if (!(std::isfinite(f[i]) && f[i] > 0))
      fail(ErrorKind::invalid_input, kLlamaWeightsWhere,
           file.path() + ": tensor " + name + "[" + std::to_string(i) + "] = " + std::to_string(f[i]) +
               " is not a positive frequency factor");
  return f;
}

std::vector<float> llama3_rope_factors(const LlamaParams& p) {
  // Llama 3.1's rule: wavelengths shorter than L / high_freq_factor keep
  // their frequency, those longer than L / low_freq_factor are slowed by
  // the factor F, and those between are interpolated.
  const double base = p.rope_base, F = p.rope_scaling_factor, L = static_cast<double>(p.rope_n_ctx_orig);
  const double low = p.rope_low_freq_factor, high = p.rope_high_freq_factor;
  std::vector<float> f(static_cast<size_t>(p.n_rot / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    const double freq = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(p.n_rot));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < L / high) {
      f[i] = 1.0f;
    } else if (wavelen > L / low) {
      f[i] = static_cast<float>(F);
    } else {
      const double smooth = (L / wavelen - low) / (high - low);
      f[i] = static_cast<float>(1.0 / ((1 - smooth) / F + smooth));
    }
  }
  return f;
}

std::vector<float> yarn_rope_factors(const LlamaParams& p) {
  // YaRN: pair i's frequency is interpolated (times 1/F) below the
  // correction range, kept (extrapolated) above it, and blended along a
  // linear ramp between. The range is where a pair turns between
  // beta_slow and beta_fast times over the original context:
  // d(r) = n_rot ln(L / (2 pi r)) / (2 ln base), low = floor(d(beta_fast)),
  // high = ceil(d(beta_slow)), clamped to [0, n_rot - 1]. The blend as a
  // divisor of the frequency: 1 / (s (1 - m) + m), s = 1/F, m = ext_factor
  // times the ramp (1 at and below low, 0 at and above high).
  const double n_rot = static_cast<double>(p.n_rot), base = p.rope_base, L = static_cast<double>(p.rope_n_ctx_orig);
  auto corr_dim = [&](double rotations) { return n_rot * std::log(L / (rotations * 2 * M_PI)) / (2 * std::log(base)); };
  const double low = std::max(0.0, std::floor(corr_dim(p.rope_yarn_beta_fast)));
  const double high = std::min(n_rot - 1, std::ceil(corr_dim(p.rope_yarn_beta_slow)));
  const double s = 1.0 / p.rope_scaling_factor;
  std::vector<float> f(static_cast<size_t>(p.n_rot / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    const double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
    const double mix = (1.0 - std::clamp(y, 0.0, 1.0)) * p.rope_yarn_ext_factor;
    f[i] = static_cast<float>(1.0 / (s * (1.0 - mix) + mix));
  }
  return f;
}

const uint8_t* ModelWeights::data(const GgufFile& file, const Tensor& t) const {
  if (const auto d = derived.find(&t); d != derived.end()) {
    auto& bytes = derived_bytes[&t];
    if (bytes.empty())
      bytes = d->second.first_column >= 0 ? cut_columns(file, d->second.source, d->second.first_column, t)
                                          : cut_kv_b(file, d->second.source, d->second.key, t);
    return bytes.data();
  }
  const GgufTensorInfo* info = file.find_tensor(t.name);
  const auto it = slice_offset.find(&t);
  const size_t offset = it == slice_offset.end() ? 0 : it->second;
  if (info == nullptr || offset > info->nbytes || t.nbytes() > info->nbytes - offset)
    fail(ErrorKind::internal, kLlamaWeightsWhere,
         file.path() + ": weight " + t.name + " is not where it was described");
  return static_cast<const uint8_t*>(file.tensor_data(*info)) + offset;
}

void split_experts(ModelWeights& w, const LlamaParams& p, std::span<const int64_t> counts, size_t n_parts,
                   Context& ctx) {
  if (counts.size() != n_parts)
    fail(ErrorKind::invalid_input, kLlamaWeightsWhere,
         "an expert split of " + std::to_string(counts.size()) + " counts for " + std::to_string(n_parts) +
             " placements");
  if (p.n_expert == 0) fail(ErrorKind::invalid_input, kLlamaWeightsWhere, "an expert split of a model without experts");
  // A slice's pairs routed elsewhere come back as zeros from mul_mat_id,
  // but a bias row added to them would not stay zero.
  if (p.expert_biases)
    fail(ErrorKind::unsupported, kLlamaWeightsWhere,
         "an expert split of a model with expert biases (" + p.arch_name + ") is not supported: split by layers");
  int64_t sum = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0 || counts[i] > p.n_expert)
      fail(ErrorKind::invalid_input, kLlamaWeightsWhere,
           "expert split: part " + std::to_string(i) + " holds " + std::to_string(counts[i]) + " of " +
               std::to_string(p.n_expert) + " experts");
    sum += counts[i];
  }
  if (sum != p.n_expert)
    fail(ErrorKind::invalid_input, kLlamaWeightsWhere,
         "expert split: the parts hold " + std::to_string(sum) + " experts; the model has " +
             std::to_string(p.n_expert));
  for (LlamaLayer& l : w.layers) {
    if (!l.ffn_gate_exps) continue;  // a dense layer (deepseek2's leading ones)
    int64_t first = 0;
    for (size_t i = 0; i < counts.size(); first += counts[i], ++i) {
      if (counts[i] == 0) continue;
      auto slice = [&](const Tensor* whole) {
        Tensor* t = ctx.new_tensor(whole->type, {whole->ne[0], whole->ne[1], counts[i]});
        t->name = whole->name;  // its bytes are a run of that file tensor's
        t->flags |= kFlagWeight;
        w.slice_offset[t] = static_cast<size_t>(first) * whole->nb[2];
        return t;
      };
      l.expert_slices.push_back({static_cast<int>(i), static_cast<int32_t>(first), slice(l.ffn_gate_exps),
                                 slice(l.ffn_up_exps), slice(l.ffn_down_exps)});
    }
    l.ffn_gate_exps = l.ffn_up_exps = l.ffn_down_exps = nullptr;
  }
}

std::vector<int> layer_parts(std::span<const int64_t> bounds, int64_t n_layer) {
  if (bounds.size() < 2)
    fail(ErrorKind::invalid_input, kLlamaWeightsWhere,
         "a split model needs at least one part (" + std::to_string(bounds.size()) + " layer boundaries)");
  std::vector<int> part(static_cast<size_t>(n_layer), 0);
  int64_t next = 0;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    const int64_t first = bounds[i], last = bounds[i + 1];
    if (first != next || last < first || last > n_layer)
      fail(ErrorKind::invalid_input, kLlamaWeightsWhere,
           "placement " + std::to_string(i) + " [" + std::to_string(first) + ", " + std::to_string(last) +
               ") does not continue at layer " + std::to_string(next) + " of " + std::to_string(n_layer));
    for (int64_t l = first; l < last; ++l) part[static_cast<size_t>(l)] = static_cast<int>(i);
    next = last;
  }
  if (next != n_layer)
    fail(ErrorKind::invalid_input, kLlamaWeightsWhere,
         "placement covers " + std::to_string(next) + " of " + std::to_string(n_layer) + " layers");
  return part;
}

std::vector<std::vector<Tensor*>> weights_by_part(const ModelWeights& w, std::span<const int> layer_part, int n_parts) {
  std::vector<std::vector<Tensor*>> parts(static_cast<size_t>(n_parts));
  parts.front().push_back(w.tok_embd);
  for (Tensor* t : {w.type_embd, w.pos_embd, w.embd_norm, w.embd_norm_b})
    if (t) parts.front().push_back(t);
  if (!w.output_slices.empty()) {
    parts[static_cast<size_t>(w.output_part)].push_back(w.output_norm);
    for (const OutputSlice& o : w.output_slices)
      if (o.w) parts[static_cast<size_t>(o.part)].push_back(o.w);
  } else if (w.output_norm != nullptr) {  // (an encoder has no output)
    parts.back().push_back(w.output_norm);
    if (w.output != w.tok_embd) parts.back().push_back(w.output);
  }
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LlamaLayer& l = w.layers[i];
    for (Tensor* t : {l.attn_norm,
                      l.wq,
                      l.wk,
                      l.wv,
                      l.wqkv,
                      l.wo,
                      l.bo,
                      l.attn_sinks,
                      l.bq,
                      l.bk,
                      l.bv,
                      l.q_norm,
                      l.k_norm,
                      l.attn_post_norm,
                      l.ffn_norm,
                      l.ffn_post_norm,
                      l.w_gate,
                      l.w_up,
                      l.w_down,
                      l.ffn_gate_inp,
                      l.ffn_gate_inp_b,
                      l.ffn_gate_exps,
                      l.ffn_up_exps,
                      l.ffn_down_exps,
                      l.ffn_gate_exps_b,
                      l.ffn_up_exps_b,
                      l.ffn_down_exps_b,
                      l.ffn_gate_inp_shexp,
                      l.ffn_gate_shexp,
                      l.ffn_up_shexp,
                      l.ffn_down_shexp,
                      l.exp_probs_b,
                      l.wq_a,
                      l.q_a_norm,
                      l.wq_b,
                      l.wkv_a_mqa,
                      l.kv_a_norm,
                      l.wk_b,
                      l.wv_b,
                      l.attn_out_norm,
                      l.attn_out_norm_b,
                      l.layer_out_norm,
                      l.layer_out_norm_b,
                      l.b_up,
                      l.b_down})
      if (t) parts[static_cast<size_t>(layer_part[i])].push_back(t);
    for (const LlamaLayer::ExpertSlice& e : l.expert_slices)
      for (Tensor* t : {e.gate, e.up, e.down}) parts[static_cast<size_t>(e.part)].push_back(t);
    for (const LlamaLayer::Shard& s : l.shards) {
      auto& to = parts[static_cast<size_t>(s.part)];
      for (Tensor* t : {s.wq, s.wk, s.wv, s.bq, s.bk, s.bv, s.wo, s.attn_sinks, s.gate, s.up, s.down})
        if (t) to.push_back(t);
      // The norms each head applies: the layer's on its home part, a copy elsewhere.
      for (Tensor* t : {s.q_norm, s.k_norm})
        if (t && t != l.q_norm && t != l.k_norm) to.push_back(t);
    }
  }
  return parts;
}

void check_n_ctx(int64_t n_ctx) {
  if (n_ctx <= 0 || n_ctx > (int64_t{1} << 24))
    fail(ErrorKind::invalid_input, kLlamaWeightsWhere,
         "n_ctx " + std::to_string(n_ctx) + " is out of range (1 to 2^24)");
}

}  // namespace detail

void check_cache_type(const LlamaParams& p, DType cache_type) {
  if (cache_type != DType::f16 && cache_type != DType::q8_0)
    fail(ErrorKind::unsupported, detail::kLlamaWeightsWhere,
         "KV cache type " + std::string(dtype_name(cache_type)) + " is not one of f16, q8_0");
  if (p.head_dim % traits(cache_type).block_size != 0 || p.value_dim() % traits(cache_type).block_size != 0)
    fail(ErrorKind::unsupported, detail::kLlamaWeightsWhere,
         "a " + std::string(dtype_name(cache_type)) + " KV cache needs a head size that is a multiple of " +
             std::to_string(traits(cache_type).block_size) + "; this model's is " + std::to_string(p.head_dim));
}

Tensor* flash_attn_probe(Context& ctx, const LlamaParams& p, DType cache_type) {
  Tensor* q = ctx.new_tensor(DType::f32, {p.head_dim, 1, p.n_head});
  Tensor* k = ctx.new_tensor(cache_type, {p.head_dim, 1, p.n_head_kv});
  Tensor* v = ctx.new_tensor(cache_type, {p.value_dim(), 1, p.n_head_kv});
  Tensor* mask = ctx.new_tensor(DType::f32, {1, 1});
  Tensor* sinks = p.attn_sinks ? ctx.new_tensor(DType::f32, {p.n_head}) : nullptr;
  return ops::flash_attn(ctx, q, k, v, mask, p.attn_scale, p.attn_softcap, sinks);
}

Tensor* routed_rows_probe(Context& ctx, const LlamaParams& p) {
  Tensor* x = ctx.new_tensor(DType::f32, {p.n_embd, 2});
  Tensor* ids = ctx.new_tensor(DType::i32, {std::max<int64_t>(p.n_expert_used, 1), 2});
  return ops::routed_rows(ctx, x, ids, 0, 1);
}

namespace detail {

std::vector<std::unique_ptr<Buffer>> map_weights(const GgufFile& file, const ModelWeights& w, Device& device,
                                                 std::span<Tensor* const> tensors) {
  BufferType& bt = device.default_buffer_type();
  // The host CPU reads the mapping directly; any other device (a GPU stand-in
  // with host-visible memory included) keeps its own copy.
  if (device.kind() != DeviceKind::cpu || !bt.is_host() || tensors.empty()) return {};
  // A split model's parts are separate mappings: one buffer per part spanned.
  constexpr uintptr_t kAlign = 32;  // the GGUF default; f32 and every block type need less
  struct Span {
    uintptr_t lo = UINTPTR_MAX, hi = 0;
  };
  std::vector<Span> spans(file.parts().size());
  std::vector<uint32_t> part_of(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor* t = tensors[i];
    if (w.is_derived(t)) continue;  // not in the file: the caller copies it
    if (t->view_src != nullptr || t->buffer != nullptr) return {};
    if (bt.alloc_size(*t) != t->nbytes()) return {};
    const auto p = reinterpret_cast<uintptr_t>(w.data(file, *t));  // throws unless the tensor is in the file
    if (p % kAlign != 0) return {};
    part_of[i] = file.find_tensor(t->name)->part;
    Span& s = spans.at(part_of[i]);
    s.lo = std::min(s.lo, p);
    s.hi = std::max(s.hi, p + t->nbytes());
  }
  std::vector<std::unique_ptr<Buffer>> bufs(spans.size());
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (size_t k = 0; k < spans.size(); ++k) {
    const Span& s = spans[k];
    if (s.hi == 0) continue;  // no tensor of this placement in part k
    bufs[k] = wrap_host_memory(bt, file.mapping(), reinterpret_cast<const void*>(s.lo), s.hi - s.lo);
    // Read ahead so the first token does not fault page by page (advice
    // only: a failure changes nothing).
    const uintptr_t start = s.lo / page * page;
    (void)madvise(reinterpret_cast<void*>(start), s.hi - start, MADV_WILLNEED);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (w.is_derived(tensors[i])) continue;
    const Span& s = spans[part_of[i]];
    bind_tensor(*tensors[i], *bufs[part_of[i]], reinterpret_cast<uintptr_t>(w.data(file, *tensors[i])) - s.lo);
  }
  std::erase(bufs, nullptr);
  return bufs;
}

}  // namespace detail

std::vector<PartPlan> LlamaModel::plan(const GgufFile& file, std::span<const int64_t> bounds, int64_t n_ctx,
                                       DType cache_type, std::span<const int64_t> expert_split,
                                       int64_t sliding_ring_step, std::span<const TensorShare> tensor_shares) {
  const LlamaParams p = LlamaParams::from_gguf(file);
  detail::check_n_ctx(n_ctx);
  Context ctx;
  detail::ModelWeights w = detail::describe_weights(file, p, ctx);
  if (!expert_split.empty()) detail::split_experts(w, p, expert_split, bounds.size() - 1, ctx);
  (void)detail::rope_factors(file, p, n_ctx);  // checked as loading will
  const std::vector<int> layer_part = detail::layer_parts(bounds, p.n_layer);
  const int n_parts = static_cast<int>(bounds.size() - 1);
  if (!tensor_shares.empty()) {
    if (tensor_shares.size() != static_cast<size_t>(n_parts))
      fail(ErrorKind::invalid_input, detail::kLlamaWeightsWhere,
           std::to_string(tensor_shares.size()) + " tensor shares for " + std::to_string(n_parts) + " parts");
    detail::split_tensor_parallel(w, p, layer_part, tensor_shares, ctx);
  }
  const auto parts = detail::weights_by_part(w, layer_part, n_parts);
  const int64_t ring_rows = model::sliding_ring_rows(p, n_ctx, sliding_ring_step);
  std::vector<PartPlan> plan(static_cast<size_t>(n_parts));
  for (int i = 0; i < n_parts; ++i) {
    PartPlan& pp = plan[static_cast<size_t>(i)];
    const int home = tensor_shares.empty() ? i : tensor_shares[static_cast<size_t>(i)].home;
    pp.first_layer = bounds[static_cast<size_t>(home)];
    pp.last_layer = bounds[static_cast<size_t>(home) + 1];
    if (!expert_split.empty()) pp.n_experts = expert_split[static_cast<size_t>(i)];
    for (const Tensor* t : parts[static_cast<size_t>(i)]) pp.weight_bytes += t->nbytes();
    for (int64_t il = pp.first_layer; il < pp.last_layer; ++il) {
      const LlamaLayer& l = w.layers[static_cast<size_t>(il)];
      // A shard holds its heads' share of the layer's cache (linear in the heads).
      int64_t heads = l.shards.empty() ? p.n_head_kv : 0;
      for (const LlamaLayer::Shard& s : l.shards) {
        if (s.part != i) continue;
        heads += s.n_kv;
        pp.first_head = s.first_head;
        pp.last_head = s.first_head + s.n_head;
      }
      pp.kv_cache_bytes += kv_cache_bytes(p, il, il + 1, n_ctx, cache_type, ring_rows) /
                           static_cast<size_t>(p.n_head_kv) * static_cast<size_t>(heads);
    }
  }
  return plan;
}

int64_t sliding_ring_rows(const LlamaParams& p, int64_t n_ctx, int64_t step) {
  if (step <= 0 || !p.any_swa()) return 0;
  const int64_t rows = (p.n_swa + step - 1 + 31) / 32 * 32;  // n_swa, step <= 2^31: no overflow
  return rows < n_ctx ? rows : 0;
}

size_t kv_cache_bytes(const LlamaParams& p, int64_t first, int64_t last, int64_t n_ctx, DType cache_type,
                      int64_t ring_rows) {
  int64_t sliding = 0;
  for (int64_t il = first; il < last; ++il) sliding += ring_rows > 0 && p.is_swa(il) ? 1 : 0;
  const size_t full = kv_cache_bytes(p, last - first - sliding, n_ctx, cache_type);
  const size_t ring = kv_cache_bytes(p, sliding, ring_rows, cache_type);
  if (full > SIZE_MAX - ring) fail(ErrorKind::invalid_input, "model", "the KV cache size overflows");
  return full + ring;
}

size_t kv_cache_bytes(const LlamaParams& p, int64_t n_layers, int64_t n_ctx, DType cache_type) {
  check_cache_type(p, cache_type);
  // Every factor was checked against the file (weights exist with these
  // shapes) or bounded (n_ctx <= 2^24), but an overflow must still not wrap.
  // Bytes of one head's row (whole blocks), times 2 (K and V) and the rest.
  // With MLA one row (the latent and the rope key) serves as key and value.
  size_t bytes = (p.mla() ? 1 : 2) * row_bytes(cache_type, p.head_dim);
  for (int64_t f : {p.n_head_kv, n_layers, n_ctx})
    if (f < 0 || __builtin_mul_overflow(bytes, static_cast<size_t>(f), &bytes))
      fail(ErrorKind::invalid_input, "model", "the KV cache size overflows");
  return bytes;
}

}  // namespace weft::model
