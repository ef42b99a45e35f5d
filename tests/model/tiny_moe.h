// A tiny mixture-of-experts llama model (Mixtral layout) written with
// random weights, and its float64 forward pass with the routing written from
// FACTS.md (softmax over all experts, the top expert_used_count, their
// weights renormalized to sum to 1, the weighted sum of their SwiGLU
// outputs): what test_llama_moe.cpp and test_experts_split.cpp check
// LlamaModel against.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/llama_reference.h"
#include "weft/core/tensor.h"

namespace tiny_moe {

using weft::DType;

constexpr int64_t kVocab = 37, kDim = 32, kLayers = 2, kHeads = 4, kHeadsKv = 2, kFf = 64;
constexpr int64_t kExperts = 4, kUsed = 2;

struct MoeSpec {
  bool q8 = false;         // every matrix q8_0 (all have rows of 32k values), a separate output
  int64_t used = kUsed;    // expert_used_count as written
  bool write_used = true;  // false: leave expert_used_count out
  std::string drop = {};   // a tensor to leave out
  std::string bad = {};    // a tensor written with one expert too few
};

struct TinyMoe {
  MoeSpec spec;
  llama_reference::Shape shape{"llama", kVocab, kDim, kLayers, kHeads, kHeadsKv, kFf};
  llama_reference::RefTensors t;
  // Over every token and layer of forward(): the smallest gap between the
  // probabilities of the last expert kept and the first dropped, and the
  // distinct sets of experts chosen.
  mutable double min_gap = INFINITY;
  mutable std::set<std::vector<int>> routes;
  // Every routing forward() made, in order: (layer, the experts chosen).
  mutable std::vector<std::pair<int64_t, std::vector<int>>> choices;

  TinyMoe(const MoeSpec& s, const std::string& path) : spec(s) {
    std::mt19937 rng(4321);
    std::uniform_real_distribution<float> u(-0.2f, 0.2f);
    auto add = [&](const std::string& name, std::vector<int64_t> ne, bool norm, float scale = 1.0f) {
      const int64_t n = std::accumulate(ne.begin(), ne.end(), int64_t{1}, std::multiplies<>());
      std::vector<float> f(static_cast<size_t>(n));
      for (float& x : f) x = norm ? 1.0f + 0.5f * u(rng) : scale * u(rng);
      const DType type = spec.q8 && !norm ? DType::q8_0 : DType::f32;
      t[name] = llama_reference::make_tensor(std::move(ne), f, type);
    };
    add("token_embd.weight", {kDim, kVocab}, false);
    add("output_norm.weight", {kDim}, true);
    if (spec.q8) add("output.weight", {kDim, kVocab}, false);
    // Each layer's tensors: name, shape, a norm (values near 1) or not, scale.
    struct Entry {
      const char* name;
      std::vector<int64_t> ne;
      bool norm = false;
      float scale = 1.0f;
    };
    const int64_t q_dim = kDim, kv_dim = kDim / kHeads * kHeadsKv;
    const Entry layer[] = {
        {"attn_norm.weight", {kDim}, true},
        {"attn_q.weight", {kDim, q_dim}},
        {"attn_k.weight", {kDim, kv_dim}},
        {"attn_v.weight", {kDim, kv_dim}},
        {"attn_output.weight", {q_dim, kDim}},
        {"ffn_norm.weight", {kDim}, true},
        {"ffn_gate_inp.weight", {kDim, kExperts}, false, 5.0f},  // router logits of order 1
        {"ffn_gate_exps.weight", {kDim, kFf, kExperts}},
        {"ffn_up_exps.weight", {kDim, kFf, kExperts}},
        {"ffn_down_exps.weight", {kFf, kDim, kExperts}},
    };
    for (int64_t i = 0; i < kLayers; ++i)
      for (const Entry& e : layer) add("blk." + std::to_string(i) + "." + e.name, e.ne, e.norm, e.scale);
    if (!spec.bad.empty()) {
      llama_reference::RefTensor& r = t.at(spec.bad);
      r.ne.back() -= 1;
      r.bytes.resize(r.bytes.size() / static_cast<size_t>(kExperts) * static_cast<size_t>(kExperts - 1));
    }
    if (!spec.drop.empty()) t.erase(spec.drop);
    llama_reference::write_model(path, shape, t, [&](weft::GgufWriter& w) {
      w.set_u32("llama.expert_count", kExperts);
      if (spec.write_used) w.set_i32("llama.expert_used_count", static_cast<int32_t>(spec.used));
    });
  }

  const std::vector<double>& v(const std::string& name) const { return t.at(name).v; }

  // The routed feed-forward of layer l for the normalized input h.
  std::vector<double> moe(int64_t l, const std::vector<double>& h) const {
    const std::string b = "blk." + std::to_string(l) + ".";
    std::vector<double> p = llama_reference::matvec(v(b + "ffn_gate_inp.weight"), h, kExperts);
    const double mx = *std::max_element(p.begin(), p.end());
    double z = 0;
    for (double& x : p) z += (x = std::exp(x - mx));
    for (double& x : p) x /= z;  // softmax over all experts
    std::vector<int> order(kExperts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int c) { return p[a] > p[c]; });
    if (kUsed < kExperts) min_gap = std::min(min_gap, p[order[kUsed - 1]] - p[order[kUsed]]);
    std::vector<int> chosen(order.begin(), order.begin() + kUsed);
    std::sort(chosen.begin(), chosen.end());
    routes.insert(chosen);
    choices.emplace_back(l, chosen);
    double kept = 0;
    for (int64_t j = 0; j < kUsed; ++j) kept += p[order[j]];
    std::vector<double> out(kDim, 0.0);
    const size_t up_size = kDim * kFf, down_size = kFf * kDim;
    for (int64_t j = 0; j < kUsed; ++j) {
      const size_t e = static_cast<size_t>(order[j]);
      const std::span<const double> gate(v(b + "ffn_gate_exps.weight")), up(v(b + "ffn_up_exps.weight")),
          down(v(b + "ffn_down_exps.weight"));
      auto g = llama_reference::matvec(gate.subspan(e * up_size, up_size), h, kFf);
      llama_reference::swiglu(g, llama_reference::matvec(up.subspan(e * up_size, up_size), h, kFf));
      const auto y = llama_reference::matvec(down.subspan(e * down_size, down_size), g, kDim);
      const double w = p[e] / kept;  // renormalized over the kept experts
      for (int64_t c = 0; c < kDim; ++c) out[c] += w * y[c];
    }
    return out;
  }

  std::vector<std::vector<double>> forward(const std::vector<int32_t>& tokens) const {
    return llama_reference::forward(shape, t, tokens,
                                    [&](int64_t l, const std::vector<double>& h) { return moe(l, h); });
  }
};

}  // namespace tiny_moe
