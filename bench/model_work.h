// What one forward pass of a llama-family model asks of this host: the bytes
// a generated token reads and the flops a prompt computes, over the share of
// the model this host holds. `weft bench model` divides them by the measured
// times and compares the rates with the machine's limits.
//
//   auto file = GgufFile::open(path);
//   const ModelWork w = model_work(*file, plan);          // plan: Session::plan()
//   double bytes = decode_bytes(w, 64);                    // the token at position 63
//   double flops = prompt_flops(w, 512);                   // 512 tokens from position 0
//
// Only the host's share counts: the layers of plan.devices[0], the token
// embedding row (device 0 looks it up), and the output matrix when the host
// runs it (one device, or an output tied to the embedding). Expert tensors of
// a mixture-of-experts layer count n_expert_used / n_expert of their size,
// what one token uses. The counts are of useful work: attention over
// positions [0, p] of a causal mask (within a sliding window where a layer
// has one), not the masked rows the graph also reads.
#pragma once

#include <cstdint>
#include <vector>

#include "weft/gguf/gguf.h"
#include "weft/runtime/session.h"

namespace weft::bench {

struct ModelWork {
  int64_t host_layers = 0;           // layers of this host's share
  bool host_output = false;          // whether this host runs the output product
  double layer_weight_bytes = 0;     // every tensor of the host's layers (experts scaled)
  double output_weight_bytes = 0;    // output matrix and norm, when host_output
  double embd_row_bytes = 0;         // one row of the token embedding
  double layer_matmul_params = 0;    // weights multiplied per token by the host's layers' matrices
  double output_matmul_params = 0;   // the output matrix's, when host_output
  double kv_bytes_per_position = 0;  // K and V bytes of one position over the host's layers (from the plan)
  int64_t attn_width = 0;            // n_head * head_dim: the q . k and p . v products per kv row
  std::vector<int64_t> windows;      // per host layer: its sliding window, 0 for none
};

// From the tensor table of the file the plan was made for. Throws
// Error(invalid_input) for a plan without devices.
ModelWork model_work(const GgufFile& file, const LoadPlan& plan);

// Bytes one token reads when it attends over n_kv positions (its own
// included): the weights of model_work and n_kv rows of the KV cache per
// layer (at most the layer's window).
double decode_bytes(const ModelWork& w, int64_t n_kv);

// Flops of n tokens evaluated as one batch from position 0, the last
// token's logits only (LogitRows::last, as llama-bench's pp): 2 per weight
// multiply-add per token in the layers and once in the output matrix, and
// 4 * attn_width per (token, visible position) pair for q . k and p . v in
// each host layer.
double prompt_flops(const ModelWork& w, int64_t n);

}  // namespace weft::bench
