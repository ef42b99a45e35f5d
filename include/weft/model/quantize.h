// `weft quantize`: a GGUF model in f32/f16/bf16 (or, when allowed, already
// quantized) rewritten as one of the standard quantization mixes, each tensor
// in the type llama.cpp's quantizer (`llama-quantize`, src/llama-quant.cpp)
// gives it for llama-family models, so the same input gives a file with the
// same tensor types (docs/quantization.md, "`weft quantize` and the mixes").
//
//   weft::model::QuantizeOptions o;
//   o.mix = *weft::model::quant_mix_from_name("Q4_K_M");
//   o.threads = 8;
//   weft::model::QuantizeStats s = weft::model::quantize_file("f16.gguf", "q4km.gguf", o);
//
// Two layers: the type policy (plan_quant_types: names, shapes and a few model
// facts in, one type per tensor out; no data) and the file rewrite
// (quantize_file: reads through the mapping, converts rows on a thread pool,
// streams the output through a temporary file renamed into place at the end).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/dtype.h"
#include "weft/gguf/gguf.h"

namespace weft::model {

// The mixes, with llama.cpp's LLAMA_FTYPE_* id of each (general.file_type).
enum class QuantMix : uint8_t {
  F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L,
  Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, IQ4_NL, IQ4_XS,
};

struct QuantMixInfo {
  QuantMix mix;
  std::string_view name;  // "Q4_K_M"
  uint32_t ftype;         // LLAMA_FTYPE_MOSTLY_Q4_K_M = 15
  DType base;             // the type most tensors get (q4_K)
};

std::span<const QuantMixInfo> quant_mixes();
const QuantMixInfo& quant_mix_info(QuantMix mix);
// Case-insensitive; also llama-quantize's aliases Q3_K, Q4_K, Q5_K (the _M mixes).
std::optional<QuantMix> quant_mix_from_name(std::string_view name);

// What the policy needs to know of the model (from its GGUF metadata).
struct QuantModelFacts {
  std::string arch;       // general.architecture: "llama" or "qwen2"
  int64_t n_layer = 0;    // block_count
  int64_t n_head = 0;     // attention.head_count (layer 0's when per layer)
  int64_t n_head_kv = 0;  // attention.head_count_kv (default n_head)
  int64_t n_expert = 0;   // expert_count (0: dense)
};

// Reads the facts; throws Error(unsupported) for an architecture other than
// llama or qwen2 and Error(invalid_input) for a missing or bad block_count.
QuantModelFacts quant_model_facts(const GgufFile& f);

// One tensor as the policy sees it: ne[d] for d >= n_dims is 1.
struct QuantTensorDesc {
  std::string name;
  int64_t ne[4] = {1, 1, 1, 1};
};

struct QuantTensorPlan {
  bool keep = true;       // not a tensor the mix quantizes: copied as it is
  DType type = DType::f32;  // when !keep, the type to write
  bool fallback = false;  // the mix's type did not fit ne[0]; a fallback was chosen
};

// The type of every tensor, in the order given (decisions are made in
// llama.cpp's order: by layer, then by name, which its per-layer counters
// depend on). pure: every quantized tensor gets the mix's base type (the
// fallback for rows that do not fit still applies). Throws Error(invalid_input)
// naming the tensor when its row fits neither the chosen type nor a fallback,
// or when a mixture-of-experts tensor's name has no layer in [0, n_layer).
std::vector<QuantTensorPlan> plan_quant_types(const QuantModelFacts& facts, std::span<const QuantTensorDesc> tensors,
                                              QuantMix mix, bool pure = false);

struct QuantizeOptions {
  QuantMix mix = QuantMix::Q8_0;
  bool pure = false;
  bool allow_requantize = false;  // accept quantized input tensors that must change type
  int threads = 0;                // 0: hardware threads
  // Checked often (between groups of rows); once true, quantize_file stops,
  // removes its temporary file and throws Error(disconnected) "cancelled",
  // as a backend's compute does. Must outlive the call.
  const std::atomic<bool>* cancel = nullptr;
  // Called on the calling thread after each tensor and every few MiB of
  // output: weights done so far, all weights, the tensor being written.
  std::function<void(int64_t done, int64_t total, const std::string& tensor)> progress;
  // Nonzero limits write a split model (GgufWriter::write_split): out_path
  // less a ".gguf" ending is the PREFIX of the parts PREFIX-00001-of-0000N.gguf
  // (model.gguf gives model-00001-of-00003.gguf, ...).
  GgufSplitLimits split;
};

struct QuantizeStats {
  uint64_t in_bytes = 0;            // input file size (all parts of a split model)
  uint64_t out_bytes = 0;           // output file size (all parts)
  std::vector<std::string> out_paths;  // the files written: out_path, or the parts
  int64_t n_tensors = 0;
  int64_t n_converted = 0;          // tensors whose type changed
  int64_t n_fallback = 0;           // of those, tensors given a fallback type
  int64_t weights = 0;              // elements of all tensors
  int64_t converted_weights = 0;    // elements of the converted tensors
  uint64_t converted_bytes = 0;     // their bytes in the output
  double seconds = 0;
};

// Rewrites in_path (a single file or a split model's first part) as out_path
// in the mix. Metadata is copied in order, with
// general.file_type set to the mix's id and general.quantization_version to 2
// (set in place when present, else appended), and split.* keys dropped, as
// llama-quantize does; tensors keep their order; a tensor whose type does not
// change is copied byte for byte. Converted rows are bit-exact with
// llama-quantize without an importance matrix. Errors name the tensor:
// invalid_input for a row that fits no type, a quantized input tensor without
// allow_requantize, a non-finite value; unsupported for an input type weft
// cannot read or an architecture other than llama/qwen2. On any error or
// cancel, out_path is untouched (an existing file stays as it was).
QuantizeStats quantize_file(const std::string& in_path, const std::string& out_path, const QuantizeOptions& options);

}  // namespace weft::model
