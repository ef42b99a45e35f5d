// `weft perplexity`: exp of the mean negative log-likelihood of a text's
// tokens, chunk by chunk (see PerplexityArgs in commands.h for the chunking
// convention). Log-probabilities are computed in double from the logits.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "session_ui.h"
#include "weft/core/error.h"
#include "weft/model/perplexity.h"

namespace weft::tools {
namespace {

constexpr const char* kWhere = "perplexity";

}  // namespace

int cmd_perplexity(const PerplexityArgs& args) {
  signal(SIGPIPE, SIG_IGN);  // a dead worker is an Error(disconnected), not a signal
  const std::string text = read_text_file(args.text_file, kWhere);
  Session session(session_options(args.host, kWhere));
  const model::Tokenizer& tok = session.tokenizer();
  const int64_t ctx = args.ctx;
  if (session.params().n_ctx_train > 0 && ctx > session.params().n_ctx_train)
    fail(ErrorKind::invalid_input, kWhere,
         "--ctx " + std::to_string(ctx) + " exceeds the model's context length " +
             std::to_string(session.params().n_ctx_train));

  const std::vector<int32_t> tokens = tok.encode(text, tok.add_bos());
  int64_t n_chunks = static_cast<int64_t>(tokens.size()) / ctx;
  if (args.max_chunks > 0) n_chunks = std::min<int64_t>(n_chunks, args.max_chunks);
  if (n_chunks == 0)
    fail(ErrorKind::invalid_input, kWhere,
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

}  // namespace weft::tools
