// `weft perplexity`: exp of the mean negative log-likelihood of a text's
// tokens, chunk by chunk (see PerplexityArgs in commands.h for the chunking
// convention). Log-probabilities are computed in double from the logits.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "session_ui.h"
#include "weft/core/error.h"
#include "weft/model/perplexity.h"

namespace weft::tools {

// `weft perplexity`: perplexity of a model over a text file, the check users
// run after quantizing or splitting a model. The tokens are cut into chunks
// of ctx tokens, each evaluated from position 0 (its first token replaced by
// bos when the model has one); the second half of each chunk is scored, so
// every scored token sees at least ctx / 2 tokens before it (the convention
// of llama.cpp's perplexity tool, so figures compare).
struct PerplexityArgs {
  ModelHostArgs host;
  std::string text_file;             // UTF-8 text
  int ctx = 512;                     // tokens per chunk
  int max_chunks = 0;                // 0: every whole chunk in the text
  bool stats = false;                // speed and RPC traffic to stderr
};

namespace {

constexpr const char* kCmdPerplexityWhere = "perplexity";

}  // namespace

int cmd_perplexity(const PerplexityArgs& args) {
  signal(SIGPIPE, SIG_IGN);  // a dead worker is an Error(disconnected), not a signal
  const std::string text = read_text_file(args.text_file, kCmdPerplexityWhere);
  Session session(session_options(args.host, kCmdPerplexityWhere));
  const model::Tokenizer& tok = session.tokenizer();
  const int64_t ctx = args.ctx;
  if (session.params().n_ctx_train > 0 && ctx > session.params().n_ctx_train)
    fail(ErrorKind::invalid_input, kCmdPerplexityWhere,
         "--ctx " + std::to_string(ctx) + " exceeds the model's context length " +
             std::to_string(session.params().n_ctx_train));

  const std::vector<int32_t> tokens = tok.encode(text, tok.add_bos());
  int64_t n_chunks = static_cast<int64_t>(tokens.size()) / ctx;
  if (args.max_chunks > 0) n_chunks = std::min<int64_t>(n_chunks, args.max_chunks);
  if (n_chunks == 0)
    fail(ErrorKind::invalid_input, kCmdPerplexityWhere,
         args.text_file + " has " + std::to_string(tokens.size()) + " tokens, fewer than one chunk of --ctx " +
             std::to_string(ctx) + " (use a smaller --ctx or a longer text)");
  std::fprintf(stderr, "%s: %zu tokens, %lld chunks of %lld\n", args.text_file.c_str(), tokens.size(),
               static_cast<long long>(n_chunks), static_cast<long long>(ctx));
  load_with_progress(session, ctx);

  const auto t0 = std::chrono::steady_clock::now();
  const model::PerplexityScore score =
      session.perplexity(tokens, n_chunks, [n_chunks](int64_t c, const model::PerplexityScore& s) {
        std::printf("chunk %lld/%lld: perplexity %.4f\n", static_cast<long long>(c + 1),
                    static_cast<long long>(n_chunks), s.perplexity());
        std::fflush(stdout);
      });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::printf("perplexity: %.4f +/- %.4f over %lld tokens (%lld chunks of %lld, second halves scored)\n",
              score.perplexity(), score.error(), static_cast<long long>(score.count()),
              static_cast<long long>(n_chunks), static_cast<long long>(ctx));
  if (args.stats) {
    const double evaluated = static_cast<double>(n_chunks * ctx);
    std::fprintf(stderr, "evaluated %.0f tokens in %.3f s (%.1f tokens/s)\n", evaluated, seconds,
                 seconds > 0 ? evaluated / seconds : 0.0);
    print_device_stats(session);
  }
  return 0;
}

void add_perplexity_command(CLI::App& app, Commands& out) {
  auto a = std::make_shared<PerplexityArgs>();
  CLI::App* cmd = app.add_subcommand("perplexity", "perplexity of a GGUF model over a text file, split like `run`");
  add_model_host_options(cmd, a->host);
  cmd->add_option("-f,--file", a->text_file, "text file (UTF-8)")->required();
  cmd->add_option("-c,--ctx", a->ctx, "tokens per chunk")->capture_default_str()->check(CLI::Range(4, 1 << 20));
  cmd->add_option("--chunks", a->max_chunks, "chunks to score (0: all)")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_flag("--stats", a->stats, "print speed and RPC traffic to stderr");
  out.push_back({cmd, [a] { return cmd_perplexity(*a); }});
}

}  // namespace weft::tools
