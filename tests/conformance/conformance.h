// The backend conformance suite: every op x dtype x a set of shapes, run
// through an Executor and compared with an independent float64 reference
// (reference.h). Every backend is held to it: the CPU now; an async test
// backend, remote workers and the multi-backend scheduler later, each
// through its own Executor.
//
//   auto dev = weft::make_cpu_device(2);
//   auto ex = conformance::make_backend_executor(*dev, 2);
//   conformance::Summary s = conformance::run_suite(*ex, std::cout, "mul_mat", false);
//   return s.failed == 0 ? 0 : 1;
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "weft/backend/backend.h"
#include "weft/core/graph.h"

namespace weft::conformance {

// How the suite runs a graph: on one backend now, through the scheduler
// later. The suite calls, per case: allocate, set (every leaf), compute, get
// (every compared tensor), release. The graph and its tensors outlive the
// calls until release(). Errors are thrown as weft::Error.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string name() const = 0;
  // Memory for every tensor in g (leafs and nodes; views bound to sources).
  virtual void allocate(Graph& g) = 0;
  // Whole tensor bytes (size == t.nbytes()).
  virtual void set(Tensor& t, const void* data, size_t size) = 0;
  // Complete on return.
  virtual void compute(Graph& g) = 0;
  virtual void get(const Tensor& t, void* data, size_t size) = 0;
  // Frees what allocate() made.
  virtual void release() = 0;
  // Whether it runs node at all (a case with a node it does not run is
  // skipped, not failed: flash_attn with sinks on a worker, whose wire does
  // not carry them). Default: every node.
  virtual bool runs(const Tensor& node) const { return true; }
};

// Runs graphs on one backend of dev, with all tensors in one buffer of the
// device's default buffer type. dev must outlive the executor.
std::unique_ptr<Executor> make_backend_executor(Device& dev, int n_threads);
// Runs graphs through a Scheduler over backends (which must outlive it),
// pinning nodes and inputs round-robin so that every case crosses backends.
std::unique_ptr<Executor> make_scheduler_executor(std::vector<Backend*> backends);

struct Summary {
  int passed = 0;
  int failed = 0;
  int skipped = 0;  // a node the executor does not run (Executor::runs)
};

// Runs every case whose name contains filter, printing "NAME: OK",
// "NAME: SKIP ..." or "NAME: FAIL ..." per case (only failures and skips
// when quiet) and, last, "N passed, M failed" (and ", K skipped" if any).
Summary run_suite(Executor& ex, std::ostream& out, std::string_view filter, bool quiet);

}  // namespace weft::conformance
