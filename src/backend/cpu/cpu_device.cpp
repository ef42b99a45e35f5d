// The CPU device and its backend (a synchronous stream on a thread pool).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cpu_buffer.h"
#include "kernels.h"
#include "thread_pool.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"

namespace weft {
namespace {

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

// Free memory as the kernel reports it (MemAvailable), falling back to sysconf.
MemoryInfo host_memory() {
  MemoryInfo info;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) info.total = static_cast<size_t>(pages) * static_cast<size_t>(page_size);
  info.free = info.total;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") {
      info.free = kib * 1024;
      break;
    }
  }
  return info;
}

// The totals behind cpu_compute_stats(), over every backend of the process.
std::atomic<uint64_t> g_graphs{0};
std::atomic<uint64_t> g_nodes{0};
std::atomic<uint64_t> g_compute_ns{0};

// Adds one graph's run to the totals when it goes out of scope, so a graph
// that throws still counts the time it took.
class ComputeTimer {
 public:
  explicit ComputeTimer(size_t nodes) : nodes_(nodes), t0_(std::chrono::steady_clock::now()) {}
  ~ComputeTimer() {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_);
    g_graphs.fetch_add(1, std::memory_order_relaxed);
    g_nodes.fetch_add(nodes_, std::memory_order_relaxed);
    g_compute_ns.fetch_add(static_cast<uint64_t>(ns.count()), std::memory_order_relaxed);
  }
  ComputeTimer(const ComputeTimer&) = delete;
  ComputeTimer& operator=(const ComputeTimer&) = delete;

 private:
  size_t nodes_;
  std::chrono::steady_clock::time_point t0_;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(Device& device, int n_threads) : device_(device), pool_(n_threads) {}

  std::string name() const override { return "CPU"; }
  Device& device() override { return device_; }

  // Synchronous: every node is done when compute() returns. A kernel that
  // throws, or the cancel flag, stops every thread at the same node boundary
  // (each calls the same barriers), then the first error is rethrown here.
  void compute(const Graph& g) override {
    work_.clear();  // keeps its capacity: a graph run again allocates nothing
    const std::vector<Tensor*>& work = work_;
    size_t per_thread = plan(g, &work_);
    fuse_norm_mul(g);
    const std::vector<const Tensor*>& fused = fused_norm_;
    if (work.empty()) return;
    const auto nth = static_cast<size_t>(pool_.size());
    if (scratch_.size() < per_thread * nth) scratch_.resize(per_thread * nth);
    per_thread = scratch_.size() / nth;

    // The first node after which every thread stops: set by a thread while it
    // is at node i (before barrier i), so all threads see it after barrier i
    // and agree; a later setter (already past barrier i) writes a value > i.
    std::atomic<size_t> stop_at{SIZE_MAX};
    auto stop_after = [&stop_at](size_t i) {
      size_t cur = stop_at.load(std::memory_order_relaxed);
      while (i < cur && !stop_at.compare_exchange_weak(cur, i, std::memory_order_acq_rel)) {
      }
    };
    std::mutex error_mutex;
    std::exception_ptr error;
    const std::atomic<bool>* cancel = cancel_;
    const ComputeTimer timer(work.size());
    pool_.run([&](int ith, int n) {
      cpu::KernelContext kc{ith, n, scratch_.data() + per_thread * static_cast<size_t>(ith), per_thread, cancel};
      for (size_t i = 0; i < work.size(); ++i) {
        try {
          if (fused[i] != nullptr) {
            cpu::rms_norm_mul(kc, *work[i], *fused[i]);
          } else {
            cpu::compute_node(kc, *work[i]);
          }
        } catch (...) {
          std::lock_guard lock(error_mutex);
          if (!error) error = std::current_exception();
          stop_after(i);
        }
        if (ith == 0 && kc.cancelled()) stop_after(i);
        if (i + 1 < work.size()) pool_.barrier();
        if (stop_at.load(std::memory_order_acquire) <= i) return;
      }
    });
    if (error) std::rethrow_exception(error);
    if (cancel != nullptr && cancel->load()) {  // some results may be missing or partial
      const size_t stopped = stop_at.load();
      fail(ErrorKind::disconnected, "cpu compute",
           "compute cancelled at node " + std::to_string(std::min(stopped, work.size() - 1) + 1) + " of " +
               std::to_string(work.size()));
    }
  }

  size_t working_bytes(const Graph& g) const override {
    return plan(g, nullptr) * static_cast<size_t>(pool_.size());
  }

  void set_cancel_flag(const std::atomic<bool>* flag) override { cancel_ = flag; }

  void synchronize() override {}

 private:
  // The nodes to run (into *work when given) and the scratch each thread
  // needs for them, in whole 64-byte lines. Throws Error(unsupported) for a
  // node the kernels do not handle.
  size_t plan(const Graph& g, std::vector<Tensor*>* work) const {
    size_t per_thread = 0;
    for (Tensor* node : g.nodes()) {
      if (op_is_view(node->op) || node->op == Op::none) continue;
      if (!cpu::supports(*node)) {
        fail(ErrorKind::unsupported, "cpu compute",
             std::string(op_name(node->op)) + " on " + shape_string(*node) + " '" + node->name + "'");
      }
      if (work != nullptr) work->push_back(node);
      per_thread = std::max(per_thread, cpu::scratch_bytes(*node, pool_.size()));
    }
    return (per_thread + 63) / 64 * 64;
  }

  // Runs an rms_norm and the mul by its weight row that follows it as one
  // kernel (cpu::rms_norm_mul) when nothing else reads the norm: no other
  // node of g (a source or a view's), not a graph output. A tensor another
  // split or a copy reads after this graph is flagged an output by the
  // scheduler, so this graph's readers are all there are. Drops the norm
  // from work_ and sets fused_norm_[i] (parallel to work_) to the norm of
  // the mul at work_[i]; nullptr elsewhere. Allocates nothing once the
  // vectors have grown.
  void fuse_norm_mul(const Graph& g) {
    candidates_.clear();
    for (size_t i = 0; i + 1 < work_.size(); ++i)
      if (cpu::fusable_rms_norm_mul(*work_[i], *work_[i + 1]) && !work_[i]->has_flag(kFlagOutput))
        candidates_.push_back({work_[i], 0});
    fused_norm_.assign(work_.size(), nullptr);
    if (candidates_.empty()) return;
    auto count = [this](const Tensor* t) {
      if (t == nullptr || t->op != Op::rms_norm) return;  // the cheap test first: few nodes are norms
      for (auto& [norm, readers] : candidates_)
        if (norm == t) ++readers;
    };
    for (const Tensor* node : g.nodes()) {
      for (const Tensor* s : node->src) count(s);
      if (node->view_src != node->src[0]) count(node->view_src);
    }
    size_t out = 0;
    for (size_t i = 0; i < work_.size(); ++i) {
      Tensor* node = work_[i];
      const bool fuse = i + 1 < work_.size() && node->op == Op::rms_norm && work_[i + 1]->src[0] == node &&
                        std::any_of(candidates_.begin(), candidates_.end(),
                                    [node](const auto& c) { return c.first == node && c.second == 1; });
      if (fuse) {
        fused_norm_[out] = node;  // the mul, next, takes this slot
        continue;
      }
      work_[out++] = node;
    }
    work_.resize(out);
    fused_norm_.resize(out);
  }

  Device& device_;
  cpu::ThreadPool pool_;
  std::vector<Tensor*> work_;  // compute()'s nodes to run, kept between graphs
  std::vector<const Tensor*> fused_norm_;  // parallel to work_: the norm fused into that mul, or nullptr
  std::vector<std::pair<const Tensor*, int>> candidates_;  // fuse_norm_mul's norms and their readers
  std::vector<uint8_t> scratch_;
  const std::atomic<bool>* cancel_ = nullptr;
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int n_threads) : n_threads_(n_threads > 0 ? n_threads : default_threads()), buffer_type_(*this) {}

  std::string name() const override { return "CPU"; }
  // What a worker reports of itself in GET_DEVICES, and the host's pool
  // view reads back (the kernel level and the threads; docs/serve.md).
  std::string description() const override {
    return "host CPU, " + cpu_simd_level() + " kernels, " + std::to_string(n_threads_) + " threads";
  }
  DeviceKind kind() const override { return DeviceKind::cpu; }
  MemoryInfo memory() const override { return host_memory(); }
  BufferType& default_buffer_type() override { return buffer_type_; }
  bool supports_op(const Tensor& t) const override { return cpu::supports(t); }
  bool supports_buffer_type(const BufferType& bt) const override { return bt.is_host(); }
  std::unique_ptr<Backend> create_backend(const BackendOptions& options) override {
    return std::make_unique<CpuBackend>(*this, options.n_threads > 0 ? options.n_threads : n_threads_);
  }

 private:
  int n_threads_;
  cpu::CpuBufferType buffer_type_;
};

}  // namespace

std::unique_ptr<Device> make_cpu_device(int n_threads) { return std::make_unique<CpuDevice>(n_threads); }

CpuComputeStats cpu_compute_stats() {
  CpuComputeStats s;
  s.graphs = g_graphs.load(std::memory_order_relaxed);
  s.nodes = g_nodes.load(std::memory_order_relaxed);
  s.seconds = static_cast<double>(g_compute_ns.load(std::memory_order_relaxed)) * 1e-9;
  return s;
}

}  // namespace weft
