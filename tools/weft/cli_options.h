// What several `weft` commands share, so that each option is spelled and
// checked once: the model-and-devices options, byte sizes with units, the
// sampler's flags, text files, and the llama.cpp-style spellings CLI11
// cannot declare (`-cnv`).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "weft/model/sampler.h"

namespace weft::tools {

// The model and the devices of `weft run`, `chat`, `serve`, `perplexity`
// and `bench model` (session_ui.h): this CPU, device 0 of each worker, then
// any --device.
struct ModelHostArgs {
  std::string model;                 // GGUF file
  int threads = 0;                   // host CPU threads; 0 = hardware threads
  std::vector<std::string> workers;  // HOST:PORT, one device each
  std::string workers_file;          // more workers, one per line (weft/runtime/devices.h; serve re-reads it on SIGHUP)
  std::vector<std::string> devices;  // more device specs (weft/runtime/devices.h)
  std::string split;                 // layer proportions host,worker1,...; empty: by placement
  double worker_timeout_s = 0;       // a worker silent this long while awaited is dead; 0: no limit
  bool no_peer_links = false;        // activations between workers go through this host
  std::string auth_token_file;       // the workers' shared secret (weft/core/secret_file.h); empty: none
  bool no_mmap = false;              // copy the host's weights instead of using the file's mapping
  std::string cache_type = "f16";    // the KV cache's element type: f16 or q8_0
  std::string tensor_partials = "f32";  // how a tensor split's activations cross: f32 or q8_0
  std::string split_mode = "layer";   // "layer" (a pipeline) or "tensor" (every layer cut by heads)
  std::string placement = "speed";   // without --split: "speed" (probed at connect) or "memory"
  std::string experts_split;         // expert proportions host,worker1,...; empty: experts with their layer
  bool discover = false;             // also the workers whose beacons this host hears (weft/rpc/discovery.h)
  double discover_seconds = 2.5;     // how long to listen for them
  int discover_port = 50051;         // the UDP port of the beacons
};

// -m/--model, -t/--threads, --worker, --device, --split, --placement, ...:
// the options of ModelHostArgs.
void add_model_host_options(CLI::App* cmd, ModelHostArgs& host);

// The sampler's flags of `weft run` and `weft chat` (sampler_options turns
// them into model::SamplerOptions, the one sampler the server uses too).
struct SamplingArgs {
  float temperature = 0;        // --temp; 0: greedy
  int top_k = 40;               // --top-k; 0: off
  float top_p = 0.95f;          // --top-p; 1: off
  float min_p = 0.05f;          // --min-p; 0: off
  uint64_t seed = 0;            // --seed
  float repeat_penalty = 1;     // --repeat-penalty; 1: off
  int repeat_last_n = 64;       // --repeat-last-n; 0: no penalties; -1: the whole context
  float presence_penalty = 0;   // --presence-penalty
  float frequency_penalty = 0;  // --frequency-penalty
};

// An option whose value is a byte size (weft/core/byte_size.h: 64MiB, 4G,
// 512k, 1.5GB, plain bytes); a bad one is a CLI error naming the option and
// the text.
CLI::Option* add_size_option(CLI::App* cmd, const std::string& name, size_t& target, const std::string& description);

// --temp, --top-k, --top-p, --min-p, --seed, --repeat-penalty,
// --repeat-last-n, --presence-penalty, --frequency-penalty.
void add_sampling_options(CLI::App* cmd, SamplingArgs& args);

// The flags as the sampler's options. Throws Error(invalid_input, "[what]
// --top-p 1.5 is outside (0, 1]") naming the flag and its value. n_ctx is
// what --repeat-last-n -1 stands for.
model::SamplerOptions sampler_options(const SamplingArgs& args, int64_t n_ctx, const char* what);

// `-cnv` (llama.cpp's spelling of --conversation) rewritten in place, since
// CLI11's short options are one letter (`-cnv` would read as `-c nv`).
void rewrite_long_short_options(int argc, char** argv);

// The whole file's bytes (at most 1 GiB). Throws Error(invalid_input) naming
// the file when it cannot be opened or read; what names the command.
std::string read_text_file(const std::string& path, const char* what);

}  // namespace weft::tools
