// What the parts of weft_fuzz_worker share (fuzz_structured.cpp has the
// overview, the flags and the long-run command): the run's options, the
// worker under test with the client that must never notice the cases, the
// case line a crash report prints, outcome counters, a graph laid out in one
// remote buffer, and each part's entry points.
//
//   fuzz_structured.cpp           flags, main, the run loop, the checks after a case, crash reports
//   fuzz_structured_valid.cpp     valid graphs, computed by the worker and held to the reference
//   fuzz_structured_mutate.cpp    mutated graphs: the mutator and its scenario
//   fuzz_structured_lifetime.cpp  freed, foreign and evicted handles and graphs; ranges at the edges
//   fuzz_structured_support.cpp   SUPPORTS_OP questions, valid and broken (run by the lifetime part)
//   fuzz_structured_racing.cpp    sessions at once, some dropping or stalling mid-frame
//   fuzz_structured_links.cpp     PEER_CONNECT against the dial policy, hostile peer pushes, a TLS
//                                 worker's handshake; the second and the TLS worker they need
//   fuzz_structured_graphs.cpp    the random graph generator: drawing shapes, dtypes and layouts
//   fuzz_structured_recipes.cpp   the generator's recipes, one per op family
//
// Everything here runs on the test's thread except where a part says so:
// the racing sessions call run_valid (and so the generator) on threads of
// their own, which is why the counters are atomic and the case line ignores
// them. The links part keeps two more in-process workers (made on first
// use, stopped with Env); nothing else touches them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "conformance/cases.h"
#include "conformance/reference.h"
#include "weft/backend/cpu.h"
#include "weft/rpc/worker.h"
#include "worker_wire.h"

namespace weft::rpc::fuzz {

using conformance::Rng;

inline constexpr size_t kBudget = size_t{256} << 20;
inline constexpr uint32_t kDevices = 2;

struct Options {
  double seconds = 10;
  uint64_t seed = 0;
  int threads = 2;
  std::string only;  // one scenario kind, or all
  std::optional<uint64_t> case_seed;
  uint64_t max_graph_cost = uint64_t{1} << 28;  // bounds what a mutated graph may ask of the CPU
  bool verbose = false;
};
extern Options g_opts;

inline int64_t pick(Rng& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
inline bool chance(Rng& rng, double p) {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p;
}
template <class T, size_t N>
T one_of(Rng& rng, const T (&v)[N]) {
  return v[static_cast<size_t>(pick(rng, 0, N - 1))];
}
inline wtest::Bytes random_bytes(Rng& rng, size_t n) {
  wtest::Bytes b(n);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// What a crash report names: the current case's head and desc. Only the
// test's thread sets it (calls from other threads are ignored).
void set_case_line(const std::string& desc);

// Stops the links part's workers, if it made them (fuzz_structured_links.cpp).
void stop_link_workers();

// The worker and the client that must never notice the others.
struct Env {
  explicit Env(const Options& opt) : cpu0(make_cpu_device(opt.threads)), cpu1(make_cpu_device(1)) {
    WorkerOptions o;
    o.log = std::getenv("WEFT_FUZZ_LOG") != nullptr;
    o.memory_budget = kBudget;
    o.limits.max_graph_cost = opt.max_graph_cost;
    o.limits.io_timeout = std::chrono::milliseconds(3000);  // stalled frames end soon
    o.limits.handshake_timeout = std::chrono::milliseconds(3000);
    worker = std::make_unique<Worker>(std::vector<Device*>{cpu0.get(), cpu1.get()}, o);
    worker->start();
    good = std::make_unique<wtest::GoodClient>(worker->port(), 0, 7);
    good->round();
    good->round();
    baseline = worker->memory_in_use();
  }
  ~Env() {
    stop_link_workers();  // their sessions may hold links into this worker
    good.reset();
    worker->stop();
  }
  std::unique_ptr<wtest::Conn> fresh() const {
    auto c = std::make_unique<wtest::Conn>(worker->port());
    c->handshake();
    return c;
  }

  std::unique_ptr<Device> cpu0, cpu1;
  std::unique_ptr<Worker> worker;
  std::unique_ptr<wtest::GoodClient> good;
  size_t baseline = 0;  // memory_in_use with only the good client connected
};
extern Env* env;  // set by the test for its run

struct Stats {
  std::atomic<int> ran{0}, deferred{0}, refused{0}, unsupported_graphs{0};
  // The links part: PEER_CONNECT replies by what they were, pushes a link's
  // session took, links it ended, hostile connections to the TLS worker.
  std::atomic<int> dial_linked{0}, dial_refused{0}, dial_failed{0}, dial_rate_limited{0}, dial_fatal{0};
  std::atomic<int> pushes_taken{0}, links_ended{0}, tls_hostile{0};
};
extern Stats g_stats;

// A graph built locally, laid out in one remote buffer.
struct Placed {
  Context ctx;
  conformance::CaseBuilder b{ctx};
  Graph g;
  std::string desc;
  std::optional<wtest::Placement> at;  // set by finish()
  uint64_t bytes = 0;                  // the buffer it needs

  // Expands the outputs into g and lays out every tensor that has memory.
  void finish() {
    for (Tensor* r : b.roots()) g.expand(r);
    at.emplace(g);
    bytes = at->bytes;
  }
  uint64_t offset(const Tensor& t) const { return at->offsets.at(&t); }
  // Where t's data starts in the buffer (a view: in its root's memory).
  uint64_t where(const Tensor& t) const {
    return t.view_src != nullptr ? offset(*t.view_src) + t.view_offs : offset(t);
  }
  wtest::Bytes encode(uint64_t handle) const { return at->encode(g, handle); }
};

// --- fuzz_structured.cpp ---

enum class Outcome { ran, deferred, refused, failed };

// After a request without a reply: PING. Either the PING reply (it ran), or
// an ERROR that is not invalid_input followed by a working session (a
// deferred error), or ERROR invalid_input and the connection closed. Anything
// else (no ERROR, a hang, the session kept after invalid_input) fails.
Outcome settle(wtest::Conn& c, const std::string& desc);

// --- fuzz_structured_valid.cpp ---

// A valid random graph the CPU device computes; small: one op on small shapes.
// Now and then (not small) one of the conformance suite's own cases.
std::unique_ptr<Placed> make_graph(Rng& rng, bool small);
// Uploads fresh values for every leaf (each leaf's Init) and loads them into ref.
void upload(wtest::Conn& c, uint64_t h, Placed& p, Rng& rng, conformance::Reference& ref);
// Reads every compared tensor and holds it to ref; "" or what differed.
std::string check_outputs(wtest::Conn& c, uint64_t h, Placed& p, conformance::Reference& ref);
// Builds, uploads, computes and checks one valid graph on c (a session of
// its own or shared with other work); frees its buffer after.
void run_valid(wtest::Conn& c, Rng& rng, bool small, std::string& desc);

// --- the other scenarios, each on sessions of its own; desc says what ran ---

void run_mutated(Rng& rng, std::string& desc);   // fuzz_structured_mutate.cpp
void run_lifetime(Rng& rng, std::string& desc);  // fuzz_structured_lifetime.cpp
void run_racing(Rng& rng, std::string& desc);    // fuzz_structured_racing.cpp
void run_support(Rng& rng, std::string& desc);   // fuzz_structured_support.cpp
void run_dial(Rng& rng, std::string& desc);      // fuzz_structured_links.cpp
void run_push(Rng& rng, std::string& desc);      // fuzz_structured_links.cpp
void run_tls(Rng& rng, std::string& desc);       // fuzz_structured_links.cpp

// After a case: the links part's workers, if the case used them, serve a
// good client and are back to the sessions and memory they held before.
void check_link_workers(const std::string& desc);

// --- the generator and the mutator ---

// Adds 1 (small) or 1-3 independent random computations to b, each output
// registered with b.output and its tolerance; desc gets one line each.
void build_random_graph(conformance::CaseBuilder& b, Rng& rng, bool small, std::string& desc);
// Returns encoded with 1-3 random mutations; desc says which. foreign_handle
// is a live handle of another session (never usable here).
std::vector<uint8_t> mutate_graph(const std::vector<uint8_t>& encoded, Rng& rng, uint64_t foreign_handle,
                                  std::string& desc);

// The generator's parts (fuzz_structured_graphs.cpp draws, fuzz_structured_recipes.cpp
// builds); nothing else uses them.
namespace gen {

inline bool is_quant(DType t) { return traits(t).quantized; }

inline constexpr DType kFloat[] = {DType::f32, DType::f16, DType::bf16};
inline constexpr DType kPlain[] = {DType::f32, DType::f16, DType::bf16, DType::i32};
// Every storage type: weights, caches, embeddings.
inline constexpr DType kWeights[] = {DType::f32,  DType::f16,  DType::bf16, DType::q8_0, DType::q4_0,
                                     DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_K, DType::q3_K,
                                     DType::q4_K, DType::q5_K, DType::q6_K, DType::iq4_nl, DType::iq4_xs,
                                     DType::mxfp4};
inline constexpr DType kAll[] = {DType::f32,  DType::f16,  DType::bf16, DType::i32,  DType::q8_0,
                                 DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_K,
                                 DType::q3_K, DType::q4_K, DType::q5_K, DType::q6_K, DType::iq4_nl,
                                 DType::iq4_xs, DType::mxfp4};

// Sizes: mostly small, sometimes 1, sometimes up to max (vector loops and tails).
int64_t size(Rng& rng, int64_t max);
// A row length: a whole number of blocks for a quantized type.
int64_t row(Rng& rng, DType t, int64_t max);
// A random shape; zero_ok: one dim may be 0 (8% of the time).
conformance::Shape shape(Rng& rng, int64_t max0, bool zero_ok, DType t = DType::f32);
// A size that divides n (n == 0: anything divides it).
int64_t divisor(Rng& rng, int64_t n);
conformance::Layout layout(Rng& rng, DType t);
// The description's suffix for operand which laid out as l.
std::string lay(conformance::Layout l, const char* which);
// Indices in range for an i32 data operand; the default for the rest.
conformance::Init data_init(DType t);

// What a recipe produced: root is computed, dest compared (root writes
// into dest for set_rows and cpy), with the tolerance of cases.h.
struct Out {
  Tensor* root = nullptr;
  Tensor* dest = nullptr;
  double tol = 0.0;
};

// The recipes, by op family; each appends what it built to d.
Out binary(conformance::CaseBuilder& b, Rng& rng, int64_t max0, std::string& d);
Out unary(conformance::CaseBuilder& b, Rng& rng, int64_t max0, std::string& d);
Out rows(conformance::CaseBuilder& b, Rng& rng, int64_t max0, std::string& d);
Out rope(conformance::CaseBuilder& b, Rng& rng, std::string& d);
Out attention(conformance::CaseBuilder& b, Rng& rng, std::string& d);
Out mul_mat(conformance::CaseBuilder& b, Rng& rng, int64_t max0, std::string& d);
Out data(conformance::CaseBuilder& b, Rng& rng, int64_t max0, std::string& d);
Out views(conformance::CaseBuilder& b, Rng& rng, std::string& d);
// A cheap op on a float result: error grows by a bounded factor at most.
Out post(conformance::CaseBuilder& b, Rng& rng, const Out& in, std::string& d);

}  // namespace gen
}  // namespace weft::rpc::fuzz
