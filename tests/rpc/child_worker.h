// A `weft worker` (or any program printing "listening on HOST:PORT") in a
// child process, for tests that kill it or measure it from outside.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace weft::rpc_test {

// A worker in a separate process, killed with SIGKILL: the real `weft
// worker` when the weft binary sits next to this test binary's folder
// (BUILD/tools/weft/weft), else this test binary run again with only
// DISABLED_ChildWorker. Either prints "listening on HOST:PORT" on stdout.
class ChildWorker {
  using Clock = std::chrono::steady_clock;


 public:
  // Starts argv[0] with argv; false when it ended without a port.
  bool start(std::vector<std::string> argv, const std::string& extra_env) {
    int fds[2];
    if (::pipe(fds) != 0) return false;
    // Everything the child needs is made before fork(): after it, only exec.
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "GTEST_", 6) != 0) env.emplace_back(*e);
    }
    if (!extra_env.empty()) env.push_back(extra_env);
    std::vector<char*> envp, args;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    for (auto& s : argv) args.push_back(s.data());
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      if (::getppid() != parent) ::_exit(1);
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      ::execve(args[0], args.data(), envp.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    if (pid_ < 0) {
      ::close(fds[0]);
      return false;
    }
    out_ = fds[0];
    std::string text;
    const std::string key = "listening on ";
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    size_t at = std::string::npos;
    while (Clock::now() < deadline) {
      at = text.find(key);
      if (at != std::string::npos && text.find('\n', at) != std::string::npos) break;
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char c[256];
      const ssize_t n = ::read(fds[0], c, sizeof c);
      if (n <= 0) break;
      text.append(c, static_cast<size_t>(n));
    }
    at = text.find(key);
    const size_t end = at == std::string::npos ? std::string::npos : text.find('\n', at);
    if (end == std::string::npos) {
      kill();
      return false;
    }
    const std::string address = text.substr(at + key.size(), end - at - key.size());
    endpoint_ = "127.0.0.1:" + address.substr(address.rfind(':') + 1);
    return true;
  }
  ~ChildWorker() { kill(); }

  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    if (out_ >= 0) ::close(out_);
    out_ = -1;
  }
  const std::string& endpoint() const { return endpoint_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;  // the read end of the child's stdout
  std::string endpoint_;
};

inline std::string self_path() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string();
}


// The weft binary of this build tree (BUILD/tools/weft/weft next to
// BUILD/tests/), or "" when it is not there.
inline std::string weft_binary() {
  const std::string self = self_path();
  const std::string weft = self.substr(0, self.rfind('/')) + "/../tools/weft/weft";
  return ::access(weft.c_str(), X_OK) == 0 ? weft : std::string();
}

}  // namespace weft::rpc_test
