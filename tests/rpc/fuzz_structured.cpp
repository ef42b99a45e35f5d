// weft_fuzz_worker: a structure-aware fuzzer of the worker (docs/rpc-protocol.md).
// An in-process Worker (two CPU devices, a 256 MiB budget) on 127.0.0.1 gets
// random cases, each on fresh connections, until time runs out:
//   valid     random valid graphs (fuzz_structured_gen.cpp), computed by the
//             worker and held to the conformance suite's float64 reference
//             and tolerances; sometimes run again by graph id on new inputs;
//   mutated   a valid graph with 1-3 fields broken: the worker must run it
//             (the session then answers PING, or a deferred ERROR and then
//             PING) or answer ERROR invalid_input and close; never crash or hang;
//   lifetime  freed, double-freed, foreign and evicted handles and graphs,
//             events across devices, ranges at the buffer's edges, copies
//             that overlap, indices out of range in a graph's data;
//   racing    several sessions at once doing real work, beside sessions that
//             drop mid-frame, mid-compute, mid-handshake or stall mid-frame.
// After every case a client connected at the start (worker_wire.h
// GoodClient) must still compute correctly on inputs it uploaded before the
// case, the worker must be back to one session and to the memory it held
// before the case.
//
//   weft_fuzz_worker [--seconds S] [--seed N] [--workers-threads T]
//                    [--only valid|mutated|lifetime|racing] [--case-seed X]
//                    [--max-graph-cost C] [--verbose]
//
// ctest runs it for 20 s in every build tree (fuzz_structured_short). A long
// run, under ASan+UBSan (and likewise build/tsan with TSAN_OPTIONS=halt_on_error=1):
//   make build/asan/build.ninja && cmake --build build/asan --target weft_fuzz_worker
//   export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
//   build/asan/tests/rpc/weft_fuzz_worker --seconds 1800
// A failure (or a sanitizer report) names the run's seed and the failing
// case's seed; `--case-seed X` (with the same --only, if any) reruns that one
// case. WEFT_FUZZ_LOG=1 shows the worker's log lines.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "conformance/cases.h"
#include "conformance/reference.h"
#include "server/worker.h"
#include "weft/cpu.h"
#include "worker_wire.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WEFT_FUZZ_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define WEFT_FUZZ_SANITIZED 1
#endif
#endif
#ifdef WEFT_FUZZ_SANITIZED
#include <sanitizer/common_interface_defs.h>
#endif

namespace weft::rpc::fuzz {

// fuzz_structured_gen.cpp
void build_random_graph(conformance::CaseBuilder& b, conformance::Rng& rng, bool small, std::string& desc);
std::vector<uint8_t> mutate_graph(const std::vector<uint8_t>& encoded, conformance::Rng& rng, uint64_t foreign_handle,
                                  std::string& desc);

namespace {

using namespace wtest;
using conformance::Rng;

constexpr size_t kBudget = size_t{256} << 20;
constexpr uint32_t kDevices = 2;

struct Options {
  double seconds = 10;
  uint64_t seed = 0;
  int threads = 2;
  std::string only;  // one scenario kind, or all
  std::optional<uint64_t> case_seed;
  uint64_t max_graph_cost = uint64_t{1} << 28;  // bounds what a mutated graph may ask of the CPU
  bool verbose = false;
};
Options g_opts;

int64_t pick(Rng& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
bool chance(Rng& rng, double p) {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p;
}

// --- the case being run, for a crash report (signal handler or sanitizer death callback) ---

char g_case_line[2048] = "fuzz_structured: died before the first case\n";
std::string g_case_head;        // "case N (kind, seeds): "
std::thread::id g_main_thread;  // the only writer of both (racing threads keep out)
void set_case_line(const std::string& desc) {
  if (std::this_thread::get_id() != g_main_thread) return;
  std::snprintf(g_case_line, sizeof g_case_line, "fuzz_structured: died in %s%s\n", g_case_head.c_str(), desc.c_str());
}
void print_case_line() {
  const ssize_t ignored = ::write(2, g_case_line, std::strlen(g_case_line));
  (void)ignored;
}
#ifndef WEFT_FUZZ_SANITIZED
void on_fatal_signal(int sig) {
  print_case_line();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
#endif

// --- the worker and the client that must never notice the others ---

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
    good = std::make_unique<GoodClient>(worker->port(), 0, 7);
    good->round();
    good->round();
    baseline = worker->memory_in_use();
  }
  ~Env() {
    good.reset();
    worker->stop();
  }
  std::unique_ptr<Conn> fresh() const {
    auto c = std::make_unique<Conn>(worker->port());
    c->handshake();
    return c;
  }

  std::unique_ptr<Device> cpu0, cpu1;
  std::unique_ptr<Worker> worker;
  std::unique_ptr<GoodClient> good;
  size_t baseline = 0;  // memory_in_use with only the good client connected
};
Env* env = nullptr;

struct Stats {
  std::atomic<int> ran{0}, deferred{0}, refused{0}, unsupported_graphs{0};
};
Stats g_stats;

// --- a graph built locally, laid out in one remote buffer ---

struct Placed {
  Context ctx;
  conformance::CaseBuilder b{ctx};
  Graph g;
  std::string desc;
  std::optional<Placement> at;  // set by finish()
  uint64_t bytes = 0;           // the buffer it needs

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
  Bytes encode(uint64_t handle) const { return at->encode(g, handle); }
};

// A valid random graph the CPU device computes; small: one op on small shapes.
// Now and then (not small) one of the conformance suite's own cases.
std::unique_ptr<Placed> make_graph(Rng& rng, bool small) {
  static const std::vector<conformance::Case> kCases = conformance::all_cases();
  for (int tries = 0;; ++tries) {
    auto p = std::make_unique<Placed>();
    if (!small && chance(rng, 0.15)) {
      const conformance::Case& c = kCases[static_cast<size_t>(pick(rng, 0, static_cast<int64_t>(kCases.size()) - 1))];
      c.build(p->b);
      p->desc = "conformance case " + c.name;
    } else {
      build_random_graph(p->b, rng, small, p->desc);
    }
    p->finish();
    bool supported = true;
    for (Tensor* t : p->g.nodes()) {
      if (!op_is_view(t->op) && !env->cpu0->supports_op(*t)) supported = false;
    }
    if (supported || tries == 50) return p;
    ++g_stats.unsupported_graphs;
  }
}

// Bytes of packed leaf t holding values (conformance runner's conversion).
Bytes leaf_bytes(const Tensor& t, const std::vector<float>& values) {
  Bytes bytes(t.nbytes());
  if (t.type == DType::i32) {
    for (size_t i = 0; i < values.size(); ++i) {
      const auto v = static_cast<int32_t>(values[i]);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  } else if (!values.empty()) {
    from_f32(t.type, values.data(), bytes.data(), static_cast<int64_t>(values.size()));
  }
  return bytes;
}

// Uploads fresh values for every leaf (each leaf's Init) and loads them into ref.
void upload(Conn& c, uint64_t h, Placed& p, Rng& rng, conformance::Reference& ref) {
  for (Tensor* leaf : p.g.leafs()) {
    std::vector<float> v(static_cast<size_t>(leaf->nelements()));
    const conformance::Init* init = p.b.init_for(leaf);
    if (init != nullptr) {
      (*init)(*leaf, rng, v);
    } else {
      conformance::uniform(-1.0f, 1.0f)(*leaf, rng, v);
    }
    const Bytes bytes = leaf_bytes(*leaf, v);
    if (!bytes.empty()) c.set(h, p.offset(*leaf), bytes.data(), bytes.size());
    ref.load_leaf(*leaf, bytes.data(), bytes.size());
  }
}

// Reads every compared tensor and holds it to ref: the normalized error of
// conformance/cases.h (i32 exact). Returns "" or what differed. One change:
// a float output of under 8 elements (random shapes make them) is instead
// held per element to max(1%, 3 sqrt(tol)) of max(1, |ref|), as one tiny
// value made by cancellation (a short dot product, gelu at -3) has a
// relative error that f32 arithmetic cannot bound; exact stays exact.
std::string check_outputs(Conn& c, uint64_t h, Placed& p, conformance::Reference& ref) {
  std::string failure;
  for (const auto& cmp : p.b.compared()) {
    const Tensor& t = *cmp.t;
    const Bytes got = c.get(h, p.where(t), t.nbytes());
    if (got.size() != t.nbytes())
      return "GET_TENSOR of " + shape_string(t) + " gave " + std::to_string(got.size()) + " bytes";
    const std::vector<double> out = conformance::decode_tensor(t, got.data(), got.size());
    const std::vector<double> want = ref.values(t);
    const bool exact = t.type == DType::i32 || cmp.tol == 0.0;
    const bool tiny = !exact && want.size() < 8;
    const double tiny_rel = std::max(1e-2, 3.0 * std::sqrt(cmp.tol));
    double num = 0.0, den = 0.0, diff = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double d = out[i] - want[i];
      num += d * d;
      den += want[i] * want[i];
      if (!(tiny ? std::fabs(d) <= tiny_rel * std::max(1.0, std::fabs(want[i])) : out[i] == want[i])) diff += 1.0;
    }
    const double err = t.type == DType::i32 || tiny ? diff : num / std::max(den, 1e-30);
    if (!(err <= (t.type == DType::i32 || tiny ? 0.0 : cmp.tol))) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s %s: err=%.3g (tol %.3g%s)", failure.empty() ? "" : ";",
                    shape_string(t).c_str(), err, cmp.tol,
                    t.type == DType::i32 ? ", i32 elements that differ"
                    : tiny               ? ", tiny: elements off"
                                         : "");
      failure += buf;
    }
  }
  return failure;
}

// Builds, uploads, computes and checks one valid graph on c (a session of
// its own or shared with other work); frees its buffer after.
void run_valid(Conn& c, Rng& rng, bool small, std::string& desc) {
  auto p = make_graph(rng, small);
  desc += p->desc;
  set_case_line(desc);
  const uint64_t h = c.alloc(0, p->bytes);
  if (h == 0) return;  // the failure is recorded
  conformance::Reference ref;
  upload(c, h, *p, rng, ref);
  const uint64_t id = rng();
  const Bytes encoded = p->encode(h);
  c.compute(0, id, &encoded);
  if (chance(rng, 0.3)) c.synchronize(0);
  ref.run(p->g);
  std::string f = check_outputs(c, h, *p, ref);
  if (!f.empty()) ADD_FAILURE() << "valid graph [" << desc << "] differs from the reference:" << f;
  if (f.empty() && chance(rng, 0.3)) {  // the stored graph, by id, on new inputs
    conformance::Reference again;
    upload(c, h, *p, rng, again);
    c.compute(0, id, nullptr);
    again.run(p->g);
    f = check_outputs(c, h, *p, again);
    if (!f.empty()) ADD_FAILURE() << "valid graph [" << desc << "] run again by id differs:" << f;
  }
  c.free_buffer(h);
}

// --- outcomes of a request that may be refused ---

enum class Outcome { ran, deferred, refused, failed };

// After a request without a reply: PING. Either the PING reply (it ran), or
// an ERROR that is not invalid_input followed by a working session (a
// deferred error), or ERROR invalid_input and the connection closed. Anything
// else (no ERROR, a hang, the session kept after invalid_input) fails.
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

// --- mutated graphs ---

void run_mutated(Rng& rng, std::string& desc) {
  auto p = make_graph(rng, true);
  auto c = env->fresh();
  const uint64_t size = p->bytes + 64 * static_cast<uint64_t>(pick(rng, 0, 2));
  const uint64_t h = c->alloc(0, size);
  if (chance(rng, 0.5)) {
    conformance::Reference ref;
    upload(*c, h, *p, rng, ref);
  } else if (size > 0) {  // any bytes: NaNs, indices out of range
    Bytes junk(size);
    for (uint8_t& b : junk) b = static_cast<uint8_t>(rng());
    c->set(h, 0, junk.data(), junk.size());
  }
  const Bytes valid = p->encode(h);
  std::string m;
  const Bytes bad = mutate_graph(valid, rng, env->good->handle(), m);
  desc += p->desc + " | " + m;
  set_case_line(desc);
  const uint64_t id = static_cast<uint64_t>(pick(rng, 0, 3));
  c->compute(0, id, &bad);
  if (settle(*c, desc) != Outcome::refused && chance(rng, 0.5)) {
    c->compute(0, id, nullptr);  // stored (or not: then refused)
    settle(*c, desc + " | run again by id");
  }
}

// --- lifetime abuse ---

void send_u64(Conn& c, Cmd cmd, std::initializer_list<uint64_t> fields) {
  Writer w;
  for (uint64_t f : fields) w.u64(f);
  c.send(cmd, w);
}
void send_event(Conn& c, Cmd cmd, uint32_t device, uint64_t id) {
  Writer w;
  w.u32(device);
  w.u64(id);
  c.send(cmd, w);
}
Bytes random_bytes(Rng& rng, size_t n) {
  Bytes b(n);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// A small valid graph stored (and run) under id in a fresh buffer of c.
struct Stored {
  std::unique_ptr<Placed> p;
  uint64_t h = 0;
  Bytes encoded;
};
Stored store_graph(Conn& c, Rng& rng, uint64_t id, uint32_t device = 0) {
  Stored s;
  s.p = make_graph(rng, true);
  s.h = c.alloc(device, s.p->bytes);
  conformance::Reference ref;
  upload(c, s.h, *s.p, rng, ref);
  s.encoded = s.p->encode(s.h);
  c.compute(device, id, &s.encoded);
  return s;
}

// A graph whose i32 data indexes out of range: get_rows, set_rows or
// mul_mat_id. The worker may run it, defer an error, or refuse; never crash.
// When it runs, the CPU kernels' rule holds (src/backend/cpu/ops_rows.cpp):
// get_rows gives a row of zeros for such an index, set_rows skips it.
void bad_indices(Rng& rng, std::string& desc) {
  auto c = env->fresh();
  Placed p;
  conformance::CaseBuilder& b = p.b;
  const int64_t rows = pick(rng, 1, 6), n = pick(rng, 1, 4);
  const float bad_values[] = {-1.0f,      static_cast<float>(rows),    static_cast<float>(rows + 1000),
                              -100000.0f, static_cast<float>(1 << 30), -static_cast<float>(1 << 30)};
  const float bad = bad_values[pick(rng, 0, 5)];
  conformance::Init idx_init = [bad, rows](const Tensor&, Rng& r, std::vector<float>& v) {
    for (float& x : v) x = std::uniform_int_distribution<int>(0, 1)(r) ? bad : static_cast<float>(rows - 1);
    v[0] = bad;
  };
  const int k = static_cast<int>(pick(rng, 0, 2));
  desc += std::string(k == 0 ? "get_rows" : k == 1 ? "set_rows" : "mul_mat_id") + " with index " + std::to_string(bad);
  Context& ctx = b.ctx();
  Tensor* idx = b.input(DType::i32, {n, k == 2 ? 2 : 1, 1, 1}, idx_init);
  Tensor *a = nullptr, *out = nullptr;  // get_rows: a, out; set_rows: a = src, out = dst
  if (k == 0) {
    a = b.input(DType::f32, {32, rows, 1, 1});
    out = ops::get_rows(ctx, a, idx);
    b.output(out, 0.0);
  } else if (k == 1) {
    out = b.input(chance(rng, 0.5) ? DType::f32 : DType::q8_0, {32, rows, 1, 1});
    a = b.input(DType::f32, {32, n, 1, 1});
    b.output(ops::set_rows(ctx, out, a, idx), out, 0.0);
  } else {
    Tensor* as = b.input(DType::f32, {32, 4, rows, 1});
    b.output(ops::mul_mat_id(ctx, as, b.input(DType::f32, {32, 1, 2, 1}), idx), 0.0);
  }
  p.finish();
  set_case_line(desc);
  const uint64_t h = c->alloc(0, p.bytes);
  conformance::Reference ref;  // not run: it has no rule for such indices
  upload(*c, h, p, rng, ref);
  auto fetch = [&](const Tensor& t) {
    const Bytes bytes = c->get(h, p.offset(t), t.nbytes());
    return bytes.size() == t.nbytes() ? conformance::decode_tensor(t, bytes.data(), bytes.size())
                                      : std::vector<double>();
  };
  std::vector<double> want;
  if (k == 1 && out->type == DType::f32) want = fetch(*out);  // before the writes
  const Bytes g = p.encode(h);
  c->compute(0, 1, &g);
  if (settle(*c, desc) == Outcome::refused || k == 2 || out->type != DType::f32) return;
  const std::vector<double> iv = fetch(*idx), av = fetch(*a), got = fetch(*out);
  if (k == 0) want.assign(got.size(), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const auto r = static_cast<int64_t>(iv.at(static_cast<size_t>(i)));
    if (r < 0 || r >= rows) continue;
    for (int64_t e = 0; e < 32; ++e) {
      if (k == 0) want.at(static_cast<size_t>(i * 32 + e)) = av.at(static_cast<size_t>(r * 32 + e));
      if (k == 1) want.at(static_cast<size_t>(r * 32 + e)) = av.at(static_cast<size_t>(i * 32 + e));
    }
  }
  EXPECT_EQ(got, want) << "[" << desc << "] rows with an index out of range are not as the kernel documents";
}

void run_lifetime(Rng& rng, std::string& desc) {
  const int kind = static_cast<int>(pick(rng, 0, 12));
  if (kind == 12) return bad_indices(rng, desc);
  auto c = env->fresh();
  switch (kind) {
    case 0: {  // a stored graph whose buffer was freed
      desc += "run a stored graph after FREE_BUFFER";
      Stored s = store_graph(*c, rng, 5);
      if (chance(rng, 0.5)) c->synchronize(0);  // else the free races the compute
      c->free_buffer(s.h);
      c->compute(0, 5, nullptr);
      expect_fatal(*c);
      break;
    }
    case 1: {
      desc += "double FREE_BUFFER";
      const uint64_t h = c->alloc(static_cast<uint32_t>(pick(rng, 0, 1)), static_cast<uint64_t>(pick(rng, 0, 4096)));
      c->free_buffer(h);
      if (chance(rng, 0.5)) {
        c->free_buffer(h);
      } else {
        send_u64(*c, Cmd::get_tensor, {h, 0, 0});
      }
      expect_fatal(*c);
      break;
    }
    case 2: {  // another session's handle, live or freed, in every kind of request
      auto other = env->fresh();
      const uint64_t theirs = other->alloc(0, 256);
      const Bytes pattern = random_bytes(rng, 256);
      other->set(theirs, 0, pattern.data(), pattern.size());
      const bool freed = chance(rng, 0.2);
      const uint64_t spare = other->alloc(0, 64);
      const uint64_t target = freed ? spare : theirs;
      if (freed) other->free_buffer(spare);
      other->ping();
      const uint64_t mine = c->alloc(0, 256);
      const int how = static_cast<int>(pick(rng, 0, 7));
      desc += std::string(freed ? "a freed" : "a live") + " foreign handle in request kind " + std::to_string(how);
      switch (how) {
        case 0: send_u64(*c, Cmd::get_tensor, {target, 0, 4}); break;
        case 1: c->set(target, 0, pattern.data(), 16); break;
        case 2: c->free_buffer(target); break;
        case 3: send_u64(*c, Cmd::copy_tensor, {mine, 0, target, 0, 16}); break;
        case 4: send_u64(*c, Cmd::copy_tensor, {target, 0, mine, 0, 16}); break;
        case 5: {
          Writer w;
          w.u64(target);
          w.u64(0);
          w.u64(8);
          w.u8(0x77);
          c->send(Cmd::memset_tensor, w);
          break;
        }
        case 6: {
          Writer w;
          w.u64(target);
          w.u8(0x55);
          c->send(Cmd::clear_buffer, w);
          break;
        }
        default: {  // a graph whose tensors all live in that buffer
          auto p = make_graph(rng, true);
          const Bytes g = p->encode(target);
          c->compute(0, 1, &g);
        }
      }
      expect_fatal(*c);
      EXPECT_EQ(other->get(theirs, 0, 256), pattern) << "[" << desc << "] the other session's bytes changed";
      break;
    }
    case 3: {  // more than 64 stored graphs: the least recently used are gone
      const uint64_t extra = static_cast<uint64_t>(pick(rng, 1, 3));
      desc += "graph ids 1.." + std::to_string(kMaxGraphsPerSession + extra) + ", then an evicted id";
      Stored s = store_graph(*c, rng, 1);
      for (uint64_t id = 2; id <= kMaxGraphsPerSession + extra; ++id) c->compute(0, id, &s.encoded);
      c->compute(0, kMaxGraphsPerSession + extra, nullptr);
      c->ping();
      c->compute(0, static_cast<uint64_t>(pick(rng, 1, static_cast<int64_t>(extra))), nullptr);
      expect_fatal(*c);
      break;
    }
    case 4: {  // events across devices, then one on a device that does not exist
      desc += "events across devices";
      Stored s = store_graph(*c, rng, 9);
      const uint64_t id = rng();
      send_event(*c, Cmd::event_record, 0, id);
      send_event(*c, Cmd::event_wait, 1, id);
      send_event(*c, Cmd::event_record, 1, id);  // recorded again, elsewhere
      send_event(*c, Cmd::event_wait, 0, id);
      send_u64(*c, Cmd::event_sync, {id});
      c->expect_reply(Cmd::event_sync);
      send_u64(*c, Cmd::event_sync, {id + 1});  // never recorded: passed
      c->expect_reply(Cmd::event_sync);
      c->synchronize(1);
      send_event(*c, chance(rng, 0.5) ? Cmd::event_record : Cmd::event_wait, chance(rng, 0.5) ? kDevices : UINT32_MAX,
                 id);
      expect_fatal(*c);
      break;
    }
    case 5: {  // ranges at the edges: the last byte is fine, one more is not
      const uint64_t size = static_cast<uint64_t>(pick(rng, 0, 300));
      const uint64_t h = c->alloc(0, size);
      EXPECT_TRUE(c->get(h, size, 0).empty());
      if (size > 0) {
        const uint64_t k = static_cast<uint64_t>(pick(rng, 1, static_cast<int64_t>(size)));
        const Bytes tail = random_bytes(rng, k);
        c->set(h, size - k, tail.data(), k);
        EXPECT_EQ(c->get(h, size - k, k), tail);
        EXPECT_EQ(c->get(h, 0, size).size(), size);
      }
      const int how = static_cast<int>(pick(rng, 0, 6));
      desc += "buffer of " + std::to_string(size) + " bytes, out-of-range request kind " + std::to_string(how);
      switch (how) {
        case 0: send_u64(*c, Cmd::get_tensor, {h, 0, size + 1}); break;
        case 1: send_u64(*c, Cmd::get_tensor, {h, size + 1, 0}); break;
        case 2: send_u64(*c, Cmd::get_tensor, {h, UINT64_MAX - 3, 8}); break;
        case 3: {
          const Bytes two(2, 1);
          c->set(h, size == 0 ? 0 : size - 1, two.data(), 2);
          break;
        }
        case 4: {
          Writer w;
          w.u64(h);
          w.u64(size);
          w.u64(UINT64_MAX);
          w.u8(1);
          c->send(Cmd::memset_tensor, w);
          break;
        }
        case 5: send_u64(*c, Cmd::copy_tensor, {h, 0, h, size, 1}); break;
        default: send_u64(*c, Cmd::copy_tensor, {h, 1, h, 0, size}); break;
      }
      expect_fatal(*c);
      break;
    }
    case 6: {
      desc += "a stored graph run on the other device";
      store_graph(*c, rng, 3, 0);
      c->compute(1, 3, nullptr);
      expect_fatal(*c);
      break;
    }
    case 7: {  // an id replaced by another graph; the first one's buffer freed after
      desc += "graph id replaced, first buffer freed";
      Stored a = store_graph(*c, rng, 11);
      Stored b = store_graph(*c, rng, 11);
      desc += " [" + a.p->desc + "] then [" + b.p->desc + "]";
      set_case_line(desc);
      for (int round = 0; round < 2; ++round) {
        if (round == 1) c->free_buffer(a.h);  // b's graph does not use it
        conformance::Reference ref;
        upload(*c, b.h, *b.p, rng, ref);
        c->compute(0, 11, nullptr);
        ref.run(b.p->g);
        const std::string f = check_outputs(*c, b.h, *b.p, ref);
        if (!f.empty()) ADD_FAILURE() << "[" << desc << "] round " << round << ":" << f;
      }
      break;
    }
    case 8: {  // freed while its graph may still run; the graph goes with it
      desc += "FREE_BUFFER right after GRAPH_COMPUTE";
      Stored s = store_graph(*c, rng, 4);
      c->free_buffer(s.h);
      c->ping();
      const uint64_t h = c->alloc(0, 128);
      EXPECT_EQ(c->get(h, 0, 128).size(), 128u);
      c->compute(0, 4, nullptr);
      expect_fatal(*c);
      break;
    }
    case 9: {  // over the budget: out_of_memory, the session stays
      desc += "ALLOC_BUFFER over the budget";
      Writer w;
      w.u32(0);
      w.u64(chance(rng, 0.5) ? kBudget + 1 : UINT64_MAX - static_cast<uint64_t>(pick(rng, 0, 4096)));
      c->send(Cmd::alloc_buffer, w);
      const Frame f = c->recv();
      EXPECT_TRUE(f.is_error() && f.error_kind() == ErrorKind::out_of_memory) << desc;
      const uint64_t h = c->alloc(1, 64);
      const float x = 1.25f;
      c->set(h, 60, &x, 4);
      EXPECT_EQ(as_floats(c->get(h, 60, 4)).at(0), 1.25f);
      break;
    }
    case 10: {  // CLEAR_BUFFER and MEMSET_TENSOR write what and where they say
      const uint64_t size = static_cast<uint64_t>(pick(rng, 1, 300));
      const uint64_t off = static_cast<uint64_t>(pick(rng, 0, static_cast<int64_t>(size)));
      const uint64_t n = static_cast<uint64_t>(pick(rng, 0, static_cast<int64_t>(size - off)));
      desc += "CLEAR_BUFFER then MEMSET_TENSOR [" + std::to_string(off) + ", +" + std::to_string(n) + ") of " +
              std::to_string(size);
      const uint64_t h = c->alloc(static_cast<uint32_t>(pick(rng, 0, 1)), size);
      Writer clear;
      clear.u64(h);
      clear.u8(0xA5);
      c->send(Cmd::clear_buffer, clear);
      Writer ms;
      ms.u64(h);
      ms.u64(off);
      ms.u64(n);
      ms.u8(0x3C);
      c->send(Cmd::memset_tensor, ms);
      Bytes want(size, 0xA5);
      std::fill(want.begin() + static_cast<ptrdiff_t>(off), want.begin() + static_cast<ptrdiff_t>(off + n), 0x3C);
      EXPECT_EQ(c->get(h, 0, size), want) << desc;
      break;
    }
    default: {  // COPY_TENSOR within one buffer, ranges overlapping: nothing outside dst changes
      const uint64_t size = 256;
      const uint64_t n = static_cast<uint64_t>(pick(rng, 1, 128));
      const uint64_t src = static_cast<uint64_t>(pick(rng, 0, static_cast<int64_t>(size - n)));
      const uint64_t dst = static_cast<uint64_t>(
          std::clamp<int64_t>(static_cast<int64_t>(src) + pick(rng, -static_cast<int64_t>(n), static_cast<int64_t>(n)),
                              0, static_cast<int64_t>(size - n)));
      desc += "COPY_TENSOR " + std::to_string(n) + " bytes " + std::to_string(src) + " -> " + std::to_string(dst);
      const uint64_t h = c->alloc(0, size);
      const Bytes before = random_bytes(rng, size);
      c->set(h, 0, before.data(), size);
      send_u64(*c, Cmd::copy_tensor, {h, src, h, dst, n});
      const Bytes after = c->get(h, 0, size);
      ASSERT_EQ(after.size(), size);
      for (uint64_t i = 0; i < size; ++i) {
        if (i < dst || i >= dst + n) {
          EXPECT_EQ(after[i], before[i]) << "[" << desc << "] byte " << i << " outside the destination changed";
        }
      }
    }
  }
}

// --- racing sessions ---

// A graph big enough that a close during it lands mid-compute.
void heavy_compute(Conn& c, Rng& rng) {
  Placed p;
  const int64_t k = 32 * pick(rng, 4, 16), m = pick(rng, 64, 256), n = pick(rng, 16, 64);
  Tensor* a = p.b.input(DType::f32, {k, m, 1, 1});
  Tensor* x = p.b.input(DType::f32, {k, n, 1, 1});
  p.b.output(ops::silu(p.ctx, ops::mul_mat(p.ctx, a, x)), 0.0);
  p.finish();
  const uint64_t h = c.alloc(0, p.bytes);
  const Bytes g = p.encode(h);
  c.compute(0, 1, &g);
  c.compute(0, 1, nullptr);
}

// One racing session. Kind 0 does real work and must succeed; the others
// misbehave (their own errors are expected and ignored).
void race(int kind, uint64_t seed) {
  Rng rng(seed);
  try {
    switch (kind) {
      case 0: {
        Conn c(env->worker->port());
        c.handshake();
        for (int i = static_cast<int>(pick(rng, 2, 5)); i > 0; --i) {
          if (chance(rng, 0.6)) {
            std::string d = "racing: ";
            run_valid(c, rng, true, d);
          } else {
            const uint64_t size = static_cast<uint64_t>(pick(rng, 1, 1 << 16));
            const uint64_t h = c.alloc(static_cast<uint32_t>(pick(rng, 0, 1)), size);
            const Bytes b = random_bytes(rng, size);
            c.set(h, 0, b.data(), b.size());
            EXPECT_EQ(c.get(h, 0, size), b) << "racing session read back other bytes";
            c.free_buffer(h);
          }
        }
        c.ping();
        break;
      }
      case 1: {  // half a frame, then gone
        Conn c(env->worker->port());
        c.handshake();
        const uint64_t h = c.alloc(0, 4096);
        Writer w;
        w.u64(h);
        w.u64(0);
        w.u64(4096);
        w.bytes(random_bytes(rng, 1000).data(), 1000);
        Bytes half = w.data();
        half.resize(static_cast<size_t>(pick(rng, 0, static_cast<int64_t>(half.size()))));
        c.send(static_cast<uint16_t>(Cmd::set_tensor), half, 0, 24 + 4096);
        c.close();
        break;
      }
      case 2: {  // gone mid-compute
        Conn c(env->worker->port());
        c.handshake();
        heavy_compute(c, rng);
        std::this_thread::sleep_for(std::chrono::milliseconds(pick(rng, 0, 20)));
        c.close();
        break;
      }
      case 3: {  // gone mid-handshake: part of HELLO, then closed
        Conn c(env->worker->port());
        Bytes hello = hello_payload();
        const auto full = static_cast<uint32_t>(hello.size());
        hello.resize(static_cast<size_t>(pick(rng, 0, full - 1)));
        c.send(static_cast<uint16_t>(Cmd::hello), hello, 0, full);
        c.close();
        break;
      }
      default: {  // stalls mid-frame: the worker must end the session by itself
        Conn c(env->worker->port());
        c.handshake();
        c.send(static_cast<uint16_t>(Cmd::get_tensor), Bytes(10, 0), 0, 24);
        EXPECT_TRUE(c.closed_by_peer()) << "a session stalled mid-frame was kept";
      }
    }
  } catch (const Error& e) {
    if (kind == 0 || kind == 4) ADD_FAILURE() << "racing session (kind " << kind << "): " << e.what();
  }
}

void run_racing(Rng& rng, std::string& desc) {
  const int n = static_cast<int>(pick(rng, 2, 5));
  std::vector<std::thread> threads;
  desc += "sessions:";
  for (int i = 0; i < n; ++i) {
    // Mostly real work; a stall costs the worker's io_timeout (3 s): rare.
    const int r = static_cast<int>(pick(rng, 0, 19));
    const int kind = r < 10 ? 0 : r < 13 ? 1 : r < 16 ? 2 : r < 19 ? 3 : chance(rng, 0.3) ? 4 : 0;
    desc += ' ';
    desc += std::to_string(kind);
    threads.emplace_back(race, kind, rng());
  }
  set_case_line(desc);
  for (std::thread& t : threads) t.join();
}

// --- the driver ---

constexpr const char* kKinds[] = {"valid", "mutated", "lifetime", "racing"};

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
  int counts[4] = {};
  int total = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.seconds);
  while (o.case_seed || std::chrono::steady_clock::now() < deadline) {
    const uint64_t case_seed = o.case_seed ? *o.case_seed : master();
    Rng rng(case_seed);
    const int r = static_cast<int>(pick(rng, 0, 99));
    int kind = r < 35 ? 0 : r < 75 ? 1 : r < 90 ? 2 : 3;
    for (int k = 0; k < 4; ++k) {
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
        default: run_racing(rng, desc);
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
  std::printf("fuzz_structured: %d cases (valid %d, mutated %d, lifetime %d, racing %d), seed %llu, 0 failures\n",
              total, counts[0], counts[1], counts[2], counts[3], static_cast<unsigned long long>(o.seed));
  std::fflush(stdout);
}

bool parse(int argc, char** argv, Options& o) {
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
      if (o.only != "valid" && o.only != "mutated" && o.only != "lifetime" && o.only != "racing") return false;
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
  if (!weft::rpc::fuzz::parse(argc, argv, weft::rpc::fuzz::g_opts)) {
    std::fprintf(stderr,
                 "usage: weft_fuzz_worker [--seconds S] [--seed N] [--workers-threads T] "
                 "[--only valid|mutated|lifetime|racing] [--case-seed X] [--max-graph-cost C] [--verbose]\n");
    return 2;
  }
#ifdef WEFT_FUZZ_SANITIZED
  __sanitizer_set_death_callback(weft::rpc::fuzz::print_case_line);
#else
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, weft::rpc::fuzz::on_fatal_signal);
#endif
  std::signal(SIGPIPE, SIG_IGN);
  return RUN_ALL_TESTS();
}
