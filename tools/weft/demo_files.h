// The model file `weft demo` runs: the demo llama (weft/model/demo_model.h)
// written once into the cache folder, and when asked a copy of it in a
// quantization mix made by the library behind `weft quantize`. Each step
// prints one line (written, or found, with its size).
#pragma once

#include <filesystem>
#include <string>

namespace weft::tools {

// cache_dir empty: $XDG_CACHE_HOME/weft, else ~/.cache/weft. type empty: the
// demo model itself (q8_0), else its copy in that mix (Q4_K_M, q4_K, ...).
// Throws Error(invalid_input) for an unknown mix or when no folder is known.
std::filesystem::path demo_model_file(const std::string& cache_dir, const std::string& type, int threads);

}  // namespace weft::tools
