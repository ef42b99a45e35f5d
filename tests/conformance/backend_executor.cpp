// make_backend_executor: runs the suite's graphs on one backend of a device,
// every tensor in one buffer of the device's default buffer type.
#include <vector>

#include "conformance/conformance.h"

namespace weft::conformance {
namespace {

class BackendExecutor final : public Executor {
 public:
  BackendExecutor(Device& dev, int n_threads) : dev_(dev) {
    BackendOptions options;
    options.n_threads = n_threads;
    backend_ = dev_.create_backend(options);
  }
  BackendExecutor(const BackendExecutor&) = delete;
  BackendExecutor& operator=(const BackendExecutor&) = delete;

  std::string name() const override { return backend_->name(); }

  void allocate(Graph& g) override {
    std::vector<Tensor*> all(g.leafs().begin(), g.leafs().end());
    all.insert(all.end(), g.nodes().begin(), g.nodes().end());
    buffer_ = allocate_tensors(dev_.default_buffer_type(), all);
  }

  void set(Tensor& t, const void* data, size_t size) override { tensor_set(t, data, 0, size); }

  void compute(Graph& g) override {
    backend_->compute(g);
    backend_->synchronize();
  }

  void get(const Tensor& t, void* data, size_t size) override { tensor_get(t, data, 0, size); }

  void release() override { buffer_.reset(); }

  bool runs(const Tensor& node) const override { return op_is_view(node.op) || dev_.supports_op(node); }

 private:
  Device& dev_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Buffer> buffer_;  // this case's tensors; freed by release()
};

}  // namespace

std::unique_ptr<Executor> make_backend_executor(Device& dev, int n_threads) {
  return std::make_unique<BackendExecutor>(dev, n_threads);
}

}  // namespace weft::conformance
