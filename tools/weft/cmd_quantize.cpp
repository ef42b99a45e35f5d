// `weft quantize IN OUT TYPE`: an argument adapter over
// weft::model::quantize_file (include/weft/quantize.h), with a progress bar
// on a terminal and SIGINT/SIGTERM turned into a clean cancel (the output's
// temporary file removed; a second signal ends the process at once).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "weft/core/error.h"
#include "weft/model/quantize.h"

namespace weft::tools {

// Exit 130 when interrupted.
struct QuantizeArgs {
  std::string input;
  std::string output;
  std::string type;               // a mix name: Q4_K_M, Q8_0, ...
  bool pure = false;              // the mix's base type for every quantized tensor
  bool allow_requantize = false;  // accept already-quantized input tensors
  int threads = 0;                // 0: hardware threads
  std::string split_max_size;     // "500M", "2G": write a split model
  uint64_t split_max_tensors = 0; // nonzero: write a split model
};

namespace {

constexpr const char* kCmdQuantizeWhere = "quantize";
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);  // set from a signal handler

extern "C" void on_stop_signal(int) { g_stop.store(true); }

// Installs the handlers for the command's lifetime; SA_RESETHAND makes a
// second signal take its default action.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

// One line redrawn in place, at most ten times a second.
class ProgressBar {
 public:
  void update(int64_t done, int64_t total, const std::string& tensor) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 30;
    const double f = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    const int fill = static_cast<int>(f * kWidth);
    std::string bar(static_cast<size_t>(fill), '#');
    bar.resize(kWidth, '.');
    std::string name = tensor.size() > 40 ? tensor.substr(0, 37) + "..." : tensor;
    std::fprintf(stderr, "\r[%s] %5.1f%%  %-40s", bar.c_str(), 100.0 * f, name.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }
  void clear() {
    if (drawn_) std::fprintf(stderr, "\r%*s\r", 80, "");
    drawn_ = false;
  }

 private:
  std::chrono::steady_clock::time_point last_{};
  bool drawn_ = false;
};

// "500M" or "2G" (K, M, G: 1024-based, as llama-gguf-split reads M and G) in
// bytes; a plain number is bytes.
uint64_t parse_size(const std::string& text) {
  auto bad = [&]() -> uint64_t {
    fail(ErrorKind::invalid_input, kCmdQuantizeWhere,
         "--split-max-size '" + text + "' is not a positive size such as 500M or 2G");
  };
  size_t digits = 0;
  uint64_t n = 0;
  for (; digits < text.size() && text[digits] >= '0' && text[digits] <= '9'; ++digits) {
    const uint64_t d = static_cast<uint64_t>(text[digits] - '0');
    if (n > (UINT64_MAX - d) / 10) return bad();
    n = n * 10 + d;
  }
  if (digits == 0 || n == 0 || text.size() > digits + 1) return bad();
  int shift = 0;
  if (text.size() == digits + 1) {
    switch (text[digits]) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      default: return bad();
    }
  }
  if (n > (UINT64_MAX >> shift)) return bad();
  return n << shift;
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }
double bpw(uint64_t bytes, int64_t weights) { return weights > 0 ? 8.0 * static_cast<double>(bytes) / static_cast<double>(weights) : 0.0; }

}  // namespace

int cmd_quantize(const QuantizeArgs& args) {
  const std::optional<model::QuantMix> mix = model::quant_mix_from_name(args.type);
  if (!mix) {
    std::string names;
    for (const model::QuantMixInfo& m : model::quant_mixes()) names += (names.empty() ? "" : ", ") + std::string(m.name);
    fail(ErrorKind::invalid_input, kCmdQuantizeWhere, "unknown type '" + args.type + "'; one of " + names);
  }
  model::QuantizeOptions o;
  o.mix = *mix;
  o.pure = args.pure;
  o.allow_requantize = args.allow_requantize;
  o.threads = args.threads;
  if (!args.split_max_size.empty()) o.split.max_bytes = parse_size(args.split_max_size);
  o.split.max_tensors = args.split_max_tensors;
  o.cancel = &g_stop;
  ProgressBar bar;
  if (isatty(STDERR_FILENO)) o.progress = [&bar](int64_t d, int64_t t, const std::string& n) { bar.update(d, t, n); };

  g_stop.store(false);
  StopSignals signals;
  model::QuantizeStats s;
  try {
    s = model::quantize_file(args.input, args.output, o);
  } catch (const Error&) {
    bar.clear();
    if (g_stop.load()) {
      std::fprintf(stderr, "weft quantize: interrupted; %s not written\n", args.output.c_str());
      return 130;
    }
    throw;
  }
  bar.clear();
  // Bits per weight of the converted tensors, then of the whole file (its
  // bytes, metadata included, over every tensor's weights).
  char converted[96];
  if (s.n_converted > 0)
    std::snprintf(converted, sizeof converted, "%.2f bpw", bpw(s.converted_bytes, s.converted_weights));
  else
    std::snprintf(converted, sizeof converted, "all copied");
  const std::string fallback = s.n_fallback > 0 ? " (" + std::to_string(s.n_fallback) + " to a fallback type)" : "";
  const std::string out = s.out_paths.size() > 1
                              ? s.out_paths.front() + " and " + std::to_string(s.out_paths.size() - 1) + " more parts"
                              : args.output;
  std::printf("%s: %.2f MiB -> %s: %.2f MiB (%s), %lld of %lld tensors converted%s: %s, whole file %.2f bpw, %.2f s\n",
              args.input.c_str(), mib(s.in_bytes), out.c_str(), mib(s.out_bytes),
              std::string(model::quant_mix_info(*mix).name).c_str(), static_cast<long long>(s.n_converted),
              static_cast<long long>(s.n_tensors), fallback.c_str(), converted, bpw(s.out_bytes, s.weights),
              s.seconds);
  if (s.out_paths.size() > 1)
    for (const std::string& path : s.out_paths) std::printf("  %s\n", path.c_str());
  return 0;
}

void add_quantize_command(CLI::App& app, Commands& out) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "rewrite a GGUF model in a quantization mix (tensor types as llama.cpp's quantizer chooses them)");
  cmd->add_option("input", a->input, "GGUF model in f32/f16/bf16")->required();
  cmd->add_option("output", a->output, "GGUF file to write")->required();
  cmd->add_option("type", a->type,
                        "F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M "
                        "Q6_K IQ4_NL IQ4_XS")
      ->required();
  cmd->add_flag("--pure", a->pure, "the mix's base type for every quantized tensor (no per-tensor mix)");
  cmd->add_flag("--allow-requantize", a->allow_requantize,
                      "accept already-quantized input tensors (loses more than quantizing from 16 or 32 bits)");
  cmd->add_option("-t,--threads", a->threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--split-max-size", a->split_max_size,
                        "write a split model (OUT less .gguf becomes OUT-00001-of-0000N.gguf ...), each part's tensors "
                        "at most this size: 500M, 2G (MiB, GiB, as llama-gguf-split counts)");
  cmd->add_option("--split-max-tensors", a->split_max_tensors,
                        "write a split model with at most this many tensors a part")
      ->check(CLI::PositiveNumber);

  out.push_back({cmd, [a] { return cmd_quantize(*a); }});
}

}  // namespace weft::tools
