// A GGUF llama-family model set up for `weft run` and `weft perplexity`:
// this CPU plus device 0 of each worker, the layers placed by --split or in
// proportion to each device's free memory, the per-device plan printed to
// stderr before anything is loaded, and the weights copied with a progress
// bar (on a terminal) or a one-line summary (otherwise).
//
//   ModelHost host({.model = "m.gguf", .workers = {"10.0.0.2:50052"}}, "run");
//   host.load(/*n_ctx=*/512);                 // plan, then weights
//   std::vector<float> logits = host.eval(tokens, 0);
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "commands.h"
#include "weft/backend/backend.h"
#include "weft/backend/sched.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/model/tokenizer.h"

namespace weft::tools {


class ModelHost {
 public:
  // Opens the file, reads its tokenizer and parameters and connects to the
  // workers. what names the command in errors. Throws weft::Error.
  ModelHost(const ModelHostArgs& args, const char* what);
  ~ModelHost();

  const model::Tokenizer& tokenizer() const { return *tok_; }
  const model::LlamaParams& params() const { return params_; }
  int64_t n_ctx() const { return n_ctx_; }

  // Places the layers, prints the plan (layers, weights, KV cache and free
  // memory per device), refuses a plan that does not fit a device's free
  // memory, then loads the weights and a KV cache of n_ctx positions. Once.
  void load(int64_t n_ctx);

  // Logits of every token (token-major), tokens at positions n_past...
  std::vector<float> eval(std::span<const int32_t> tokens, int64_t n_past);

  // Per worker: bytes sent and received, round trips, time spent waiting.
  void print_worker_stats() const;

 private:
  const char* what_;
  ModelHostArgs args_;
  std::unique_ptr<GgufFile> file_;  // closed after load()
  std::unique_ptr<model::Tokenizer> tok_;
  model::LlamaParams params_;
  int64_t n_ctx_ = 0;
  std::vector<std::unique_ptr<Device>> devices_;  // host first, then one per worker
  std::vector<std::string> labels_;
  std::unique_ptr<model::LlamaModel> model_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<Backend*> backend_ptrs_;
  std::unique_ptr<Scheduler> sched_;  // when split over several devices
};

// The whole file's bytes. Throws Error(invalid_input) naming the file when it
// cannot be opened or read; what names the command.
std::string read_text_file(const std::string& path, const char* what);

}  // namespace weft::tools
