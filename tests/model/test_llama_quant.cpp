// A llama whose weights mix every quantized type, against the float64
// forward pass of tests/model/llama_reference.h fed the weights decoded by
// the conformance suite's own decoders: each block type loads from GGUF,
// feeds get_rows (the embedding) and the products (8-bit activations), on
// one CPU and split over the CPU and a worker on loopback.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "model/llama_reference.h"
#include "weft/backend/cpu.h"
#include "weft/backend/sched.h"
#include "weft/core/dtype.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/rpc/client.h"
#include "weft/rpc/worker.h"

namespace {

using llama_reference::TempFile;
using weft::DType;

// Rows of 256 values so the 256-value types fit every product.
constexpr int64_t kQuantVocab = 64, kQuantDim = 256, kQuantLayers = 2, kQuantHeads = 4, kQuantHeadsKv = 2,
                  kQuantFf = 512;
constexpr int64_t kQuantHeadDim = kQuantDim / kQuantHeads;

// The product weights take these types in turn (the 14 matrices of two
// layers plus the output cover all 12 at least once); the embedding is q4_K.
constexpr DType kRotation[] = {DType::q4_K, DType::q6_K,  DType::q5_K, DType::q3_K, DType::q2_K,
                               DType::iq4_xs, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0,
                               DType::q5_1, DType::iq4_nl};

struct MixedModel {
  llama_reference::Shape shape{"llama", kQuantVocab, kQuantDim, kQuantLayers, kQuantHeads, kQuantHeadsKv, kQuantFf};
  llama_reference::RefTensors t;
  std::vector<DType> used;

  MixedModel(int /*spec*/, const std::string& path) {
    std::mt19937 rng(99);
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    size_t next = 0;
    auto add = [&](const std::string& name, std::vector<int64_t> ne, bool norm, DType type) {
      int64_t n = 1;
      for (int64_t d : ne) n *= d;
      std::vector<float> f(static_cast<size_t>(n));
      for (float& x : f) x = norm ? 1.0f + 0.5f * u(rng) : u(rng);
      t[name] = llama_reference::make_tensor(std::move(ne), f, type);
      if (weft::traits(type).quantized) used.push_back(type);
    };
    auto weight = [&](const std::string& name, std::vector<int64_t> ne) {
      add(name, std::move(ne), false, kRotation[next++ % std::size(kRotation)]);
    };
    add("token_embd.weight", {kQuantDim, kQuantVocab}, false, DType::q4_K);
    add("output_norm.weight", {kQuantDim}, true, DType::f32);
    for (int64_t i = 0; i < kQuantLayers; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      add(b + "attn_norm.weight", {kQuantDim}, true, DType::f32);
      weight(b + "attn_q.weight", {kQuantDim, kQuantHeads * kQuantHeadDim});
      weight(b + "attn_k.weight", {kQuantDim, kQuantHeadsKv * kQuantHeadDim});
      weight(b + "attn_v.weight", {kQuantDim, kQuantHeadsKv * kQuantHeadDim});
      weight(b + "attn_output.weight", {kQuantHeads * kQuantHeadDim, kQuantDim});
      add(b + "ffn_norm.weight", {kQuantDim}, true, DType::f32);
      weight(b + "ffn_gate.weight", {kQuantDim, kQuantFf});
      weight(b + "ffn_up.weight", {kQuantDim, kQuantFf});
      weight(b + "ffn_down.weight", {kQuantFf, kQuantDim});
    }
    weight("output.weight", {kQuantDim, kQuantVocab});
    llama_reference::write_model(path, shape, t);
  }

  const std::vector<double>& v(const std::string& name) const { return t.at(name).v; }

  std::vector<std::vector<double>> forward(const std::vector<int32_t>& tokens) const {
    return llama_reference::forward(shape, t, tokens, [&](int64_t l, const std::vector<double>& h) {
      const std::string b = "blk." + std::to_string(l) + ".";
      auto g = llama_reference::matvec(v(b + "ffn_gate.weight"), h, kQuantFf);
      llama_reference::swiglu(g, llama_reference::matvec(v(b + "ffn_up.weight"), h, kQuantFf));
      return llama_reference::matvec(v(b + "ffn_down.weight"), g, kQuantDim);
    });
  }
};

// The products round activations to 8 bits (docs/quantization.md): about
// d^2 / (12 E[x^2]) ~ 1e-5 normalized per product for these activations,
// compounded over 2 layers and the output; measured 6.3e-4 here. 3e-3 keeps
// a margin and still fails on any wrongly decoded block (errors of order 1).
TEST(LlamaQuant, EveryTypeMatchesReference) {
  llama_reference::check_against_reference<MixedModel>(
      0, "llama_mixed_quant", 3e-3,
      [](const MixedModel& m, const llama_reference::CachedRun&, const std::vector<std::vector<double>>&) {
        for (DType t : kRotation) EXPECT_NE(std::find(m.used.begin(), m.used.end(), t), m.used.end());
      });
}

// The same file split after layer 1 over this CPU and a worker on loopback
// gives the CPU's logits exactly (the worker runs the same kernels).
TEST(LlamaQuant, SplitOverWorkerMatchesCpu) {
  TempFile f("llama_mixed_split");
  MixedModel tiny(0, f.path);
  auto file = weft::GgufFile::open(f.path);
  const std::vector<int32_t> tokens = {1, 7, 22, 36, 5};

  auto cpu = weft::make_cpu_device(2);
  std::vector<float> local;
  {
    weft::Executor m(*file, *cpu, 16);
    local = m.eval(tokens, 0);
  }

  auto worker_cpu = weft::make_cpu_device(1);
  weft::rpc::WorkerOptions o;
  o.log = false;
  weft::rpc::Worker worker(std::vector<weft::Device*>{worker_cpu.get()}, o);
  worker.start();
  auto remote = weft::make_rpc_devices("127.0.0.1:" + std::to_string(worker.port()));
  std::vector<weft::LayerPlacement> placement = {{cpu.get(), 0, 1}, {remote.at(0).get(), 1, kQuantLayers}};
  weft::Executor m(*file, placement, 16);
  const std::vector<float> split = m.eval(tokens, 0);
  ASSERT_EQ(split.size(), local.size());
  for (size_t i = 0; i < local.size(); ++i) ASSERT_EQ(split[i], local[i]) << "logit " << i;
}

}  // namespace
