// The CPU device and its backend (a synchronous stream on a thread pool).
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cpu_buffer.h"
#include "kernels.h"
#include "thread_pool.h"
#include "weft/cpu.h"
#include "weft/error.h"

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

class CpuBackend final : public Backend {
 public:
  CpuBackend(Device& device, int n_threads) : device_(device), pool_(n_threads) {}

  std::string name() const override { return "CPU"; }
  Device& device() override { return device_; }

  // Synchronous: every node is done when compute() returns.
  void compute(const Graph& g) override {
    std::vector<Tensor*> work;
    size_t scratch_per_thread = 0;
    for (Tensor* node : g.nodes()) {
      if (op_is_view(node->op) || node->op == Op::none) continue;
      if (!cpu::supports(*node)) {
        fail(ErrorKind::unsupported, "cpu compute",
             std::string(op_name(node->op)) + " on " + shape_string(*node) + " '" + node->name + "'");
      }
      work.push_back(node);
      scratch_per_thread = std::max(scratch_per_thread, cpu::scratch_bytes(*node, pool_.size()));
    }
    if (work.empty()) return;
    scratch_per_thread = (scratch_per_thread + 63) / 64 * 64;
    if (scratch_.size() < scratch_per_thread * static_cast<size_t>(pool_.size())) {
      scratch_.resize(scratch_per_thread * static_cast<size_t>(pool_.size()));
    }
    pool_.run([&](int ith, int nth) {
      cpu::KernelContext kc{ith, nth, scratch_.data() + scratch_per_thread * static_cast<size_t>(ith)};
      for (size_t i = 0; i < work.size(); ++i) {
        cpu::compute_node(kc, *work[i]);
        if (i + 1 < work.size()) pool_.barrier();
      }
    });
  }

  void synchronize() override {}

 private:
  Device& device_;
  cpu::ThreadPool pool_;
  std::vector<uint8_t> scratch_;
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int n_threads) : n_threads_(n_threads > 0 ? n_threads : default_threads()), buffer_type_(*this) {}

  std::string name() const override { return "CPU"; }
  std::string description() const override { return "host CPU, " + std::to_string(n_threads_) + " threads"; }
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

}  // namespace weft
