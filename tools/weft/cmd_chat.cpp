// `weft chat` (and `weft run --conversation`): an interactive chat over a
// Session, placed and split exactly as `weft run` is. Each line typed is a
// user turn; the reply streams to stdout. The conversation's history stays
// in the KV cache (weft/serve/conversation.h), so a turn evaluates only its
// new tokens.
//
// Signals: SIGINT is blocked in every thread and taken by one waiting
// thread, which raises a flag and writes a byte into a pipe. A reply in
// progress sees the flag at its next token and stops (back to the prompt);
// at the prompt the pipe wakes the line reader, and the chat ends. End of
// input (Ctrl-D) ends it too; both with status 0. A second Ctrl-C before a
// reply noticed the first exits at once with status 130.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "chat_input.h"
#include "cli_options.h"
#include "commands.h"
#include "session_ui.h"
#include "weft/core/error.h"
#include "weft/serve/conversation.h"

namespace weft::tools {

namespace {

constexpr const char* kCmdChatWhere = "chat";
constexpr int64_t kDefaultContext = 4096;

void print_turn_stats(const serve::Reply& r, const serve::Conversation& chat) {
  const GenerateResult& g = r.generation;
  const double gen_s = g.total_seconds - g.prompt_seconds;
  std::fprintf(stderr,
               "[turn: %lld new tokens evaluated, %lld reused from the cache, in %.3f s; %zu reply tokens in %.3f s "
               "(%.1f tokens/s), stopped by %s; %lld of %lld positions used]\n",
               static_cast<long long>(r.evaluated), static_cast<long long>(r.reused), g.prompt_seconds,
               g.tokens.size(), gen_s, gen_s > 0 ? static_cast<double>(g.tokens.size()) / gen_s : 0.0,
               stop_reason_name(g.stop), static_cast<long long>(chat.positions()),
               static_cast<long long>(chat.capacity()));
}

}  // namespace

int cmd_chat(const ChatArgs& args) {
  if (args.ctx_size < 0)
    fail(ErrorKind::invalid_input, kCmdChatWhere, "--ctx-size " + std::to_string(args.ctx_size) + " (>= 0; 0: 4096)");
  if (args.n_tokens < -1 || args.n_tokens == 0)
    fail(ErrorKind::invalid_input, kCmdChatWhere,
         "--tokens " + std::to_string(args.n_tokens) + " (at least 1; -1: until the reply or the context ends)");
  (void)sampler_options(args.sampling, 0, kCmdChatWhere);  // the flags checked before any worker is dialed
  const std::string template_text = chat_template_source(args.chat_template, kCmdChatWhere);
  signal(SIGPIPE, SIG_IGN);  // a dead worker is an Error(disconnected), not a signal
  start_signal_thread();

  SessionOptions so = session_options(args.host, kCmdChatWhere);
  so.recover = args.recover;
  so.on_recovery = print_recovery;
  so.on_rejoin = print_rejoin;
  Session session(so);
  std::string warning;
  const serve::ChatTemplate tpl = serve::load_chat_template(template_text, args.host.model, &warning);
  if (!warning.empty()) std::fprintf(stderr, "weft: warning: %s\n", warning.c_str());

  int64_t n_ctx = args.ctx_size;
  const int64_t trained = session.params().n_ctx_train;
  if (n_ctx == 0) n_ctx = trained > 0 ? std::min(kDefaultContext, trained) : kDefaultContext;
  if (trained > 0 && n_ctx > trained)
    std::fprintf(stderr, "weft: warning: --ctx-size %lld is more than the %lld positions the model was trained on\n",
                 static_cast<long long>(n_ctx), static_cast<long long>(trained));
  serve::ConversationOptions co;
  co.system = args.system;
  if (args.n_tokens > 0) co.generate.max_tokens = args.n_tokens;
  co.generate.sampler = sampler_options(args.sampling, n_ctx, kCmdChatWhere);
  load_with_progress(session, n_ctx);
  serve::Conversation chat(session, tpl, co);

  const bool tty = isatty(STDIN_FILENO) != 0;
  std::fprintf(stderr, "chat: %lld positions; Ctrl-C stops a reply, Ctrl-C at the prompt or Ctrl-D ends the chat\n",
               static_cast<long long>(n_ctx));
  for (;;) {
    g_interrupted.store(false);
    drain_wake_pipe();
    if (tty) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    const std::optional<std::string> line = read_line();
    if (!line) {
      if (tty) std::fputc('\n', stdout);
      break;
    }
    if (line->find_first_not_of(" \t\r") == std::string::npos) continue;
    const model::Tokenizer& tok = session.tokenizer();
    g_in_reply.store(true);
    const serve::Reply r = chat.say(*line, [&tok](int32_t t) {
      const std::string piece = tok.decode_token(t);  // kept in the reply whatever this returns
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return !g_interrupted.load();
    });
    g_in_reply.store(false);
    if (r.evaluated == 0 && r.context_full) {
      std::fprintf(stderr,
                   "weft: the context is full (%lld of %lld positions hold the conversation; this turn needs more): "
                   "the chat ends here; start again with a larger --ctx-size\n",
                   static_cast<long long>(chat.positions()), static_cast<long long>(chat.capacity()));
      return 0;
    }
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (g_interrupted.load()) std::fprintf(stderr, "[reply stopped by Ctrl-C]\n");
    if (args.stats) print_turn_stats(r, chat);
    if (r.context_full) {
      std::fprintf(stderr,
                   "weft: the context is full (%lld positions): the reply was cut there and the chat ends; start "
                   "again with a larger --ctx-size\n",
                   static_cast<long long>(chat.capacity()));
      return 0;
    }
  }
  return 0;
}

void add_chat_command(CLI::App& app, Commands& out) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand(
      "chat", "an interactive chat with the model's chat template, split over this CPU and any workers like `run`");
  add_model_host_options(cmd, a->host);
  add_sampling_options(cmd, a->sampling);
  cmd->add_option("-c,--ctx-size", a->ctx_size,
                  "KV cache positions for the whole conversation (0: 4096, at most the model's training context)")
      ->capture_default_str();
  cmd->add_option("-n,--tokens", a->n_tokens, "most tokens per reply (-1: until the reply or the context ends)")
      ->capture_default_str();
  cmd->add_option("--system", a->system, "the system message");
  cmd->add_option("--chat-template", a->chat_template,
                  "a built-in template NAME or a FILE (default: the model's, else chatml)");
  cmd->add_flag("--stats", a->stats, "per turn: tokens evaluated and reused from the cache, speeds");
  cmd->add_flag("--recover", a->recover,
                "when a worker dies, re-place the model over the devices left and go on with the same reply (docs/recovery.md)");
  out.push_back({cmd, [a] { return cmd_chat(*a); }});
}

}  // namespace weft::tools
