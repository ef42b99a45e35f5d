// The model file of `weft demo` (demo_files.h).
#include "demo_files.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/model/quantize.h"

namespace weft::tools {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr const char* kDemoFilesWhere = "demo";

fs::path cache_folder(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "weft";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "weft";
  fail(ErrorKind::invalid_input, kDemoFilesWhere, "no cache folder: set --cache-dir, XDG_CACHE_HOME or HOME");
}

// The demo model in the mix named `type`, beside it in the cache folder;
// made once by the library behind `weft quantize` (the demo model is q8_0,
// so this requantizes).
fs::path quantized_copy(const fs::path& path, const std::string& type, int threads) {
  const std::optional<model::QuantMix> mix = model::quant_mix_from_name(type);
  if (!mix)
    fail(ErrorKind::invalid_input, kDemoFilesWhere,
         "--type " + type + ": not a quantization mix (see weft quantize --help)");
  const model::QuantMixInfo& info = model::quant_mix_info(*mix);
  const fs::path out = path.parent_path() / (path.stem().string() + "-" + std::string(info.name) + ".gguf");
  if (fs::exists(out)) {
    std::printf("model %s (%.0f MB)\n", out.c_str(), static_cast<double>(fs::file_size(out)) / 1e6);
    return out;
  }
  model::QuantizeOptions o;
  o.mix = *mix;
  o.allow_requantize = true;
  o.threads = threads;
  const model::QuantizeStats s = model::quantize_file(path.string(), out.string(), o);
  std::printf("quantized %s to %s: %.0f MB -> %.0f MB, %.2f bits per weight, in %.1f s\n", path.filename().c_str(),
              std::string(info.name).c_str(), static_cast<double>(s.in_bytes) / 1e6,
              static_cast<double>(s.out_bytes) / 1e6,
              8.0 * static_cast<double>(s.out_bytes) / static_cast<double>(std::max<int64_t>(s.weights, 1)), s.seconds);
  return out;
}

}  // namespace

fs::path demo_model_file(const std::string& cache_dir, const std::string& type, int threads) {
  // The model, written once.
  const model::DemoModelSpec spec;
  const fs::path dir = cache_folder(cache_dir);
  const fs::path path = dir / "demo-llama-100m-v2.gguf";  // v2: with a vocabulary
  if (!fs::exists(path)) {
    fs::create_directories(dir);
    std::error_code ignored;  // the first demo model (no vocabulary), 107 MB nothing reads any more
    fs::remove(dir / "demo-llama-100m.gguf", ignored);
    const auto t0 = Clock::now();
    model::write_demo_model(path.string(), spec);
    std::printf("wrote %s (%.1f M parameters, %.0f MB) in %.1f s\n", path.c_str(),
                static_cast<double>(model::demo_model_params(spec)) / 1e6,
                static_cast<double>(fs::file_size(path)) / 1e6,
                std::chrono::duration<double>(Clock::now() - t0).count());
  } else {
    std::printf("model %s (%.0f MB)\n", path.c_str(), static_cast<double>(fs::file_size(path)) / 1e6);
  }
  return type.empty() ? path : quantized_copy(path, type, threads);
}

}  // namespace weft::tools
