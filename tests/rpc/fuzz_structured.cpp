// weft_fuzz_worker: a structure-aware fuzzer of the worker (docs/rpc-protocol.md).
// An in-process Worker (two CPU devices, a 256 MiB budget) on 127.0.0.1 gets
// random cases, each on fresh connections, until time runs out:
//   valid     random valid graphs (fuzz_structured_graphs.cpp), computed by the
//             worker and held to the conformance suite's float64 reference
//             and tolerances; sometimes run again by graph id on new inputs;
//   mutated   a valid graph with 1-3 fields broken: the worker must run it
//             (the session then answers PING, or a deferred ERROR and then
//             PING) or answer ERROR invalid_input and close; never crash or hang;
//   lifetime  freed, double-freed, foreign and evicted handles and graphs,
//             events across devices, ranges at the buffer's edges, copies
//             that overlap, indices out of range in a graph's data, and
//             SUPPORTS_OP questions, valid (the CPU's answer) or broken;
//   racing    several sessions at once doing real work, beside sessions that
//             drop mid-frame, mid-compute, mid-handshake or stall mid-frame;
//   dial      PEER_CONNECTs to the worker itself, closed ports, a second
//             worker, a TLS worker, addresses outside the dial policy,
//             malformed endpoints, 65 in a session: each reply held to a
//             model of the policy, the count and the one failure text;
//   push      a raw peer link's hostile PEER_PUSHes (failures about the
//             string limit, empty parts, 1,024 parts, floods until the inbox
//             refuses) held to a model of the inbox and its charges;
//   tls       garbage, truncated ClientHellos and plain HELLOs sent to a TLS
//             worker, then a real TLS client that must be served.
// After every case a client connected at the start (worker_wire.h
// GoodClient) must still compute correctly on inputs it uploaded before the
// case, the worker must be back to one session and to the memory it held
// before the case; so must the second and the TLS worker, if it used them
// (fuzz_structured_links.cpp).
//
//   weft_fuzz_worker [--seconds S] [--seed N] [--workers-threads T]
//                    [--only valid|mutated|lifetime|racing|dial|push|tls]
//                    [--case-seed X] [--max-graph-cost C] [--verbose]
//
// ctest runs it for 20 s in the ASan+UBSan tree (fuzz_structured_short;
// other trees build it on request). A long run, under ASan+UBSan:
//   make build/asan/build.ninja && cmake --build build/asan --target weft_fuzz_worker
//   export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
//   build/asan/tests/rpc/weft_fuzz_worker --seconds 1800
// A failure (or a sanitizer report) names the run's seed and the failing
// case's seed; `--case-seed X` (with the same --only, if any) reruns that one
// case. WEFT_FUZZ_LOG=1 shows the worker's log lines.
//
// This file is the driver: the flags, the run loop, the checks on the worker
// after each case and the crash report; fuzz_structured.h lists the parts.
#include "fuzz_structured.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <thread>

#include "worker_wire.h"

#include "sanitized.h"
#ifdef WEFT_SANITIZED
#include <sanitizer/common_interface_defs.h>
#endif

namespace weft::rpc::fuzz {

using namespace wtest;

Options g_opts;
Env* env = nullptr;
Stats g_stats;

// --- the case being run, for a crash report (signal handler or sanitizer death callback) ---

namespace {

char g_case_line[2048] = "fuzz_structured: died before the first case\n";
std::string g_case_head;        // "case N (kind, seeds): "
std::thread::id g_main_thread;  // the only writer of both (racing threads keep out)

void print_case_line() {
  const ssize_t ignored = ::write(2, g_case_line, std::strlen(g_case_line));
  (void)ignored;
}
#ifndef WEFT_SANITIZED
void on_fatal_signal(int sig) {
  print_case_line();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
#endif

}  // namespace

void set_case_line(const std::string& desc) {
  if (std::this_thread::get_id() != g_main_thread) return;
  std::snprintf(g_case_line, sizeof g_case_line, "fuzz_structured: died in %s%s\n", g_case_head.c_str(), desc.c_str());
}

// --- outcomes of a request that may be refused ---

Outcome settle(Conn& c, const std::string& desc) {
  try {
    c.send(Cmd::ping, Bytes{});
  } catch (const Error&) {  // already closed: its ERROR should still be readable
  }
  Frame f;
  try {
    f = c.recv();
  } catch (const Error& e) {
    ADD_FAILURE() << "[" << desc << "] neither a PING reply nor an ERROR: " << e.what();
    return Outcome::failed;
  }
  if (f.command == (static_cast<uint16_t>(Cmd::ping) | kReplyBit) && f.payload.empty()) {
    ++g_stats.ran;
    return Outcome::ran;
  }
  if (!f.is_error() || f.payload.empty()) {
    ADD_FAILURE() << "[" << desc << "] unexpected frame " << f.command << " (" << f.payload.size() << " bytes)";
    return Outcome::failed;
  }
  std::string message;
  try {
    message = f.error_message();
  } catch (const Error& e) {
    ADD_FAILURE() << "[" << desc << "] malformed ERROR payload: " << e.what();
    return Outcome::failed;
  }
  if (f.error_kind() == ErrorKind::invalid_input) {
    if (!c.closed_by_peer()) ADD_FAILURE() << "[" << desc << "] session kept after invalid_input: " << message;
    ++g_stats.refused;
    return Outcome::refused;
  }
  try {
    c.ping();  // not the client's fault: the session stays, the error is cleared
  } catch (const Error& e) {
    ADD_FAILURE() << "[" << desc << "] session gone after a deferred " << message << ": " << e.what();
    return Outcome::failed;
  }
  ++g_stats.deferred;
  return Outcome::deferred;
}

namespace {

// --- the driver ---

constexpr const char* kKinds[] = {"valid", "mutated", "lifetime", "racing", "dial", "push", "tls"};
constexpr int kKindCount = 7;

// The worker after a case: the good client computes correctly on inputs it
// uploaded before the case, one session remains, memory is back to baseline.
void check_worker(const std::string& desc) {
  env->good->compute_and_check();
  if (!eventually([] { return env->worker->active_sessions() == 1; })) {
    ADD_FAILURE() << "[" << desc << "] " << env->worker->active_sessions() << " sessions still open";
  }
  if (!eventually([] { return env->worker->memory_in_use() == env->baseline; })) {
    ADD_FAILURE() << "[" << desc << "] memory_in_use " << env->worker->memory_in_use() << " after the case, "
                  << env->baseline << " before";
  }
  check_link_workers(desc);
}

TEST(FuzzStructured, Run) {
  const Options& o = g_opts;
  std::printf("fuzz_structured: seed %llu, %g s, %d worker threads%s%s\n", static_cast<unsigned long long>(o.seed),
              o.seconds, o.threads, o.only.empty() ? "" : ", only ", o.only.c_str());
  std::fflush(stdout);
  g_main_thread = std::this_thread::get_id();
  Env e(o);
  env = &e;
  Rng master(o.seed);
  int counts[kKindCount] = {};
  int total = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.seconds);
  while (o.case_seed || std::chrono::steady_clock::now() < deadline) {
    const uint64_t case_seed = o.case_seed ? *o.case_seed : master();
    Rng rng(case_seed);
    const int r = static_cast<int>(pick(rng, 0, 99));
    int kind = r < 32 ? 0 : r < 68 ? 1 : r < 82 ? 2 : r < 90 ? 3 : r < 95 ? 4 : r < 98 ? 5 : 6;
    for (int k = 0; k < kKindCount; ++k) {
      if (o.only == kKinds[k]) kind = k;
    }
    char head[160];
    std::snprintf(head, sizeof head, "case %d (%s, --case-seed %llu, run --seed %llu): ", total, kKinds[kind],
                  static_cast<unsigned long long>(case_seed), static_cast<unsigned long long>(o.seed));
    std::string desc;
    g_case_head = head;
    set_case_line(desc);
    const auto started = std::chrono::steady_clock::now();
    e.good->upload();
    try {
      switch (kind) {
        case 0: {
          auto c = e.fresh();
          run_valid(*c, rng, false, desc);
          c->ping();
          break;
        }
        case 1: run_mutated(rng, desc); break;
        case 2: run_lifetime(rng, desc); break;
        case 3: run_racing(rng, desc); break;
        case 4: run_dial(rng, desc); break;
        case 5: run_push(rng, desc); break;
        default: run_tls(rng, desc);
      }
    } catch (const std::exception& ex) {
      ADD_FAILURE() << "[" << desc << "] " << ex.what();
    }
    set_case_line(desc + " (checking the worker after it)");
    try {
      check_worker(desc);
    } catch (const std::exception& ex) {
      ADD_FAILURE() << "[" << desc << "] the good client failed: " << ex.what();
    }
    ++counts[kind];
    ++total;
    if (o.verbose) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
      std::printf("%s%s (%lld ms)\n", head, desc.c_str(), static_cast<long long>(ms.count()));
    }
    if (HasFailure()) {
      std::printf("fuzz_structured: FAILED %s%s\n  rerun it: weft_fuzz_worker --case-seed %llu%s%s\n", head,
                  desc.c_str(), static_cast<unsigned long long>(case_seed), o.only.empty() ? "" : " --only ",
                  o.only.c_str());
      std::fflush(stdout);
      return;  // a worker in a bad state may not stop cleanly: Env's destructor still tries
    }
    if (o.case_seed) break;
  }
  std::printf(
      "fuzz_structured: mutated/lifetime outcomes: %d ran, %d deferred errors, %d refused; %d unsupported "
      "graphs redrawn\n",
      g_stats.ran.load(), g_stats.deferred.load(), g_stats.refused.load(), g_stats.unsupported_graphs.load());
  std::printf(
      "fuzz_structured: dial/push/tls outcomes: %d links made, %d dials refused before dialing, %d failed (one "
      "text), %d rate-limited, %d ended the session; %d pushes taken, %d links ended; %d hostile TLS connections\n",
      g_stats.dial_linked.load(), g_stats.dial_refused.load(), g_stats.dial_failed.load(),
      g_stats.dial_rate_limited.load(), g_stats.dial_fatal.load(), g_stats.pushes_taken.load(),
      g_stats.links_ended.load(), g_stats.tls_hostile.load());
  std::printf(
      "fuzz_structured: %d cases (valid %d, mutated %d, lifetime %d, racing %d, dial %d, push %d, tls %d), seed %llu, "
      "0 failures\n",
      total, counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6],
      static_cast<unsigned long long>(o.seed));
  std::fflush(stdout);
}

bool parse_options(int argc, char** argv, Options& o) {
  o.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^ std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--seconds" && has) {
      o.seconds = std::stod(argv[++i]);
    } else if (a == "--seed" && has) {
      o.seed = std::stoull(argv[++i]);
    } else if ((a == "--workers-threads" || a == "--threads") && has) {
      o.threads = std::stoi(argv[++i]);
    } else if (a == "--only" && has) {
      o.only = argv[++i];
      if (std::find(std::begin(kKinds), std::end(kKinds), o.only) == std::end(kKinds)) return false;
    } else if (a == "--case-seed" && has) {
      o.case_seed = std::stoull(argv[++i]);
    } else if (a == "--max-graph-cost" && has) {
      o.max_graph_cost = std::stoull(argv[++i]);
    } else if (a == "--verbose") {
      o.verbose = true;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace weft::rpc::fuzz

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!weft::rpc::fuzz::parse_options(argc, argv, weft::rpc::fuzz::g_opts)) {
    std::fprintf(stderr,
                 "usage: weft_fuzz_worker [--seconds S] [--seed N] [--workers-threads T] "
                 "[--only valid|mutated|lifetime|racing|dial|push|tls] [--case-seed X] [--max-graph-cost C] "
                 "[--verbose]\n");
    return 2;
  }
#ifdef WEFT_SANITIZED
  __sanitizer_set_death_callback(weft::rpc::fuzz::print_case_line);
#else
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, weft::rpc::fuzz::on_fatal_signal);
#endif
  std::signal(SIGPIPE, SIG_IGN);
  return RUN_ALL_TESTS();
}
