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
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "cli_options.h"
#include "commands.h"
#include "session_ui.h"
#include "weft/core/error.h"
#include "weft/serve/conversation.h"

namespace weft::tools {
namespace {

constexpr const char* kWhere = "chat";
constexpr int64_t kDefaultContext = 4096;

std::atomic<bool> g_interrupted{false};
std::atomic<bool> g_in_reply{false};  // a turn is being evaluated or generated
int g_wake[2] = {-1, -1};  // the signal thread writes a byte into [1]

// Takes SIGINT for the whole process (it is blocked in every thread created
// after this, the Session's included).
void start_signal_thread() {
  if (::pipe(g_wake) != 0) fail(ErrorKind::internal, kWhere, std::string("pipe: ") + std::strerror(errno));
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      // A second Ctrl-C before the reply noticed the first (a long prompt,
      // a worker that stopped answering): leave at once.
      if (g_interrupted.exchange(true) && g_in_reply.load()) {
        static const char kMessage[] = "\nweft: interrupted twice: exiting\n";
        (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
        _exit(130);
      }
      const char byte = 1;
      (void)!::write(g_wake[1], &byte, 1);
    }
  }).detach();  // lives as long as the process: blocked in sigwait
}

void drain_wake_pipe() {
  pollfd p{g_wake[0], POLLIN, 0};
  char buf[64];
  while (::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) && ::read(g_wake[0], buf, sizeof buf) > 0) {
  }
}

// One line from stdin without its newline; nullopt at end of input or when
// SIGINT came while waiting.
std::optional<std::string> read_line() {
  std::string line;
  for (;;) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      fail(ErrorKind::internal, kWhere, std::string("poll: ") + std::strerror(errno));
    }
    if (fds[1].revents & POLLIN) return std::nullopt;
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char c;
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return line.empty() ? std::nullopt : std::optional<std::string>(line);
    if (c == '\n') return line;
    line += c;
  }
}

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
    fail(ErrorKind::invalid_input, kWhere, "--ctx-size " + std::to_string(args.ctx_size) + " (>= 0; 0: 4096)");
  if (args.n_tokens < -1 || args.n_tokens == 0)
    fail(ErrorKind::invalid_input, kWhere,
         "--tokens " + std::to_string(args.n_tokens) + " (at least 1; -1: until the reply or the context ends)");
  (void)sampler_options(args.sampling, 0, kWhere);  // the flags checked before any worker is dialed
  const std::string template_text = chat_template_source(args.chat_template, kWhere);
  signal(SIGPIPE, SIG_IGN);  // a dead worker is an Error(disconnected), not a signal
  start_signal_thread();

  Session session(session_options(args.host, kWhere));
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
  co.generate.sampler = sampler_options(args.sampling, n_ctx, kWhere);
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

}  // namespace weft::tools
