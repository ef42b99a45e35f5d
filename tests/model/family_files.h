// The model-family test files: GGUF models with each family's tensor names
// and keys and the float64 logits of a scripted sequence of evals, both
// written by tests/model/families/make_family.py (Python and numpy,
// independent of weft's C++ code). Generated once per build tree and reused
// while the scripts are unchanged.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace family_files {

namespace fs = std::filesystem;

// The cases make_family.py writes (CASE.gguf and CASE.ref).
inline const std::vector<std::string>& cases() {
  // The families, then make_family.py's option matrix (VARIANTS).
  static const std::vector<std::string> all{
      "llama",           "qwen2",           "llama3_freqs",         "llama3_keys",     "qwen3",
      "qwen3moe",        "qwen2moe",        "phi3_short",           "phi3_long",       "gemma2",
      "gemma3",          "phi3_window_big", "phi3_window",          "phi3_unfused",    "llama_window",
      "qwen2_window_pattern", "qwen2_tied", "qwen3_linear",         "qwen3moe_window_big", "qwen2moe_window",
      "gemma2_nowindow", "gemma2_window_big", "gemma3_window_list", "gemma3_nowindow",
      "qwen3_yarn",      "llama_yarn",      "gptoss",          "gptoss_mxfp4",
      // make_family.py's DEEPSEEK cases: multi-head latent attention.
      "deepseek2",       "deepseek2_lite"};
  return all;
}

inline fs::path script_dir() { return fs::path(WEFT_SOURCE_DIR) / "tests" / "model" / "families"; }

inline void run_script(const fs::path& out, const std::string& args) {
  fs::create_directories(out);
  const std::string cmd = std::string(WEFT_PYTHON3) + " '" + (script_dir() / "make_family.py").string() + "' '" +
                          out.string() + "' " + args + " > '" + (out / "log.txt").string() + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log(out / "log.txt");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    throw std::runtime_error("make_family.py failed: " + cmd + "\n" + text);
  }
}

// The directory holding every case, generated when missing or older than
// the scripts. Concurrent test processes each generate into their own
// directory and the first rename wins.
inline fs::path dir() {
  const fs::path root = fs::path(WEFT_BINARY_DIR) / "model_families";
  const fs::path stamp = root / "complete";
  auto fresh = [&] {
    if (!fs::exists(stamp)) return false;
    const auto made = fs::last_write_time(stamp);
    for (const auto& e : fs::directory_iterator(script_dir()))
      if (e.path().extension() == ".py" && fs::last_write_time(e.path()) > made) return false;
    return true;
  };
  if (fresh()) return root;
  const fs::path tmp = root.string() + ".tmp." + std::to_string(::getpid());
  fs::remove_all(tmp);
  run_script(tmp, "");
  std::ofstream(tmp / "complete") << "ok\n";
  std::error_code ec;
  if (fs::exists(root) && !fresh()) fs::remove_all(root, ec);
  fs::rename(tmp, root, ec);
  if (ec) fs::remove_all(tmp);  // another process's copy won
  if (!fresh()) throw std::runtime_error("model family files in " + root.string() + " are not complete");
  return root;
}

// One eval of the script and the reference's logits (token-major).
struct Eval {
  int64_t n_past = 0;
  std::vector<int32_t> tokens;
  std::vector<double> logits;
};

struct Reference {
  int64_t n_ctx = 0;
  int64_t n_vocab = 0;
  std::vector<Eval> evals;
};

// Reads CASE.ref: "WEFTREF1", u32 n_ctx, n_vocab, n_evals, then per eval
// u32 n_past, n_tokens, i32 tokens[n_tokens], f64 logits[n_tokens * n_vocab].
inline Reference read_reference(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  auto read = [&](void* p, size_t n) {
    if (!in.read(static_cast<char*>(p), static_cast<std::streamsize>(n)))
      throw std::runtime_error(path.string() + " is truncated");
  };
  auto u32 = [&] {
    uint32_t v;
    read(&v, 4);
    return static_cast<int64_t>(v);
  };
  char magic[8];
  read(magic, 8);
  if (std::memcmp(magic, "WEFTREF1", 8) != 0) throw std::runtime_error(path.string() + " is not a WEFTREF1 file");
  Reference r;
  r.n_ctx = u32();
  r.n_vocab = u32();
  const int64_t n_evals = u32();
  for (int64_t e = 0; e < n_evals; ++e) {
    Eval ev;
    ev.n_past = u32();
    const int64_t n = u32();
    ev.tokens.resize(static_cast<size_t>(n));
    read(ev.tokens.data(), ev.tokens.size() * 4);
    ev.logits.resize(static_cast<size_t>(n * r.n_vocab));
    read(ev.logits.data(), ev.logits.size() * 8);
    r.evals.push_back(std::move(ev));
  }
  return r;
}

// ||got - want|| / ||want|| over one token's logits (want: a float64
// reference, or another run's floats).
template <class Want>
double normalized_error(const float* got, const Want* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace family_files
