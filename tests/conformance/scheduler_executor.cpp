// make_scheduler_executor: runs the suite's graphs through the scheduler,
// spread over several backends so that every case crosses backends: nodes
// and inputs are pinned round-robin, starting at a different backend for
// each case.
#include <memory>
#include <vector>

#include "conformance/conformance.h"
#include "weft/backend/sched.h"

namespace weft::conformance {
namespace {

class SchedulerExecutor final : public Executor {
 public:
  explicit SchedulerExecutor(std::vector<Backend*> backends) : backends_(backends), sched_(std::move(backends)) {}

  std::string name() const override {
    std::string n = "sched(";
    for (size_t i = 0; i < backends_.size(); ++i) {
      if (i) n += ',';
      n += backends_[i]->name();
    }
    return n + ")";
  }

  void allocate(Graph& g) override {
    const size_t n = backends_.size();
    size_t next = case_index_++;
    for (Tensor* leaf : g.leafs()) sched_.set_backend(*leaf, *backends_[next++ % n]);
    for (Tensor* node : g.nodes()) {
      Backend& b = *backends_[next++ % n];
      // A node writing into another tensor's memory goes where that memory
      // is: the scheduler decides.
      const bool writes_elsewhere = node->view_src != nullptr && !op_is_view(node->op);
      if (!writes_elsewhere && (op_is_view(node->op) || b.device().supports_op(*node))) sched_.set_backend(*node, b);
    }
    sched_.allocate(g);
  }

  void set(Tensor& t, const void* data, size_t size) override { tensor_set(t, data, 0, size); }
  void compute(Graph& g) override { sched_.compute(g); }
  void get(const Tensor& t, void* data, size_t size) override { tensor_get(t, data, 0, size); }
  void release() override {}  // the scheduler reuses its memory for the next case

 private:
  std::vector<Backend*> backends_;
  Scheduler sched_;
  size_t case_index_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_scheduler_executor(std::vector<Backend*> backends) {
  return std::make_unique<SchedulerExecutor>(std::move(backends));
}

}  // namespace weft::conformance
