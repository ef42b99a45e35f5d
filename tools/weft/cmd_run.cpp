// `weft run`: text generation from a GGUF file, the layers split over this
// CPU and any `weft worker`s (weft::Session). The plan goes to stderr before
// loading, the generated text streams to stdout token by token.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "session_ui.h"
#include "weft/core/error.h"

namespace weft::tools {

int cmd_run(const RunArgs& args) {
  constexpr const char* kWhere = "run";
  if (args.n_tokens < 0)
    fail(ErrorKind::invalid_input, kWhere, "--tokens " + std::to_string(args.n_tokens) + " (>= 0)");
  signal(SIGPIPE, SIG_IGN);  // a dead worker is an Error(disconnected), not a signal

  const std::string text = args.prompt_file.empty() ? args.prompt : read_text_file(args.prompt_file, kWhere);
  Session session(session_options(args.host, kWhere));
  const model::Tokenizer& tok = session.tokenizer();

  // The prompt, and a context that holds it and every generated token.
  const std::vector<int32_t> prompt = tok.encode(text, tok.add_bos(), args.special);
  if (prompt.empty()) fail(ErrorKind::invalid_input, kWhere, "the prompt is empty and the model adds no bos token");
  int64_t n_ctx = static_cast<int64_t>(prompt.size()) + std::max(args.n_tokens, 1);
  if (session.params().n_ctx_train > 0) n_ctx = std::min(n_ctx, session.params().n_ctx_train);
  if (static_cast<int64_t>(prompt.size()) > n_ctx)
    fail(ErrorKind::invalid_input, kWhere,
         "prompt of " + std::to_string(prompt.size()) + " tokens exceeds the context length " + std::to_string(n_ctx));
  load_with_progress(session, n_ctx);

  GenerateOptions options;
  options.max_tokens = args.n_tokens;
  options.sampler = {.temperature = args.temperature, .seed = args.seed};
  const GenerateResult r = session.generate(prompt, options, [&tok](int32_t t) {
    const std::string piece = tok.decode_token(t);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);

  if (args.stats) {
    const double gen_s = r.total_seconds - r.prompt_seconds;
    std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.1f tokens/s)\n", prompt.size(), r.prompt_seconds,
                 r.prompt_seconds > 0 ? static_cast<double>(prompt.size()) / r.prompt_seconds : 0.0);
    std::fprintf(stderr, "generation: %zu tokens in %.3f s (%.1f tokens/s), stopped by %s\n", r.tokens.size(), gen_s,
                 gen_s > 0 ? static_cast<double>(r.tokens.size()) / gen_s : 0.0, stop_reason_name(r.stop));
    print_device_stats(session);
  }
  return 0;
}

}  // namespace weft::tools
