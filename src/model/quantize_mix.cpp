// The per-tensor type policy of `weft quantize`: the decisions llama.cpp's
// quantizer makes (llama_tensor_get_type and its helpers in
// src/llama-quant.cpp, ggml-org/llama.cpp as of 2026) for llama-family models,
// restated for the mixes weft writes. Written from the facts of that code,
// not copied; docs/quantize-mixes.md lists the rules in prose.
#include <algorithm>
#include <array>
#include <cctype>
#include <numeric>
#include <string>

#include "weft/core/error.h"
#include "weft/model/quantize.h"

namespace weft::model {
namespace {

constexpr const char* kQuantizeMixWhere = "quantize";

constexpr std::array<QuantMixInfo, 19> kMixes = {{
    {QuantMix::F32, "F32", 0, DType::f32},
    {QuantMix::F16, "F16", 1, DType::f16},
    {QuantMix::BF16, "BF16", 32, DType::bf16},
    {QuantMix::Q4_0, "Q4_0", 2, DType::q4_0},
    {QuantMix::Q4_1, "Q4_1", 3, DType::q4_1},
    {QuantMix::Q5_0, "Q5_0", 8, DType::q5_0},
    {QuantMix::Q5_1, "Q5_1", 9, DType::q5_1},
    {QuantMix::Q8_0, "Q8_0", 7, DType::q8_0},
    {QuantMix::Q2_K, "Q2_K", 10, DType::q2_K},
    {QuantMix::Q3_K_S, "Q3_K_S", 11, DType::q3_K},
    {QuantMix::Q3_K_M, "Q3_K_M", 12, DType::q3_K},
    {QuantMix::Q3_K_L, "Q3_K_L", 13, DType::q3_K},
    {QuantMix::Q4_K_S, "Q4_K_S", 14, DType::q4_K},
    {QuantMix::Q4_K_M, "Q4_K_M", 15, DType::q4_K},
    {QuantMix::Q5_K_S, "Q5_K_S", 16, DType::q5_K},
    {QuantMix::Q5_K_M, "Q5_K_M", 17, DType::q5_K},
    {QuantMix::Q6_K, "Q6_K", 18, DType::q6_K},
    {QuantMix::IQ4_NL, "IQ4_NL", 25, DType::iq4_nl},
    {QuantMix::IQ4_XS, "IQ4_XS", 30, DType::iq4_xs},
}};

// What llama.cpp calls a tensor's category: decided by name alone, in this order.
enum class Cat { token_embd, attn_q, attn_v, attn_k, attn_qkv, attn_kv_b, attn_output, ffn_up, ffn_gate, ffn_down, output, other };

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

Cat category(const std::string& name) {
  if (name == "output.weight") return Cat::output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Cat::token_embd;
  if (has(name, "attn_qkv.weight")) return Cat::attn_qkv;
  if (has(name, "attn_kv_b.weight")) return Cat::attn_kv_b;
  if (has(name, "attn_v.weight")) return Cat::attn_v;
  if (has(name, "attn_k.weight")) return Cat::attn_k;
  if (has(name, "attn_q.weight")) return Cat::attn_q;
  if (has(name, "attn_output.weight")) return Cat::attn_output;
  if (has(name, "ffn_up")) return Cat::ffn_up;
  if (has(name, "ffn_gate")) return Cat::ffn_gate;
  if (has(name, "ffn_down")) return Cat::ffn_down;
  return Cat::other;
}

// The attention-value-like tensors llama.cpp treats alike (its counter of them
// drives the _M mixes).
bool is_attn_v(Cat c) { return c == Cat::attn_v || c == Cat::attn_qkv || c == Cat::attn_kv_b; }

// Dimensions as ggml counts them: trailing dims of 1 do not count.
int ggml_dims(const QuantTensorDesc& t) {
  for (int d = 3; d >= 1; --d)
    if (t.ne[d] > 1) return d + 1;
  return 1;
}

// Whether the mix may change this tensor at all (llama.cpp's
// tensor_allows_quantization, for the names a llama-family file can hold; the
// arch-specific exact names it also excludes, position and token-type
// embeddings, are not llama/qwen2 tensors).
bool allows_quantization(const QuantTensorDesc& t) {
  if (ggml_dims(t) < 2) return false;
  const std::string& n = t.name;
  // llama.cpp tests `rfind("weight") == size() - 6`, which a 5-character name
  // also passes (npos equals the wrapped subtraction); kept for equal results.
  bool q = n.size() == 5 || (n.size() >= 6 && n.compare(n.size() - 6, 6, "weight") == 0);
  static constexpr const char* kNever[] = {
      "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
      "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
      "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
      "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
      "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
      "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
      ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger",
      "a.rvq.codebook", "mm.a.code_embd"};
  for (const char* part : kNever) q = q && !has(n, part);
  return q;
}

// The layer number of "blk.N." names (llama.cpp reads it with sscanf), or -1.
int64_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  size_t i = 4;
  bool neg = false;
  if (i < name.size() && (name[i] == '-' || name[i] == '+')) neg = name[i++] == '-';
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  int64_t v = 0;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && v < (int64_t{1} << 40); ++i)
    v = v * 10 + (name[i] - '0');
  return neg ? -v : v;
}

// llama.cpp's order of decisions (its weights map's comparator): by layer
// number (-1 for tensors outside blocks, so those first), then by name.
bool decision_order(const QuantTensorDesc& a, const QuantTensorDesc& b) {
  const int64_t la = layer_of(a.name), lb = layer_of(b.name);
  return la != lb ? la < lb : a.name < b.name;
}

// The layers that get more bits in the _M mixes: the first and last eighth,
// and every third layer in between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

class Planner {
 public:
  Planner(const QuantModelFacts& f, std::span<const QuantTensorDesc> all, QuantMix mix, bool pure)
      : f_(f), mix_(mix), base_(quant_mix_info(mix).base), pure_(pure) {
    gqa_ = f.n_head_kv > 0 ? f.n_head / f.n_head_kv : 0;
    // LLM_TYPE_70B, the one model size the policy asks about: llama and qwen2
    // at 80 layers (llama only with grouped-query attention and without 8 experts).
    is_70b_ = f.n_layer == 80 &&
              (f.arch == "qwen2" || (f.arch == "llama" && f.n_expert != 8 && f.n_head != f.n_head_kv));
    for (const QuantTensorDesc& t : all) {
      const Cat c = category(t.name);
      if (is_attn_v(c)) ++n_attn_v_;
      if (c == Cat::output) tied_ = false;
    }
  }

  QuantTensorPlan plan(const QuantTensorDesc& t) {
    QuantTensorPlan p;
    if (!allows_quantization(t)) return p;
    p.keep = false;
    p.type = base_;
    if (!traits(base_).quantized) return p;  // F32/F16/BF16: every such tensor in that type
    if (!pure_) p.type = mixed_type(t, category(t.name));
    return fallback(t, p);
  }

 private:
  bool is(QuantMix m) const { return mix_ == m; }

  // llama_tensor_get_type_impl for the mixes weft writes.
  DType mixed_type(const QuantTensorDesc& t, Cat c) {
    DType type = base_;
    if (c == Cat::output || (tied_ && c == Cat::token_embd)) {
      // Also the token embedding when the output reuses it.
      if (t.ne[0] % traits(base_).block_size != 0) return DType::q8_0;
      return base_ == DType::q8_0 ? DType::q8_0 : DType::q6_K;
    }
    if (c == Cat::token_embd) return type;  // every mix here leaves it at the base type
    if (is_attn_v(c)) {
      if (is(QuantMix::Q2_K)) {
        type = gqa_ >= 4 ? DType::q4_K : DType::q3_K;
      } else if (is(QuantMix::Q3_K_M)) {
        type = i_attn_v_ < 2 ? DType::q5_K : DType::q4_K;
      } else if (is(QuantMix::Q3_K_L)) {
        type = DType::q5_K;
      } else if ((is(QuantMix::IQ4_NL) || is(QuantMix::IQ4_XS)) && gqa_ >= 4) {
        type = DType::q5_K;
      } else if ((is(QuantMix::Q4_K_M) || is(QuantMix::Q5_K_M)) && use_more_bits(i_attn_v_, n_attn_v_)) {
        type = DType::q6_K;
      } else if (is(QuantMix::Q4_K_S) && i_attn_v_ < 4) {
        type = DType::q5_K;
      }
      // A 70B model shares each attn_v among 8 heads: more bits cost little.
      if (is_70b_ && (type == DType::q3_K || type == DType::q4_K)) type = DType::q5_K;
      if (f_.n_expert == 8) type = DType::q8_0;
      ++i_attn_v_;
      return type;
    }
    if (c == Cat::attn_k) return f_.n_expert == 8 ? DType::q8_0 : type;
    if (c == Cat::ffn_down) {
      const int64_t il = layer(t, i_ffn_down_++);
      const int64_t n = f_.n_layer;
      if (is(QuantMix::Q2_K)) {
        type = DType::q3_K;
      } else if (is(QuantMix::Q3_K_M)) {
        type = il < n / 16 ? DType::q5_K : DType::q4_K;
      } else if (is(QuantMix::Q3_K_L)) {
        type = DType::q5_K;
      } else if (is(QuantMix::Q4_K_M)) {
        if (use_more_bits(il, n)) type = DType::q6_K;
      } else if (il < n / 8 && (is(QuantMix::IQ4_NL) || is(QuantMix::IQ4_XS))) {
        type = DType::q5_K;
      } else if (is(QuantMix::Q5_K_M) && use_more_bits(il, n)) {
        type = DType::q6_K;
      } else if (is(QuantMix::Q4_K_S) && il < n / 8) {
        type = DType::q5_K;
      }
      return type;
    }
    if (c == Cat::attn_output) {
      if (f_.n_expert == 8) {
        if (is(QuantMix::Q2_K) || is(QuantMix::Q3_K_S) || is(QuantMix::Q3_K_M) || is(QuantMix::IQ4_NL) ||
            is(QuantMix::Q4_K_S) || is(QuantMix::Q4_K_M) || is(QuantMix::IQ4_XS))
          type = DType::q5_K;
      } else if (is(QuantMix::Q2_K)) {
        type = DType::q3_K;
      } else if (is(QuantMix::Q3_K_M)) {
        type = DType::q4_K;
      } else if (is(QuantMix::Q3_K_L)) {
        type = DType::q5_K;
      }
      return type;
    }
    if (c == Cat::ffn_gate) layer(t, i_ffn_gate_++);  // only the IQ3 mixes change these; the
    if (c == Cat::ffn_up) layer(t, i_ffn_up_++);      // layer check still applies
    return type;
  }

  // The layer a feed-forward tensor belongs to: its running count in dense
  // models, its name's "blk.N." with experts (llama.cpp's layer_info).
  int64_t layer(const QuantTensorDesc& t, int64_t counter) const {
    if (f_.n_expert <= 1) return counter;
    const int64_t il = layer_of(t.name);
    if (il < 0 || il >= f_.n_layer)
      fail(ErrorKind::invalid_input, kQuantizeMixWhere,
           "tensor '" + t.name + "': no layer in [0, " + std::to_string(f_.n_layer) + ") in its name");
    return il;
  }

  // A row (ne[0]) that is not a whole number of the type's blocks: the
  // 256-value types fall back to a 32-value one, and a row that fits no
  // block at all to f16; the 32-value types have no fallback.
  static QuantTensorPlan fallback(const QuantTensorDesc& t, QuantTensorPlan p) {
    if (t.ne[0] % traits(p.type).block_size == 0) return p;
    DType to;
    switch (p.type) {
      case DType::iq4_xs: to = DType::iq4_nl; break;
      case DType::q2_K:
      case DType::q3_K: to = DType::q4_0; break;
      case DType::q4_K: to = DType::q5_0; break;
      case DType::q5_K: to = DType::q5_1; break;
      case DType::q6_K: to = DType::q8_0; break;
      default:
        fail(ErrorKind::invalid_input, kQuantizeMixWhere,
             "tensor '" + t.name + "': a row of " + std::to_string(t.ne[0]) + " values is not a multiple of " +
                 std::to_string(traits(p.type).block_size) + " (the " + std::string(dtype_name(p.type)) +
                 " block) and " + std::string(dtype_name(p.type)) + " has no fallback type");
    }
    if (t.ne[0] % traits(to).block_size != 0) to = DType::f16;
    p.type = to;
    p.fallback = true;
    return p;
  }

  const QuantModelFacts& f_;
  QuantMix mix_;
  DType base_;
  bool pure_;
  int64_t gqa_ = 0;
  bool is_70b_ = false;
  bool tied_ = true;  // until an output.weight is seen
  int64_t n_attn_v_ = 0;
  int64_t i_attn_v_ = 0, i_ffn_down_ = 0, i_ffn_gate_ = 0, i_ffn_up_ = 0;
};

}  // namespace

std::span<const QuantMixInfo> quant_mixes() { return kMixes; }

const QuantMixInfo& quant_mix_info(QuantMix mix) {
  for (const QuantMixInfo& m : kMixes)
    if (m.mix == mix) return m;
  fail(ErrorKind::internal, kQuantizeMixWhere, "unknown mix " + std::to_string(static_cast<int>(mix)));
}

std::optional<QuantMix> quant_mix_from_name(std::string_view name) {
  std::string up(name);
  for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (up == "Q3_K") up = "Q3_K_M";
  if (up == "Q4_K") up = "Q4_K_M";
  if (up == "Q5_K") up = "Q5_K_M";
  for (const QuantMixInfo& m : kMixes)
    if (m.name == up) return m.mix;
  return std::nullopt;
}

std::vector<QuantTensorPlan> plan_quant_types(const QuantModelFacts& facts, std::span<const QuantTensorDesc> tensors,
                                              QuantMix mix, bool pure) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return decision_order(tensors[a], tensors[b]); });
  Planner planner(facts, tensors, mix, pure);
  std::vector<QuantTensorPlan> plans(tensors.size());
  for (size_t i : order) plans[i] = planner.plan(tensors[i]);
  return plans;
}

}  // namespace weft::model
