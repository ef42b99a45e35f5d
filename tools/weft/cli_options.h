// Option kinds several `weft` commands share, so that each is spelled and
// checked once: byte sizes with units, the sampler's flags, and the
// llama.cpp-style spellings CLI11 cannot declare (`-cnv`).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

#include "commands.h"
#include "weft/model/sampler.h"

namespace weft::tools {

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

}  // namespace weft::tools
