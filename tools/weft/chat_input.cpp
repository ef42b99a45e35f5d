// The terminal side of `weft chat` (chat_input.h).
#include "chat_input.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "weft/core/error.h"

namespace weft::tools {

std::atomic<bool> g_interrupted{false};
std::atomic<bool> g_in_reply{false};

namespace {
int g_wake[2] = {-1, -1};  // the signal thread writes a byte into [1]
}  // namespace

void start_signal_thread() {
  if (::pipe(g_wake) != 0) fail(ErrorKind::internal, "chat", std::string("pipe: ") + std::strerror(errno));
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

std::optional<std::string> read_line() {
  std::string line;
  for (;;) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      fail(ErrorKind::internal, "chat", std::string("poll: ") + std::strerror(errno));
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

}  // namespace weft::tools
