// A `weft worker` (or any program printing "listening on HOST:PORT") in a
// child process, for tests that kill it or measure it from outside.
#pragma once

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/listening_process.h"
#include "weft/core/error.h"

extern char** environ;

namespace weft::rpc_test {

using weft::ListeningProcess;
using weft::ListeningProcessOptions;

// A worker in a separate process, killed with SIGKILL: the real `weft
// worker` when the weft binary sits next to this test binary's folder
// (BUILD/tools/weft/weft), else this test binary run again with only
// DISABLED_ChildWorker. Either prints "listening on HOST:PORT" on stdout.
// The process itself is the library's ListeningProcess (the helper `weft
// demo` starts its workers with).
class ChildWorker {
 public:
  // Starts argv[0] with argv; false when it ended without a port.
  bool start(std::vector<std::string> argv, const std::string& extra_env) {
    ListeningProcessOptions o;
    o.program = argv[0];
    o.argv = std::move(argv);
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "GTEST_", 6) != 0) o.env.emplace_back(*e);
    }
    if (!extra_env.empty()) o.env.push_back(extra_env);
    o.stop_signal = SIGKILL;
    o.death_signal = SIGKILL;  // never outlive the test
    o.ready_timeout = std::chrono::seconds(60);
    try {
      process_ = std::make_unique<ListeningProcess>(std::move(o));
    } catch (const Error&) {
      return false;
    }
    const std::string& address = process_->address();
    endpoint_ = "127.0.0.1:" + address.substr(address.rfind(':') + 1);
    return true;
  }

  void kill() { process_.reset(); }
  const std::string& endpoint() const { return endpoint_; }
  pid_t pid() const { return process_ ? process_->pid() : -1; }

 private:
  std::unique_ptr<ListeningProcess> process_;
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
