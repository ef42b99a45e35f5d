// `weft run`: text generation from a GGUF file, the layers split over this
// CPU and any `weft worker`s (weft::Session). The plan goes to stderr before
// loading, the generated text streams to stdout token by token; several
// sequences (--parallel, --prompts) are decoded together and each printed
// whole when all are done; with --model-draft a draft model on this host
// proposes tokens the model verifies in one step each round.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli_options.h"
#include "commands.h"
#include "session_ui.h"
#include "weft/core/error.h"
#include "weft/model/grammar.h"
#include "weft/runtime/speculative.h"
#include "weft/serve/output_constraint.h"

namespace weft::tools {
namespace {

constexpr const char* kCmdRunWhere = "run";
using Clock = std::chrono::steady_clock;

// The prompts' texts: every non-empty line of --prompts, else the prompt
// repeated --parallel times.
std::vector<std::string> prompt_texts(const RunArgs& args) {
  std::vector<std::string> texts;
  if (!args.prompts_file.empty()) {
    std::istringstream in(read_text_file(args.prompts_file, kCmdRunWhere));
    for (std::string line; std::getline(in, line);)
      if (line.find_first_not_of(" \t\r") != std::string::npos) texts.push_back(line);
    if (texts.empty())
      fail(ErrorKind::invalid_input, kCmdRunWhere, "'" + args.prompts_file + "' has no prompt (no non-empty line)");
    if (args.parallel != 1 && args.parallel != static_cast<int>(texts.size()))
      fail(ErrorKind::invalid_input, kCmdRunWhere,
           "--parallel " + std::to_string(args.parallel) + " but '" + args.prompts_file + "' has " +
               std::to_string(texts.size()) + " prompts");
    return texts;
  }
  const std::string text = args.prompt_file.empty() ? args.prompt : read_text_file(args.prompt_file, kCmdRunWhere);
  return std::vector<std::string>(static_cast<size_t>(args.parallel), text);
}

void print_speeds(size_t prompt_tokens, const GenerateResult& r) {
  const double gen_s = r.total_seconds - r.prompt_seconds;
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.1f tokens/s)\n", prompt_tokens, r.prompt_seconds,
               r.prompt_seconds > 0 ? static_cast<double>(prompt_tokens) / r.prompt_seconds : 0.0);
  std::fprintf(stderr, "generation: %zu tokens in %.3f s (%.1f tokens/s), stopped by %s\n", r.tokens.size(), gen_s,
               gen_s > 0 ? static_cast<double>(r.tokens.size()) / gen_s : 0.0, stop_reason_name(r.stop));
  if (r.grammar_seconds > 0)
    std::fprintf(stderr, "grammar: %.3f s masking and following (%.1f%% of generation, %.3f ms per token)\n",
                 r.grammar_seconds, gen_s > 0 ? 100.0 * r.grammar_seconds / gen_s : 0.0,
                 r.tokens.empty() ? 0.0 : 1e3 * r.grammar_seconds / static_cast<double>(r.tokens.size()));
}

// Several sequences: generated together, then printed in order. With
// --stats, the aggregate decode speed counts the tokens sampled after every
// prompt was done, over the time from then to the last token.
void run_parallel(Session& session, const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& options,
                  bool stats) {
  const model::Tokenizer& tok = session.tokenizer();
  std::vector<std::pair<int, Clock::time_point>> emitted;  // sequence, when
  const auto t0 = Clock::now();
  const std::vector<GenerateResult> results = session.generate_parallel(prompts, options, [&](int seq, int32_t) {
    emitted.emplace_back(seq, Clock::now());
    return true;
  });
  for (size_t s = 0; s < results.size(); ++s) {
    std::string text;
    for (int32_t t : results[s].tokens) text += tok.decode_token(t);
    std::printf("--- sequence %zu (%s) ---\n%s\n", s, stop_reason_name(results[s].stop), text.c_str());
  }
  std::fflush(stdout);
  if (!stats) return;
  double prompts_done = 0, end = 0;
  size_t prompt_tokens = 0, generated = 0;
  for (size_t s = 0; s < results.size(); ++s) {
    prompts_done = std::max(prompts_done, results[s].prompt_seconds);
    end = std::max(end, results[s].total_seconds);
    prompt_tokens += prompts[s].size();
    generated += results[s].tokens.size();
  }
  size_t decoded = 0;
  for (const auto& [seq, when] : emitted)
    if (std::chrono::duration<double>(when - t0).count() > prompts_done) ++decoded;
  const double decode_s = end - prompts_done;
  std::fprintf(stderr, "prompts: %zu sequences, %zu tokens in %.3f s (%.1f tokens/s)\n", results.size(), prompt_tokens,
               prompts_done, prompts_done > 0 ? static_cast<double>(prompt_tokens) / prompts_done : 0.0);
  std::fprintf(stderr, "generation: %zu tokens in all; %zu after the prompts in %.3f s (%.1f tokens/s aggregate)\n",
               generated, decoded, decode_s, decode_s > 0 ? static_cast<double>(decoded) / decode_s : 0.0);
}

// Prints one token as it comes.
bool print_token(const model::Tokenizer& tok, int32_t t) {
  const std::string piece = tok.decode_token(t);
  std::fwrite(piece.data(), 1, piece.size(), stdout);
  std::fflush(stdout);
  return true;
}

// --model-draft: the draft opened on this host's CPU (its vocabulary
// checked against the target's before either is loaded).
std::unique_ptr<Session> open_draft(const RunArgs& args, const Session& target) {
  SessionOptions so;
  so.model = args.draft_model;
  so.name = "run: the draft";
  so.devices = {"cpu"};
  so.probe = false;
  so.device_options.cpu_threads = args.host.threads;
  so.load.map_weights = !args.host.no_mmap;
  auto draft = std::make_unique<Session>(std::move(so));
  check_same_vocabulary(target.tokenizer(), draft->tokenizer());
  return draft;
}

// Speculative decoding (weft/runtime/speculative.h), the draft loaded for
// the same positions; with --stats, the acceptance and the target's steps.
void run_with_draft(Session& target, Session& draft, const RunArgs& args, std::span<const int32_t> prompt,
                    const GenerateOptions& options, int64_t n_ctx) {
  draft.load(n_ctx);
  const model::Tokenizer& tok = target.tokenizer();
  const SpeculativeResult r = generate_speculative(target, draft, prompt, options, {.draft_max = args.draft_max},
                                                   [&](int32_t t) { return print_token(tok, t); });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!args.stats) return;
  print_speeds(prompt.size(), r.generation);
  const SpeculativeCounts& c = r.counts;
  std::fprintf(stderr,
               "draft: %lld of %lld drafted tokens kept (%.1f%%); %lld target steps after the prompt for %zu tokens "
               "(%.2f tokens per step)\n",
               static_cast<long long>(c.accepted), static_cast<long long>(c.drafted), 100.0 * c.acceptance(),
               static_cast<long long>(c.target_steps), r.generation.tokens.size(),
               c.target_steps > 0 ? static_cast<double>(r.generation.tokens.size() - 1) / static_cast<double>(c.target_steps) : 0.0);
}

// Each sequence's positions: -c over the sequences, else the longest
// prompt and every generated token (at most the training context).
int64_t sequence_context(const RunArgs& args, const Session& session, size_t longest, int64_t n_seq) {
  int64_t seq_ctx = static_cast<int64_t>(longest) + std::max(args.n_tokens, 1);
  if (session.params().n_ctx_train > 0) seq_ctx = std::min(seq_ctx, session.params().n_ctx_train);
  if (args.ctx_size > 0) {
    if (args.ctx_size < n_seq)
      fail(ErrorKind::invalid_input, kCmdRunWhere,
           "--ctx-size " + std::to_string(args.ctx_size) + " is fewer positions than the " + std::to_string(n_seq) +
               " sequences");
    seq_ctx = args.ctx_size / n_seq;
    if (session.params().n_ctx_train > 0 && seq_ctx > session.params().n_ctx_train)
      std::fprintf(stderr, "weft: warning: --ctx-size %lld gives each sequence %lld positions, more than the %lld the model was trained on\n",
                   static_cast<long long>(args.ctx_size), static_cast<long long>(seq_ctx),
                   static_cast<long long>(session.params().n_ctx_train));
  }
  if (static_cast<int64_t>(longest) > seq_ctx)
    fail(ErrorKind::invalid_input, kCmdRunWhere,
         "prompt of " + std::to_string(longest) + " tokens exceeds the context length " + std::to_string(seq_ctx) +
             (args.ctx_size > 0 ? " (--ctx-size " + std::to_string(args.ctx_size) + ")" : ""));
  return seq_ctx;
}

}  // namespace

int cmd_run(const RunArgs& args) {
  if (args.n_tokens < 0)
    fail(ErrorKind::invalid_input, kCmdRunWhere, "--tokens " + std::to_string(args.n_tokens) + " (>= 0)");
  if (args.ctx_size < 0)
    fail(ErrorKind::invalid_input, kCmdRunWhere,
         "--ctx-size " + std::to_string(args.ctx_size) + " (>= 0; 0: as needed)");
  (void)sampler_options(args.sampling, 0, kCmdRunWhere);  // the flags checked before any worker is dialed
  signal(SIGPIPE, SIG_IGN);  // a dead worker is an Error(disconnected), not a signal

  const std::vector<std::string> texts = prompt_texts(args);
  SessionOptions so = session_options(args.host, kCmdRunWhere);
  so.pipelined = texts.size() > 1;  // by speed: balance the stages, which all work at once
  if (texts.size() > 1) so.load.sliding_ring_step = 0;  // batches over sequences need full caches
  so.recover = args.recover;
  so.on_recovery = print_recovery;
  so.on_rejoin = print_rejoin;
  Session session(std::move(so));
  const model::Tokenizer& tok = session.tokenizer();

  // The prompts, and a context with a part per prompt that holds the
  // longest and every generated token.
  std::vector<std::vector<int32_t>> prompts;
  size_t longest = 0;
  for (const std::string& text : texts) {
    prompts.push_back(tok.encode(text, tok.add_bos(), args.special));
    if (prompts.back().empty())
      fail(ErrorKind::invalid_input, kCmdRunWhere, "a prompt is empty and the model adds no bos token");
    longest = std::max(longest, prompts.back().size());
  }
  const int64_t n_seq = static_cast<int64_t>(prompts.size());
  const int64_t seq_ctx = sequence_context(args, session, longest, n_seq);
  GenerateOptions options;
  options.max_tokens = args.n_tokens;
  options.sampler = sampler_options(args.sampling, seq_ctx, kCmdRunWhere);  // flags checked before loading
  if (!args.grammar_file.empty() || !args.json_schema_file.empty()) {
    options.grammar = args.grammar_file.empty()
                          ? serve::grammar_from_json_schema(read_text_file(args.json_schema_file, kCmdRunWhere))
                          : model::Grammar::parse(read_text_file(args.grammar_file, kCmdRunWhere));
    options.token_trie = model::TokenTrie::from_tokenizer(tok);
  }
  const std::unique_ptr<Session> draft = args.draft_model.empty() ? nullptr : open_draft(args, session);
  const LoadPlan plan = load_with_progress(session, seq_ctx * n_seq);

  if (n_seq > 1) {
    run_parallel(session, prompts, options, args.stats);
  } else if (draft) {
    run_with_draft(session, *draft, args, prompts[0], options, seq_ctx);
  } else {
    // With --stats, what each device computes per generated token: from the
    // first token (the prompt is done) to the last.
    std::vector<DeviceCompute> at_first_token;
    const GenerateResult r = session.generate(prompts[0], options, [&](int32_t t) {
      if (args.stats && at_first_token.empty()) at_first_token = session.compute_stats();
      return print_token(tok, t);
    });
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (args.stats) {
      print_speeds(prompts[0].size(), r);
      if (!at_first_token.empty() && r.tokens.size() > 1)
        print_stage_times(plan, at_first_token, session.compute_stats(), static_cast<int64_t>(r.tokens.size()) - 1);
    }
  }
  if (args.stats) print_device_stats(session);
  return 0;
}

}  // namespace weft::tools
