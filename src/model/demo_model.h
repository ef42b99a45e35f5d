// The demo model: a llama-architecture GGUF file with deterministic random
// weights (no tokenizer; its vocabulary has no text). `weft demo` writes it
// once into a cache folder and runs it split across processes.
//
//   weft::model::DemoModelSpec spec;                 // about 100 M parameters
//   weft::model::write_demo_model("/tmp/demo.gguf", spec);
//
// The same spec always gives the same bytes (the generator is our own
// splitmix64, not a standard-library distribution).
#pragma once

#include <cstdint>
#include <string>

namespace weft::model {

struct DemoModelSpec {
  int64_t n_vocab = 32000;
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_head_kv = 4;
  int64_t n_ff = 2048;
  int64_t n_ctx = 2048;  // context_length
  bool tied = true;      // output reuses token_embd (no output.weight)
  uint64_t seed = 42;
};

// Parameters of the model spec describes (norm weights included).
int64_t demo_model_params(const DemoModelSpec& spec);

// Writes the model to path (through a temporary file and a rename): matrices
// q8_0, norms f32. Throws Error(invalid_input) for a spec whose matrix rows
// are not multiples of 32 or whose heads do not divide n_embd.
void write_demo_model(const std::string& path, const DemoModelSpec& spec = {});

}  // namespace weft::model
