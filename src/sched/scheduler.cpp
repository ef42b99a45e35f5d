// Scheduler: memory sets, allocation, and execution under the four rules of
// docs/scheduler.md.
#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "sched_impl.h"
#include "scheduler_testing.h"
#include "weft/backend/alloc.h"
#include "weft/backend/sched.h"
#include "weft/core/error.h"

namespace weft {

using detail::Assignment;
using detail::BackendSet;
using detail::ExecPlan;

namespace {

GraphLayout layout_of(const ExecPlan& plan) {
  GraphLayout layout;
  layout.buffer_of = [&plan](const Tensor& t) { return plan.buffer_of.at(&t); };
  layout.split_of = [&plan](const Tensor& t) { return plan.split_of.at(&t); };
  return layout;
}

}  // namespace

struct Scheduler::Impl {
  // One micro-batch on one memory set: everything that must live until its
  // work is done.
  struct Batch {
    const Graph* graph = nullptr;  // the caller's graph
    Assignment assignment;
    std::unique_ptr<ExecPlan> plan;
    std::vector<SplitInfo> info;
    std::vector<std::unique_ptr<Event>> events;  // per split; null where the device has none
    std::vector<std::vector<uint8_t>> staging;   // host copies the backends may still read
    std::vector<char> host_synced;               // per split: the host knows it is done
    std::vector<std::vector<int>> implied;       // per split: earlier splits done once it is done
    std::vector<int> last_on_backend;            // the latest split submitted to each backend, this run
    std::vector<std::vector<uint64_t>> tickets;  // per split and input copy: a push compute_head started (0: none)
    // Per split: the hazards (rule 2) on splits whose backend cannot reach
    // its memory, so they touched it only by reading it into their input
    // copies; and, per split, whether every such read was made by the host
    // before that split's submission returned (through host memory).
    std::vector<std::vector<int>> copy_read_hazards;
    std::vector<char> reads_at_submit;
    // Per split, the input copies of later splits that read its results
    // (split, copy); per split and copy, a read of its source started ahead
    // when its producer was submitted (Buffer::start_read; 0: none).
    std::vector<std::vector<std::pair<int, int>>> read_by;
    std::vector<std::vector<uint64_t>> started_reads;
    size_t n_submitted = 0;                      // splits of this run submitted (compute_head stops early)
    bool submitted = false;
    bool bound = false;  // graph's tensors are bound to this set (a later allocate elsewhere unbinds)
  };

  BackendSet set;
  SchedulerOptions options;
  bool skip_hazard_waits = false;  // SchedulerTestAccess only
  Assignment pins;
  std::vector<std::unique_ptr<GraphAllocator>> allocators;  // one per memory set
  std::vector<Batch> batches;                               // one per memory set
  int next_set = 0;
  int current = -1;  // memory set of the last allocated graph
  // Scratch reused by every compute, so a steady-state token allocates nothing.
  std::vector<char> ordered;         // source backends the split being submitted copies from in order
  std::vector<int> todo;             // mark_done's stack
  std::vector<Device*> read_devices; // devices the split being submitted reads results of (ordered reads)
  std::vector<int> read_covers;      // per read device: the last of its splits those reads prove done
  std::vector<int> covered_by_read;  // its waits those reads make unnecessary

  Backend& backend(int b) { return *set.backends[static_cast<size_t>(b)]; }

  bool owns(const Buffer* buf) const {
    for (const auto& a : allocators) {
      for (int i = 0; i < a->n_buffers(); ++i) {
        if (a->buffer(i) == buf && buf != nullptr) return true;
      }
    }
    return false;
  }

  // Blocks until split s of b is done, from the host.
  void host_wait(Batch& b, int s) {
    if (b.host_synced[static_cast<size_t>(s)]) return;  // done once is done for good: no round trip
    if (auto& ev = b.events[static_cast<size_t>(s)]) {
      ev->synchronize();
    } else {
      backend(b.plan->splits[static_cast<size_t>(s)].backend).synchronize();
    }
    mark_done(b, s);
  }

  // Records that split s is done, and with it every split its completion
  // implies (its stream's earlier work, what it waited for on the device or
  // copied in order): the host then never asks a worker about those.
  void mark_done(Batch& b, int s) {
    todo.clear();
    todo.push_back(s);
    while (!todo.empty()) {
      const int t = todo.back();
      todo.pop_back();
      if (b.host_synced[static_cast<size_t>(t)]) continue;
      b.host_synced[static_cast<size_t>(t)] = 1;
      for (int u : b.implied[static_cast<size_t>(t)]) todo.push_back(u);
    }
  }

  // Makes backend `waiter` wait for split s: on the device when the event is
  // that device's (rule 3), else from the host. Returns true for a device
  // wait (the waiter's later work implies s is done).
  bool wait_for(Batch& b, Backend& waiter, int s) {
    auto& ev = b.events[static_cast<size_t>(s)];
    if (ev && &ev->device() == &waiter.device()) {
      waiter.wait_event(*ev);
      return true;
    }
    host_wait(b, s);
    return false;
  }

  // Rule 4 for a memory set about to be reused: waits for its previous
  // micro-batch's splits, except those on a backend whose memory is only
  // ever touched in its own stream's order (a worker's,
  // Backend::memory_in_stream_order): whatever the new micro-batch does to
  // that memory comes after them in that stream. Waiting for those too
  // would wait, on an in-order worker, for everything queued behind them:
  // the pipeline would drain at every micro-batch.
  void release(Batch& b) {
    if (!b.submitted) return;
    submit_rest(b);  // a split never submitted would be "waited for" by a synchronize that proves nothing
    b.submitted = false;
    for (size_t s = b.plan->splits.size(); s-- > 0;) {
      if (backend(b.plan->splits[s].backend).memory_in_stream_order()) continue;
      host_wait(b, static_cast<int>(s));
    }
  }

  void finish(Batch& b) {
    if (!b.submitted) return;
    submit_rest(b);
    b.submitted = false;
    // Last first: a finished split often implies the ones before it.
    for (size_t s = b.plan->splits.size(); s-- > 0;) host_wait(b, static_cast<int>(s));
  }

  // The memory set g is bound to, or -1.
  int set_of(const Graph& g) const {
    for (size_t m = 0; m < batches.size(); ++m)
      if (batches[m].graph == &g && batches[m].bound) return static_cast<int>(m);
    return -1;
  }

  void allocate(const Graph& g) {
    const int m = next_set;
    next_set = (next_set + 1) % options.n_copies;
    allocate_in(g, m);
  }

  void allocate_in(const Graph& g, int m) {
    Batch& b = batches[static_cast<size_t>(m)];
    release(b);  // rule 4: the set's previous micro-batch is done with its memory
    drop_started_reads(b);
    b = Batch{};
    b.graph = &g;
    b.bound = true;
    for (Batch& other : batches)
      if (&other != &b && other.graph == &g) other.bound = false;  // its tensors move here
    current = m;
    // Tensors bound by an earlier allocate() (to any memory set) are placed anew.
    for (auto list : {g.leafs(), g.nodes()}) {
      for (Tensor* t : list) {
        if (owns(t->buffer)) {
          t->buffer = nullptr;
          t->data = nullptr;
        }
      }
    }
    b.assignment = detail::assign_backends(g, set, pins);
    pins.clear();
    b.plan = std::make_unique<ExecPlan>();
    detail::build_exec_plan(g, b.assignment, set, *b.plan);
    const MemoryPlan& memory = allocators[static_cast<size_t>(m)]->allocate(b.plan->graph, layout_of(*b.plan));
    for (Tensor* node : g.nodes()) {
      const Tensor* clone = b.plan->clone_of.at(node);
      node->buffer = clone->buffer;
      node->data = clone->data;
    }
    describe(b, memory);
  }

  // Which earlier splits each split waits for: producers of what it reads
  // (rule 1) and splits that touched memory it writes (rule 2), on other
  // backends only (a backend's own work is in order).
  void describe(Batch& b, const MemoryPlan& memory) {
    const auto& splits = b.plan->splits;
    for (size_t s = 0; s < splits.size(); ++s) {
      SplitInfo info;
      info.backend = splits[s].backend;
      info.n_nodes = static_cast<int>(splits[s].graph.nodes().size());
      info.n_input_copies = static_cast<int>(splits[s].copies.size());
      std::vector<int> waits = splits[s].producers;
      for (const auto& c : splits[s].copies) {
        if (c.producer >= 0) waits.push_back(c.producer);
      }
      b.read_by.resize(splits.size());
      for (size_t i = 0; i < splits[s].copies.size(); ++i)
        if (const int p = splits[s].copies[i].producer; p >= 0)
          b.read_by[static_cast<size_t>(p)].push_back({static_cast<int>(s), static_cast<int>(i)});
      std::vector<int>& by_copy = b.copy_read_hazards.emplace_back();
      if (!skip_hazard_waits && s < memory.hazards.size()) {
        const BufferType& mine = *set.buffer_types[static_cast<size_t>(set.buffer_of_backend[splits[s].backend])];
        for (int h : memory.hazards[s])  // a producer is waited for all the same (rule 1)
          if (!set.can_read(splits[static_cast<size_t>(h)].backend, mine) &&
              std::find(waits.begin(), waits.end(), h) == waits.end())
            by_copy.push_back(h);
        waits.insert(waits.end(), memory.hazards[s].begin(), memory.hazards[s].end());
      }
      std::sort(waits.begin(), waits.end());
      waits.erase(std::unique(waits.begin(), waits.end()), waits.end());
      for (int w : waits) {
        if (splits[static_cast<size_t>(w)].backend != info.backend) info.waits_for.push_back(w);
      }
      b.info.push_back(std::move(info));
    }
  }

  // Whether copy c is a read of a worker's result into another device: a
  // read that runs after everything submitted to the source's device
  // (Buffer::reads_in_stream_order), so it needs no wait first and proves
  // that device's submitted splits done. Returns that device, or nullptr.
  Device* ordered_read_device(const Batch& b, Backend& dst_backend, const detail::InputCopy& c) {
    Buffer* from = c.src->buffer;
    if (c.producer < 0 || from == nullptr || !from->reads_in_stream_order()) return nullptr;
    Device& device = from->type().device();
    if (&device != &backend(b.plan->splits[static_cast<size_t>(c.producer)].backend).device() ||
        &device == &dst_backend.device())
      return nullptr;
    return &device;
  }

  // Reads of a run that were started ahead and never taken (an error ended
  // the run; the memory set is reused): given up, before their buffers go.
  void drop_started_reads(Batch& b) noexcept {
    for (size_t s = 0; s < b.started_reads.size(); ++s)
      for (size_t i = 0; i < b.started_reads[s].size(); ++i)
        if (uint64_t& ticket = b.started_reads[s][i]; ticket != 0) {
          b.plan->splits[s].copies[i].src->buffer->drop_read(ticket);
          ticket = 0;
        }
  }

  // After split p's work is queued on its worker: the reads of its results
  // that later splits make as ordered reads (into another device, not by a
  // worker-to-worker copy) start now, so that each reply is on its way when
  // its split comes to copy it, instead of a round trip then.
  void start_reads_of(Batch& b, size_t p) {
    for (const auto& [s, i] : b.read_by[p]) {
      const detail::Split& reader = b.plan->splits[static_cast<size_t>(s)];
      const detail::InputCopy& c = reader.copies[static_cast<size_t>(i)];
      Backend& dst = backend(reader.backend);
      if (c.src_backend != reader.backend && dst.copies_ordered_from(backend(c.src_backend))) continue;
      if (ordered_read_device(b, dst, c) == nullptr) continue;
      b.started_reads[static_cast<size_t>(s)][static_cast<size_t>(i)] = c.src->buffer->start_read(*c.src);
    }
  }

  // Returns whether c's source was read before this returned (through host
  // memory, or uploaded at once from it), rather than by a device later.
  bool copy_input(Batch& b, Backend& dst_backend, const detail::InputCopy& c, uint64_t& started) {
    const bool ordered_read = ordered_read_device(b, dst_backend, c) != nullptr;
    if (!ordered_read && dst_backend.copy_tensor_async(backend(c.src_backend), *c.src, *c.copy))
      return dst_backend.copy_reads_host_source_at_once() && c.src->buffer != nullptr &&
             c.src->buffer->type().is_host();
    // Through host memory: the host must see the producer's result first,
    // unless the read itself proves the producer done.
    if (c.producer >= 0 && !ordered_read) host_wait(b, c.producer);
    std::vector<uint8_t>& staging = b.staging.emplace_back(c.src->nbytes());
    if (started != 0 && ordered_read) {
      const uint64_t ticket = std::exchange(started, 0);
      c.src->buffer->finish_read(ticket, staging.data());
    } else {
      tensor_get(*c.src, staging.data(), 0, staging.size());
    }
    if (ordered_read) mark_done(b, c.producer);
    dst_backend.set_tensor_async(*c.copy, staging.data(), 0, staging.size());
    return true;
  }

  // Submits split s: its waits (rules 1-3), its input copies, its nodes, its
  // event. A copy that a backend makes in both streams' order
  // (copy_tensor_ordered: a worker pushing to another) needs no wait for the
  // source's backend at all, nor does a read of a worker's result
  // (ordered_read_device); the host waits only for what nothing orders.
  void submit_split(Batch& b, size_t s) {
    const auto& split = b.plan->splits[s];
    Backend& be = backend(split.backend);
    std::vector<int>& implied = b.implied[s];
    std::vector<int>& last_on_backend = b.last_on_backend;
    if (last_on_backend[static_cast<size_t>(split.backend)] >= 0)
      implied.push_back(last_on_backend[static_cast<size_t>(split.backend)]);  // one stream is in order
    ordered.assign(set.backends.size(), 0);
    read_devices.clear();
    read_covers.clear();
    covered_by_read.clear();
    for (size_t i = 0; i < split.copies.size(); ++i) {
      const auto& c = split.copies[i];
      if (c.src_backend != split.backend && be.copies_ordered_from(backend(c.src_backend))) {
        ordered[static_cast<size_t>(c.src_backend)] = 1;
      } else if (Device* d = ordered_read_device(b, be, c)) {
        // A read made now proves everything submitted to d done; one started
        // ahead, only what was submitted before it: its producer and earlier.
        const int covers = b.started_reads[s][i] != 0 ? c.producer : static_cast<int>(s);
        const auto at = std::find(read_devices.begin(), read_devices.end(), d);
        if (at == read_devices.end()) {
          read_devices.push_back(d);
          read_covers.push_back(covers);
        } else {
          int& most = read_covers[static_cast<size_t>(at - read_devices.begin())];
          most = std::max(most, covers);
        }
      }
    }
    auto backend_of_split = [&](int w) { return b.plan->splits[static_cast<size_t>(w)].backend; };
    const std::vector<int>& by_copy = b.copy_read_hazards[s];
    for (int w : b.info[s].waits_for) {
      if (ordered[static_cast<size_t>(backend_of_split(w))]) continue;  // the ordered copy waits for it
      // A hazard on a split that only read this memory, and read it while
      // it was submitted: nothing of it is left to wait for.
      if (b.reads_at_submit[static_cast<size_t>(w)] && std::find(by_copy.begin(), by_copy.end(), w) != by_copy.end())
        continue;
      Device* d = &backend(backend_of_split(w)).device();
      const auto at = std::find(read_devices.begin(), read_devices.end(), d);
      if (at != read_devices.end() && w <= read_covers[static_cast<size_t>(at - read_devices.begin())]) {
        covered_by_read.push_back(w);  // done once a read from its device returns
        continue;
      }
      if (wait_for(b, be, w)) implied.push_back(w);
    }
    bool reads_now = true;
    for (size_t i = 0; i < split.copies.size(); ++i) {
      const auto& c = split.copies[i];
      if (ordered[static_cast<size_t>(c.src_backend)]) {
        const uint64_t ticket = i < b.tickets[s].size() ? b.tickets[s][i] : 0;
        if (ticket != 0) {
          be.wait_pushed(backend(c.src_backend), ticket);  // pushed when compute_head submitted its source
        }
        if (ticket != 0 || be.copy_tensor_ordered(backend(c.src_backend), *c.src, *c.copy)) {
          const int last = last_on_backend[static_cast<size_t>(c.src_backend)];
          if (last >= 0) implied.push_back(last);
          reads_now = false;
          continue;
        }
        // It could not copy these two in order: wait, now, for what was skipped.
        for (int w : b.info[s].waits_for)
          if (backend_of_split(w) == c.src_backend) host_wait(b, w);
      }
      reads_now = copy_input(b, be, c, b.started_reads[s][i]) && reads_now;
    }
    b.reads_at_submit[s] = reads_now ? 1 : 0;
    for (int w : covered_by_read) mark_done(b, w);
    // The pushes out of the sources go now: their workers are idle until then.
    for (size_t x = 0; x < ordered.size(); ++x)
      if (ordered[x]) backend(static_cast<int>(x)).flush();
    be.compute(split.graph);
    b.events[s] = be.device().create_event();
    if (b.events[s]) be.record_event(*b.events[s]);
    start_reads_of(b, s);
    be.flush();  // the split's inputs, waits, compute and event: one write, and the worker starts
    last_on_backend[static_cast<size_t>(split.backend)] = static_cast<int>(s);
  }

  // The batch compute_async(g) and compute_head(g) submit: the set g is
  // bound to when that run is over (pipelined graphs alternate between sets
  // and keep their plans); else a new allocation, as a graph resubmitted
  // while in flight goes to the next set.
  Batch& batch_for(const Graph& g) {
    const int m = set_of(g);
    if (m < 0 || batches[static_cast<size_t>(m)].submitted) {
      allocate(g);
    } else {
      current = m;
    }
    return batches[static_cast<size_t>(current)];
  }

  // Starts a run of b: resets its per-run state.
  void begin_run(Batch& b) {
    // A graph computed again without a new allocate: its last run is done
    // (finish() waited), so the host copies it staged may go.
    b.staging.clear();
    b.submitted = true;  // from here on, finish() must wait for whatever was submitted
    const size_t n = b.plan->splits.size();
    b.events.clear();
    b.events.resize(n);
    b.host_synced.assign(n, 0);
    b.reads_at_submit.assign(n, 0);
    drop_started_reads(b);
    b.started_reads.resize(n);
    for (size_t s = 0; s < n; ++s) b.started_reads[s].assign(b.plan->splits[s].copies.size(), 0);
    b.implied.resize(n);
    for (auto& list : b.implied) list.clear();
    b.last_on_backend.assign(set.backends.size(), -1);
    b.tickets.resize(n);
    for (auto& t : b.tickets) t.clear();
    b.n_submitted = 0;
  }

  // Submits b's splits [n_submitted, end).
  void submit_until(Batch& b, size_t end) {
    for (; b.n_submitted < end; ++b.n_submitted) submit_split(b, b.n_submitted);
    for (Backend* be : set.backends) be->flush();  // the whole submission goes out now
  }

  void submit_rest(Batch& b) {
    if (b.n_submitted < b.plan->splits.size()) submit_until(b, b.plan->splits.size());
  }

  // Where compute_head stops: at the last split on an in-order worker
  // (memory_in_stream_order), or rather the first of the run of splits on
  // its backend that ends there; without one, at the trailing run on the
  // final split's backend. The output is read from that worker, or by the
  // splits after it (a tied output product on the host reads the worker's
  // last result): that read must be queued on the worker before the next
  // step's work there.
  size_t tail_begin(const Batch& b) {
    const auto& splits = b.plan->splits;
    size_t t = splits.size();
    while (t > 0 && !backend(splits[t - 1].backend).memory_in_stream_order()) --t;
    const int last = t > 0 ? splits[t - 1].backend : splits.back().backend;
    if (t == 0) t = splits.size();
    while (t > 0 && splits[t - 1].backend == last) --t;
    return t;
  }

  void compute_async(const Graph& g) {
    Batch& b = batch_for(g);
    begin_run(b);
    submit_until(b, b.plan->splits.size());
  }

  // The pushes into b's splits from `begin` on out of splits before it:
  // started now, each awaited when its split is submitted, so a source
  // worker need not wait for the tail's submission to send what it made.
  void push_early(Batch& b, size_t begin) {
    const auto& splits = b.plan->splits;
    ordered.assign(set.backends.size(), 0);
    for (size_t s = begin; s < splits.size(); ++s) {
      Backend& be = backend(splits[s].backend);
      b.tickets[s].assign(splits[s].copies.size(), 0);
      for (size_t i = 0; i < splits[s].copies.size(); ++i) {
        const auto& c = splits[s].copies[i];
        if (c.src_backend == splits[s].backend || c.producer >= static_cast<int>(begin) ||
            !be.copies_ordered_from(backend(c.src_backend)))
          continue;
        b.tickets[s][i] = be.push_ordered(backend(c.src_backend), *c.src, *c.copy);
        ordered[static_cast<size_t>(c.src_backend)] = 1;
      }
    }
    for (size_t x = 0; x < ordered.size(); ++x)
      if (ordered[x]) backend(static_cast<int>(x)).flush();
  }

  void compute_head(const Graph& g) {
    Batch& b = batch_for(g);
    begin_run(b);
    const size_t tail = tail_begin(b);
    submit_until(b, tail);
    push_early(b, tail);
  }

  void synchronize() {
    std::exception_ptr first;
    for (Backend* be : set.backends) {
      try {
        be->synchronize();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    for (Batch& b : batches) {
      b.submitted = false;
      drop_started_reads(b);
    }
    if (first) std::rethrow_exception(first);
  }
};

Scheduler::Scheduler(std::vector<Backend*> backends, const SchedulerOptions& options) : impl_(std::make_unique<Impl>()) {
  if (backends.empty()) fail(ErrorKind::invalid_input, "sched", "no backends");
  if (options.n_copies < 1 || options.n_copies > 4) {
    fail(ErrorKind::invalid_input, "sched", "n_copies " + std::to_string(options.n_copies) + " is outside [1, 4]");
  }
  Impl& s = *impl_;
  s.options = options;
  s.set.backends = std::move(backends);
  for (Backend* be : s.set.backends) {
    BufferType* bt = &be->device().default_buffer_type();
    auto it = std::find(s.set.buffer_types.begin(), s.set.buffer_types.end(), bt);
    s.set.buffer_of_backend.push_back(static_cast<int>(it - s.set.buffer_types.begin()));
    if (it == s.set.buffer_types.end()) s.set.buffer_types.push_back(bt);
  }
  for (int i = 0; i < options.n_copies; ++i) s.allocators.push_back(std::make_unique<GraphAllocator>(s.set.buffer_types));
  s.batches.resize(static_cast<size_t>(options.n_copies));
}

Scheduler::~Scheduler() {
  try {
    impl_->synchronize();
  } catch (...) {
    // Errors were the caller's to collect at synchronize(); a destructor cannot report them.
  }
}

void Scheduler::set_backend(const Tensor& t, Backend& b) {
  const auto& backends = impl_->set.backends;
  auto it = std::find(backends.begin(), backends.end(), &b);
  if (it == backends.end()) fail(ErrorKind::invalid_input, "sched", "pin of '" + t.name + "' to a backend not in this scheduler");
  impl_->pins[&t] = static_cast<int>(it - backends.begin());
}

void Scheduler::reserve(const Graph& g) {
  impl_->synchronize();  // buffers may grow: nothing may be using them
  ExecPlan plan;
  detail::build_exec_plan(g, detail::assign_backends(g, impl_->set, impl_->pins), impl_->set, plan);
  for (auto& a : impl_->allocators) a->reserve(plan.graph, layout_of(plan));
  impl_->pins.clear();  // they were g's: its tensors are not the next graph's
}

void Scheduler::allocate(const Graph& g) { impl_->allocate(g); }

void Scheduler::allocate(const Graph& g, int memory_set) {
  if (memory_set < 0 || memory_set >= impl_->options.n_copies)
    fail(ErrorKind::invalid_input, "sched",
         "memory set " + std::to_string(memory_set) + " is outside [0, " + std::to_string(impl_->options.n_copies) +
             ")");
  impl_->allocate_in(g, memory_set);
  impl_->next_set = (memory_set + 1) % impl_->options.n_copies;
}

void Scheduler::compute_async(const Graph& g) { impl_->compute_async(g); }
void Scheduler::compute_head(const Graph& g) { impl_->compute_head(g); }

void Scheduler::compute_tail(const Graph& g) {
  const int m = impl_->set_of(g);
  if (m < 0 || !impl_->batches[static_cast<size_t>(m)].submitted)
    fail(ErrorKind::invalid_input, "sched", "compute_tail of a graph without a run in flight (compute_head first)");
  impl_->submit_rest(impl_->batches[static_cast<size_t>(m)]);
}
void Scheduler::synchronize() { impl_->synchronize(); }

void Scheduler::wait(const Graph& g) {
  for (Impl::Batch& b : impl_->batches) {
    if (b.graph == &g) impl_->finish(b);
  }
}

void Scheduler::read_output(const Graph& g, const Tensor& t, void* data, size_t size) {
  Impl& s = *impl_;
  Impl::Batch* batch = nullptr;
  for (Impl::Batch& b : s.batches)
    if (b.graph == &g && b.submitted) batch = &b;
  if (batch != nullptr) s.submit_rest(*batch);  // a read waits for its graph's whole run
  Buffer* from = t.buffer;
  if (batch == nullptr || from == nullptr || !from->reads_in_stream_order()) {
    wait(g);
    tensor_get(t, data, 0, size);
    return;
  }
  tensor_get(t, data, 0, size);  // after everything submitted to its device
  const Device& device = from->type().device();
  for (size_t i = 0; i < batch->plan->splits.size(); ++i)
    if (&s.backend(batch->plan->splits[i].backend).device() == &device) s.mark_done(*batch, static_cast<int>(i));
}

bool Scheduler::holds(const Graph& g) const { return impl_->set_of(g) >= 0; }

const std::vector<SplitInfo>& Scheduler::splits() const {
  static const std::vector<SplitInfo> kNone;
  return impl_->current < 0 ? kNone : impl_->batches[static_cast<size_t>(impl_->current)].info;
}

int Scheduler::backend_of(const Tensor& t) const {
  if (impl_->current < 0) return -1;
  const Assignment& a = impl_->batches[static_cast<size_t>(impl_->current)].assignment;
  auto it = a.find(&t);
  return it == a.end() ? -1 : it->second;
}

size_t Scheduler::compute_buffer_size() const {
  size_t total = 0;
  const GraphAllocator& a = *impl_->allocators.front();
  for (int i = 0; i < a.n_buffers(); ++i) total += a.buffer_size(i);
  return total;
}

void SchedulerTestAccess::skip_hazard_waits(Scheduler& scheduler, bool skip) { scheduler.impl_->skip_hazard_waits = skip; }

}  // namespace weft
