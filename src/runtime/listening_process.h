// A program in a child process that says where it listens: it prints a line
// "... listening on ADDRESS" on stdout once ready (as `weft worker` does).
// `weft demo` starts its two workers with this, and the RPC tests start the
// workers they kill or measure from outside (tests/rpc/child_worker.h).
// Internal (not installed): reached through weft_internal.
//
//   ListeningProcessOptions o;
//   o.program = "/proc/self/exe";
//   o.argv = {"weft", "worker", "--port", "0"};
//   ListeningProcess worker(o);          // throws if it never says where
//   connect_to(worker.address());        // "127.0.0.1:41234"
//   worker.stop();                       // SIGTERM, reaped; its exit status
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

namespace weft {

struct ListeningProcessOptions {
  std::string program;            // the file executed
  std::vector<std::string> argv;  // its arguments, argv[0] included
  // The child's whole environment; empty: this process's.
  std::vector<std::string> env;
  bool discard_stderr = false;    // its stderr to /dev/null (else shared with this process)
  int stop_signal = SIGTERM;      // what stop() and the destructor send
  int death_signal = SIGTERM;     // what the child gets if this process dies first
  std::chrono::milliseconds ready_timeout{20000};  // to print its line
};

// One child process; not copyable or movable (it owns the pid and a pipe).
class ListeningProcess {
 public:
  // Starts the program and waits for its "listening on " line. Throws
  // Error(disconnected) naming the program and what it printed when it
  // ends, or stays silent past ready_timeout, first (the child is then
  // killed and reaped); Error(out_of_memory) when pipe() or fork() fails.
  explicit ListeningProcess(ListeningProcessOptions options);
  ~ListeningProcess();  // stop()
  ListeningProcess(const ListeningProcess&) = delete;
  ListeningProcess& operator=(const ListeningProcess&) = delete;

  // The text after "listening on " on its line, surrounding spaces removed.
  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }

  // Sends stop_signal and reaps the child. Returns its exit status, or 128 +
  // the signal that ended it; -1 when already stopped.
  int stop();

 private:
  ListeningProcessOptions options_;
  pid_t pid_ = -1;
  int out_ = -1;  // the read end of the child's stdout, open while it runs (its writes never fail)
  std::string address_;
};

}  // namespace weft
