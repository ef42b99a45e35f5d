#include "runtime/listening_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "weft/core/error.h"

extern char** environ;

namespace weft {
namespace {

constexpr const char* kListeningProcessWhere = "child process";
constexpr const char* kKey = "listening on ";

// The address on the key's line once that line is complete, else "".
std::string address_in(const std::string& out) {
  const size_t at = out.find(kKey);
  if (at == std::string::npos) return "";
  const size_t end = out.find('\n', at);
  if (end == std::string::npos) return "";
  std::string a = out.substr(at + std::strlen(kKey), end - at - std::strlen(kKey));
  a.erase(0, a.find_first_not_of(" \t\r"));
  a.erase(a.find_last_not_of(" \t\r") + 1);
  return a;
}

}  // namespace

ListeningProcess::ListeningProcess(ListeningProcessOptions options) : options_(std::move(options)) {
  // Everything the child needs is made before fork(): after it, only
  // async-signal-safe calls and exec.
  std::vector<std::string> env = options_.env;
  if (env.empty())
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<char*> envp, args;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (std::string& s : options_.argv) args.push_back(s.data());
  args.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    fail(ErrorKind::out_of_memory, kListeningProcessWhere, std::string("pipe: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, options_.death_signal);
    if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
    ::dup2(fds[1], STDOUT_FILENO);
    if (options_.discard_stderr) {
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) ::dup2(null, STDERR_FILENO);
    }
    ::execve(options_.program.c_str(), args.data(), envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  if (pid_ < 0) {
    ::close(fds[0]);
    fail(ErrorKind::out_of_memory, kListeningProcessWhere, std::string("fork: ") + std::strerror(errno));
  }
  out_ = fds[0];
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + options_.ready_timeout;
  while (address_in(out).empty()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{out_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    char buf[256];
    const ssize_t got = ::read(out_, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // it ended (or closed its stdout) without the line
    out.append(buf, static_cast<size_t>(got));
  }
  address_ = address_in(out);
  if (address_.empty()) {
    const int status = stop();
    fail(ErrorKind::disconnected, kListeningProcessWhere,
         options_.program + " did not report where it listens (status " + std::to_string(status) + ", printed '" +
             out.substr(0, 500) + "')");
  }
}

ListeningProcess::~ListeningProcess() { stop(); }

int ListeningProcess::stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, options_.stop_signal);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (out_ >= 0) ::close(out_);
  out_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace weft
