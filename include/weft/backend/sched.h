// Scheduler: cuts a graph into splits across backends, allocates it, and
// runs the splits, overlapping what may overlap and never letting a backend
// touch memory another is still using. docs/scheduler.md explains the passes
// and the execution rules.
//
//   Scheduler sched({gpu.get(), cpu.get()});    // priority order
//   sched.reserve(worst_case_graph);             // size compute memory once
//   for (each micro-batch) {
//     Graph g = build(...);                      // a new graph per micro-batch
//     sched.set_backend(*some_node, *cpu);       // optional pins, for this graph
//     sched.allocate(g);                         // now set inputs with tensor_set
//     sched.compute_async(g);
//   }
//   sched.synchronize();                         // then read outputs
//
// Graphs are never modified: the scheduler computes its own copies of the
// nodes and binds the caller's tensors to the same memory. Not thread-safe:
// one thread drives a Scheduler.
#pragma once

#include <memory>
#include <vector>

#include "weft/backend/backend.h"
#include "weft/core/graph.h"

namespace weft {

struct SchedulerOptions {
  // Memory sets for pipelining (1 to 4): micro-batch k uses set k mod
  // n_copies, and waits for micro-batch k - n_copies to finish first.
  int n_copies = 1;
};

struct SplitInfo {
  int backend = 0;                // index into the scheduler's backends
  int n_nodes = 0;                // nodes computed (views included)
  int n_input_copies = 0;         // tensors copied in from memory this backend cannot read
  std::vector<int> waits_for;     // earlier splits on other backends it waits for (rules 1, 2)
};

class Scheduler {
 public:
  // backends: in priority order (first preferred). They must outlive it.
  explicit Scheduler(std::vector<Backend*> backends, const SchedulerOptions& options = {});
  ~Scheduler();  // waits for all work; never throws
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Pins t to backend b for the next allocate() or reserve() (pins are
  // cleared by either).
  void set_backend(const Tensor& t, Backend& b);
  // Sizes every memory set for g without binding anything (first waiting for
  // all work: buffers may be replaced). A graph no larger then allocates no
  // memory: no call to a worker, so micro-batches in flight keep flowing.
  void reserve(const Graph& g);
  // Assigns and splits g and binds its tensors in the next memory set,
  // first waiting for the micro-batch that used that set. Afterwards the
  // caller may set inputs.
  void allocate(const Graph& g);
  // The same in memory set memory_set ([0, n_copies)); the next allocate()
  // takes the set after it. Graphs that each keep a set of their own (steps
  // of several sequences in flight at once) are allocated this way.
  void allocate(const Graph& g, int memory_set);
  // Submits g and returns without waiting for the backends. g runs in the
  // memory set it is bound to when its last run there is over (so graphs
  // that alternate keep their plans); else it is allocated (as allocate()).
  void compute_async(const Graph& g);
  // compute_async in two parts, for steps pipelined over in-order workers:
  // the read of step k's output from the last worker must be queued there
  // before step k + 1's work on that worker, or it would wait for that work
  // too. compute_head(g) submits g's splits up to the run on the last
  // in-order worker that ends the graph or feeds the splits that end it (or,
  // with no worker, up to the final backend's trailing run);
  // compute_tail(g) submits the rest (as read_output,
  // wait and anything that reuses g's memory set do first). Throws
  // Error(invalid_input) for compute_tail without a run of g in flight.
  void compute_head(const Graph& g);
  void compute_tail(const Graph& g);
  void compute(const Graph& g) {
    compute_async(g);
    synchronize();
  }
  void synchronize();
  // Blocks until the micro-batch that computed g is done (it returns at once
  // if g's memory set has since been given to another graph).
  void wait(const Graph& g);
  // Reads bytes [0, size) of t, an output of g's last compute, into data,
  // once the work that computes it is done. When t's buffer reads in stream
  // order (a worker's: Buffer::reads_in_stream_order) the read itself is the
  // wait, and it tells the scheduler that every split of that device is
  // done: a following wait(g) asks that worker nothing more.
  void read_output(const Graph& g, const Tensor& t, void* data, size_t size);

  // Whether g is bound to a memory set (allocated, and not since moved by
  // another allocate of that set).
  bool holds(const Graph& g) const;

  // About the last allocated graph.
  const std::vector<SplitInfo>& splits() const;
  int backend_of(const Tensor& t) const;  // -1 if not in that graph
  // Compute memory of one set, summed over its buffers.
  size_t compute_buffer_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend struct SchedulerTestAccess;  // the white-box tests' switches (not installed)
};

}  // namespace weft
