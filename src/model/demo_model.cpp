// write_demo_model: deterministic random weights, scaled so activations stay
// near unit size through the layers (uniform with variance 1 / n_in).
#include "model/demo_model.h"

#include <cmath>
#include <string>
#include <vector>

#include "weft/dtype.h"
#include "weft/error.h"
#include "weft/gguf.h"

namespace weft::model {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1) from 24 random bits: exact in float, the same everywhere.
float uniform(uint64_t& state) {
  return static_cast<float>(splitmix64(state) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

struct Writer {
  GgufWriter gguf;
  uint64_t seed;
  std::vector<std::vector<uint8_t>> data;  // kept alive until write()

  // A matrix [n_in, n_out] (n_in fastest) in q8_0, or a norm vector [n] in f32.
  void add(const std::string& name, std::vector<int64_t> ne, bool norm) {
    uint64_t state = seed ^ (0xD1B54A32D192ED03ull * (data.size() + 1));
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::vector<float> f(static_cast<size_t>(n));
    const float scale = norm ? 0.1f : std::sqrt(3.0f / static_cast<float>(ne[0]));
    for (float& x : f) x = norm ? 1.0f + scale * uniform(state) : scale * uniform(state);
    const DType type = norm ? DType::f32 : DType::q8_0;
    std::vector<uint8_t> bytes(row_bytes(type, n));
    from_f32(type, f.data(), bytes.data(), n);
    data.push_back(std::move(bytes));
    gguf.add_tensor(name, type, ne, data.back().data());
  }
};

}  // namespace

int64_t demo_model_params(const DemoModelSpec& s) {
  const int64_t head_dim = s.n_embd / s.n_head;
  const int64_t q = s.n_embd * head_dim * s.n_head, kv = s.n_embd * head_dim * s.n_head_kv;
  const int64_t layer = 2 * s.n_embd + q + 2 * kv + q + 3 * s.n_embd * s.n_ff;
  return s.n_vocab * s.n_embd * (s.tied ? 1 : 2) + s.n_embd + s.n_layer * layer;
}

void write_demo_model(const std::string& path, const DemoModelSpec& s) {
  if (s.n_head <= 0 || s.n_head_kv <= 0 || s.n_embd % s.n_head != 0 || s.n_head % s.n_head_kv != 0 ||
      s.n_embd % 32 != 0 || s.n_ff % 32 != 0 || s.n_layer <= 0 || s.n_vocab <= 0)
    fail(ErrorKind::invalid_input, "demo model",
         "spec n_embd " + std::to_string(s.n_embd) + ", n_head " + std::to_string(s.n_head) + ", n_head_kv " +
             std::to_string(s.n_head_kv) + ", n_ff " + std::to_string(s.n_ff) + " is not a valid llama shape");
  const int64_t head_dim = s.n_embd / s.n_head;
  Writer w{GgufWriter{}, s.seed, {}};
  w.data.reserve(static_cast<size_t>(3 + 9 * s.n_layer));  // pointers into it must stay valid
  GgufWriter& g = w.gguf;
  g.set_string("general.architecture", "llama");
  g.set_string("general.name", "weft demo llama (random weights)");
  g.set_u32("llama.context_length", static_cast<uint32_t>(s.n_ctx));
  g.set_u32("llama.embedding_length", static_cast<uint32_t>(s.n_embd));
  g.set_u32("llama.block_count", static_cast<uint32_t>(s.n_layer));
  g.set_u32("llama.feed_forward_length", static_cast<uint32_t>(s.n_ff));
  g.set_u32("llama.attention.head_count", static_cast<uint32_t>(s.n_head));
  g.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  g.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  g.set_f32("llama.rope.freq_base", 10000.f);

  w.add("token_embd.weight", {s.n_embd, s.n_vocab}, false);
  w.add("output_norm.weight", {s.n_embd}, true);
  if (!s.tied) w.add("output.weight", {s.n_embd, s.n_vocab}, false);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    w.add(b + "attn_norm.weight", {s.n_embd}, true);
    w.add(b + "attn_q.weight", {s.n_embd, head_dim * s.n_head}, false);
    w.add(b + "attn_k.weight", {s.n_embd, head_dim * s.n_head_kv}, false);
    w.add(b + "attn_v.weight", {s.n_embd, head_dim * s.n_head_kv}, false);
    w.add(b + "attn_output.weight", {head_dim * s.n_head, s.n_embd}, false);
    w.add(b + "ffn_norm.weight", {s.n_embd}, true);
    w.add(b + "ffn_gate.weight", {s.n_embd, s.n_ff}, false);
    w.add(b + "ffn_up.weight", {s.n_embd, s.n_ff}, false);
    w.add(b + "ffn_down.weight", {s.n_ff, s.n_embd}, false);
  }
  g.write(path);
}

}  // namespace weft::model
