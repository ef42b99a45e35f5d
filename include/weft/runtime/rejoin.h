// Rejoin: a worker lost during a generation (SessionOptions::recover) that
// answers again at its address is taken back at a token boundary when the
// move pays for itself (docs/recovery.md "Rejoin").
//
//   RejoinWatch watch(rpc_options);
//   watch.watch("10.0.0.2:50052");            // probed in the background
//   ... at each token boundary:
//   if (watch.answered("10.0.0.2:50052")) {
//     RejoinEstimate e{.seconds_per_token_now = 0.09, .seconds_per_token_with = 0.05,
//                      .remaining_tokens = 40, .move_seconds = 0.8};
//     if (e.pays()) ... place the model again with the worker ...
//   }
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "weft/rpc/client.h"
#include "weft/runtime/rejoin_estimate.h"

namespace weft {

// Probes lost workers' endpoints from a thread of its own, so a probe (a
// connect and HELLO, bounded by the connect timeout) never holds up a token.
// An endpoint that refuses or fails is tried again after a pause that starts
// at min_backoff and doubles up to max_backoff; one that answers is reported
// by answered() until forgotten. Thread-safe; the destructor stops the
// thread and waits for a probe in flight (at most the connect timeout).
class RejoinWatch {
 public:
  explicit RejoinWatch(RpcOptions options, std::chrono::milliseconds min_backoff = std::chrono::milliseconds(200),
                       std::chrono::milliseconds max_backoff = std::chrono::milliseconds(1000));
  ~RejoinWatch();
  RejoinWatch(const RejoinWatch&) = delete;
  RejoinWatch& operator=(const RejoinWatch&) = delete;

  // Starts probing endpoint (again, after forget), first at once.
  void watch(const std::string& endpoint);
  // Stops probing it and forgets that it answered.
  void forget(const std::string& endpoint);
  // Whether a probe of endpoint completed a handshake since watch().
  bool answered(const std::string& endpoint) const;
  // Probes made so far (each a connect attempt), for tests and stats.
  uint64_t probes() const;

 private:
  struct Target {
    std::chrono::steady_clock::time_point next;
    std::chrono::milliseconds backoff{0};
    bool answered = false;
  };
  void run();

  const RpcOptions options_;
  const std::chrono::milliseconds min_backoff_, max_backoff_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<std::string, Target> targets_;
  uint64_t probes_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace weft
