// LlamaParams: hyperparameters of a llama-family GGUF file.
#include <optional>
#include <string>

#include "weft/core/error.h"
#include "weft/model/model.h"

namespace weft::model {
namespace {

constexpr const char* kWhere = "model";

int64_t require_positive(const GgufFile& f, const std::string& key) {
  std::optional<int64_t> v = f.get_i64(key);
  if (!v) fail(ErrorKind::invalid_input, kWhere, f.path() + ": missing key " + key);
  if (*v <= 0 || *v > (int64_t{1} << 31))
    fail(ErrorKind::invalid_input, kWhere, f.path() + ": key " + key + " = " + std::to_string(*v) + " is out of range");
  return *v;
}

// n_expert and n_expert_used: both 0 (keys absent or 0) for a dense model;
// otherwise 0 < used <= count. Errors name the key at fault.
void read_experts(const GgufFile& f, const std::string& pre, LlamaParams& p) {
  const std::string count_key = pre + "expert_count", used_key = pre + "expert_used_count";
  const int64_t count = f.get_i64(count_key).value_or(0);
  const std::optional<int64_t> used = f.get_i64(used_key);
  if (count < 0 || count > (int64_t{1} << 31))
    fail(ErrorKind::invalid_input, kWhere,
         f.path() + ": key " + count_key + " = " + std::to_string(count) + " is out of range");
  if (count == 0) {
    if (used.value_or(0) != 0)
      fail(ErrorKind::invalid_input, kWhere,
           f.path() + ": key " + used_key + " = " + std::to_string(*used) + " in a model without " + count_key);
    return;
  }
  if (!used) fail(ErrorKind::invalid_input, kWhere, f.path() + ": missing key " + used_key);
  if (*used <= 0 || *used > count)
    fail(ErrorKind::invalid_input, kWhere,
         f.path() + ": key " + used_key + " = " + std::to_string(*used) + " is outside [1, " + count_key + " = " +
             std::to_string(count) + "]");
  p.n_expert = count;
  p.n_expert_used = *used;
}

}  // namespace

LlamaParams LlamaParams::from_gguf(const GgufFile& f) {
  LlamaParams p;
  std::optional<std::string> arch = f.get_string("general.architecture");
  if (!arch) fail(ErrorKind::invalid_input, kWhere, f.path() + ": missing key general.architecture");
  if (*arch == "llama") {
    p.arch = Arch::llama;
  } else if (*arch == "qwen2") {
    p.arch = Arch::qwen2;
  } else {
    fail(ErrorKind::invalid_input, kWhere, f.path() + ": general.architecture '" + *arch + "' is not llama or qwen2");
  }
  p.arch_name = *arch;
  const std::string pre = *arch + ".";
  p.n_embd = require_positive(f, pre + "embedding_length");
  p.n_layer = require_positive(f, pre + "block_count");
  if (static_cast<uint64_t>(p.n_layer) > f.tensors().size())  // every layer has several tensors
    fail(ErrorKind::invalid_input, kWhere,
         f.path() + ": key " + pre + "block_count = " + std::to_string(p.n_layer) + " exceeds the file's " +
             std::to_string(f.tensors().size()) + " tensors");
  p.n_ff = require_positive(f, pre + "feed_forward_length");
  p.n_head = require_positive(f, pre + "attention.head_count");
  p.n_head_kv = f.has(pre + "attention.head_count_kv") ? require_positive(f, pre + "attention.head_count_kv") : p.n_head;
  p.n_ctx_train = require_positive(f, pre + "context_length");
  std::optional<float> eps = f.get_f32(pre + "attention.layer_norm_rms_epsilon");
  if (!eps) fail(ErrorKind::invalid_input, kWhere, f.path() + ": missing key " + pre + "attention.layer_norm_rms_epsilon");
  if (!(*eps > 0)) fail(ErrorKind::invalid_input, kWhere, f.path() + ": " + pre + "attention.layer_norm_rms_epsilon must be > 0");
  p.rms_eps = *eps;
  p.rope_base = f.get_f32(pre + "rope.freq_base").value_or(10000.f);
  if (!(p.rope_base > 0)) fail(ErrorKind::invalid_input, kWhere, f.path() + ": " + pre + "rope.freq_base must be > 0");
  read_experts(f, pre, p);

  if (p.n_embd % p.n_head != 0 || p.n_head % p.n_head_kv != 0)
    fail(ErrorKind::invalid_input, kWhere,
         f.path() + ": embedding_length " + std::to_string(p.n_embd) + ", head_count " + std::to_string(p.n_head) +
             " and head_count_kv " + std::to_string(p.n_head_kv) + " do not divide");
  p.head_dim = p.n_embd / p.n_head;
  p.n_rot = f.has(pre + "rope.dimension_count") ? require_positive(f, pre + "rope.dimension_count") : p.head_dim;
  if (p.n_rot % 2 != 0 || p.n_rot > p.head_dim)
    fail(ErrorKind::invalid_input, kWhere,
         f.path() + ": rope.dimension_count " + std::to_string(p.n_rot) + " must be even and <= head_dim " +
             std::to_string(p.head_dim));

  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) fail(ErrorKind::invalid_input, kWhere, f.path() + ": missing tensor token_embd.weight");
  if (embd->n_dims != 2 || embd->ne[0] != p.n_embd)
    fail(ErrorKind::invalid_input, kWhere,
         f.path() + ": tensor token_embd.weight must be [" + std::to_string(p.n_embd) + ", n_vocab]");
  p.n_vocab = embd->ne[1];
  return p;
}

}  // namespace weft::model
