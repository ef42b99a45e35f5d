// `weft run`: text generation from a GGUF file, the layers split over this
// CPU and any `weft worker`s. The plan goes to stderr before loading, the
// generated text streams to stdout token by token.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "model_host.h"
#include "weft/core/error.h"
#include "weft/model/sampler.h"

namespace weft::tools {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kWhere = "run";

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int cmd_run(const RunArgs& args) {
  if (args.n_tokens < 0)
    fail(ErrorKind::invalid_input, kWhere, "--tokens " + std::to_string(args.n_tokens) + " (>= 0)");
  signal(SIGPIPE, SIG_IGN);  // a dead worker is an Error(disconnected), not a signal

  const std::string text = args.prompt_file.empty() ? args.prompt : read_text_file(args.prompt_file, kWhere);
  ModelHost host(args.host, kWhere);
  const model::Tokenizer& tok = host.tokenizer();
  const int vocab = static_cast<int>(host.params().n_vocab);

  // The prompt, and a context that holds it and every generated token.
  const std::vector<int32_t> prompt = tok.encode(text, tok.add_bos(), args.special);
  if (prompt.empty()) fail(ErrorKind::invalid_input, kWhere, "the prompt is empty and the model adds no bos token");
  int64_t n_ctx = static_cast<int64_t>(prompt.size()) + std::max(args.n_tokens, 1);
  if (host.params().n_ctx_train > 0) n_ctx = std::min(n_ctx, host.params().n_ctx_train);
  if (static_cast<int64_t>(prompt.size()) > n_ctx)
    fail(ErrorKind::invalid_input, kWhere,
         "prompt of " + std::to_string(prompt.size()) + " tokens exceeds the context length " + std::to_string(n_ctx));
  host.load(n_ctx);

  model::Sampler sampler({.temperature = args.temperature, .seed = args.seed});
  const auto t0 = Clock::now();
  std::vector<float> logits = host.eval(prompt, 0);
  const double prompt_s = seconds_since(t0);
  const float* row = &logits[(prompt.size() - 1) * static_cast<size_t>(vocab)];
  int64_t n_past = static_cast<int64_t>(prompt.size());
  int generated = 0;
  const auto t1 = Clock::now();
  while (generated < args.n_tokens) {
    const int32_t next = sampler.sample({row, static_cast<size_t>(vocab)});
    if (tok.is_end_of_generation(next)) break;
    sampler.accept(next);
    ++generated;
    const std::string piece = tok.decode_token(next);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    if (generated == args.n_tokens || n_past >= n_ctx) break;  // no room, or nothing more to sample
    logits = host.eval(std::span<const int32_t>(&next, 1), n_past++);
    row = logits.data();
  }
  const double gen_s = seconds_since(t1);
  std::fputc('\n', stdout);
  std::fflush(stdout);

  if (args.stats) {
    std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.1f tokens/s)\n", prompt.size(), prompt_s,
                 prompt_s > 0 ? static_cast<double>(prompt.size()) / prompt_s : 0.0);
    std::fprintf(stderr, "generation: %d tokens in %.3f s (%.1f tokens/s)\n", generated, gen_s,
                 gen_s > 0 ? generated / gen_s : 0.0);
    host.print_worker_stats();
  }
  return 0;
}

}  // namespace weft::tools
