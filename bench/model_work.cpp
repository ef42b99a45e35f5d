#include "model_work.h"

#include <algorithm>
#include <string>

#include "weft/core/error.h"
#include "weft/model/model.h"

namespace weft::bench {
namespace {

// The layer of a "blk.N.*" tensor, or -1 for any other name.
int64_t layer_of(const std::string& name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  int64_t layer = 0;
  size_t i = kPrefix.size();
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) {
    layer = layer * 10 + (name[i] - '0');
    if (layer > (int64_t{1} << 30)) return -1;  // no model has that many layers
  }
  return i < name.size() && name[i] == '.' ? layer : -1;
}

double elements(const GgufTensorInfo& t) {
  double n = 1;
  for (int d = 0; d < t.n_dims; ++d) n *= static_cast<double>(t.ne[d]);
  return n;
}

// Visible positions summed over tokens 0..n-1 of a batch from position 0:
// token i sees min(i + 1, window) positions.
double visible_pairs(int64_t n, int64_t window) {
  if (window <= 0 || window >= n) return static_cast<double>(n) * static_cast<double>(n + 1) / 2;
  const double w = static_cast<double>(window);
  return w * (w + 1) / 2 + static_cast<double>(n - window) * w;
}

}  // namespace

ModelWork model_work(const GgufFile& file, const LoadPlan& plan) {
  if (plan.devices.empty() || plan.n_ctx <= 0) fail(ErrorKind::invalid_input, "bench model", "an empty plan");
  const model::LlamaParams p = model::LlamaParams::from_gguf(file);
  const model::PartPlan& host = plan.devices.front().part;
  const GgufTensorInfo* output = file.find_tensor("output.weight");
  const GgufTensorInfo* embd = file.find_tensor("token_embd.weight");

  ModelWork w;
  w.host_layers = host.last_layer - host.first_layer;
  w.host_output = plan.devices.size() == 1 || output == nullptr;  // a tied output runs beside the embedding
  const double expert_share =
      p.n_expert > 0 ? static_cast<double>(p.n_expert_used) / static_cast<double>(p.n_expert) : 1.0;
  for (const GgufTensorInfo& t : file.tensors()) {
    const int64_t layer = layer_of(t.name);
    if (layer < host.first_layer || layer >= host.last_layer) continue;
    const double share = t.name.find("_exps.") != std::string::npos ? expert_share : 1.0;
    w.layer_weight_bytes += static_cast<double>(t.nbytes) * share;
    if (t.n_dims >= 2) w.layer_matmul_params += elements(t) * share;
  }
  if (embd != nullptr && embd->ne[1] > 0)
    w.embd_row_bytes = static_cast<double>(embd->nbytes) / static_cast<double>(embd->ne[1]);
  if (w.host_output) {
    const GgufTensorInfo* out = output != nullptr ? output : embd;
    if (out != nullptr) {
      w.output_weight_bytes += static_cast<double>(out->nbytes);
      w.output_matmul_params = elements(*out);
    }
    if (const GgufTensorInfo* norm = file.find_tensor("output_norm.weight"))
      w.output_weight_bytes += static_cast<double>(norm->nbytes);
  }
  w.kv_bytes_per_position = static_cast<double>(host.kv_cache_bytes) / static_cast<double>(plan.n_ctx);
  w.attn_width = p.n_head * p.head_dim;
  for (int64_t il = host.first_layer; il < host.last_layer; ++il) w.windows.push_back(p.is_swa(il) ? p.n_swa : 0);
  return w;
}

double decode_bytes(const ModelWork& w, int64_t n_kv) {
  double kv_rows = 0;  // rows summed over layers
  for (int64_t window : w.windows) kv_rows += static_cast<double>(window > 0 ? std::min(n_kv, window) : n_kv);
  const double row_bytes = w.windows.empty() ? 0 : w.kv_bytes_per_position / static_cast<double>(w.windows.size());
  return w.layer_weight_bytes + w.output_weight_bytes + w.embd_row_bytes + kv_rows * row_bytes;
}

double prompt_flops(const ModelWork& w, int64_t n) {
  double pairs = 0;
  for (int64_t window : w.windows) pairs += visible_pairs(n, window);
  return 2 * (w.layer_matmul_params * static_cast<double>(n) + w.output_matmul_params) +
         4 * static_cast<double>(w.attn_width) * pairs;
}

}  // namespace weft::bench
