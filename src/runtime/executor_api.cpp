// Executor: the public face of ExecutorState (src/runtime/executor_state.h),
// which holds every member so that the installed header shows none.
#include "runtime/executor_state.h"
#include "weft/runtime/executor.h"

namespace weft {
namespace {

Placement one_device(Device& device, const GgufFile& file) {
  const LayerPlacement all{&device, 0, model::LlamaParams::from_gguf(file).n_layer};
  return Placement::by_layers({&all, 1});
}

}  // namespace

Executor::Executor(const GgufFile& file, Device& device, int64_t n_ctx, const model::LoadProgress& progress,
                   const model::LoadOptions& options)
    : state_(std::make_unique<detail::ExecutorState>(file, one_device(device, file), n_ctx, progress, options,
                                                     /*one_device=*/true)) {}

Executor::Executor(const GgufFile& file, std::span<const LayerPlacement> placement, int64_t n_ctx,
                   const model::LoadProgress& progress, const model::LoadOptions& options)
    : Executor(file, Placement::by_layers(placement), n_ctx, progress, options) {}

Executor::Executor(const GgufFile& file, const Placement& placement, int64_t n_ctx,
                   const model::LoadProgress& progress, const model::LoadOptions& options)
    : state_(std::make_unique<detail::ExecutorState>(file, placement, n_ctx, progress, options,
                                                     /*one_device=*/false)) {}

Executor::~Executor() = default;

const model::LlamaModel& Executor::model() const { return state_->model(); }
const Placement& Executor::placement() const { return state_->placement_; }
size_t Executor::mapped_weight_bytes() const { return state_->mapped_weight_bytes_; }

std::vector<float> Executor::eval(std::span<const int32_t> tokens, int64_t n_past, model::LogitRows rows) {
  std::vector<float> logits;
  state_->eval(tokens, n_past, logits, rows);
  return logits;
}

void Executor::eval(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits,
                    model::LogitRows rows) {
  state_->eval(tokens, n_past, logits, rows);
}

void Executor::eval_batch(std::span<const model::BatchToken> batch, int64_t n_seq, std::vector<float>& logits,
                          model::LogitRows rows) {
  state_->eval_batch(batch, n_seq, logits, rows);
}

int Executor::batch_slots() const { return state_->batch_slots(); }

void Executor::submit_batch(int slot, std::span<const model::BatchToken> batch, int64_t n_seq) {
  state_->submit_batch(slot, batch, n_seq);
}

void Executor::finish_batch(int slot, std::vector<float>& logits) { state_->finish_batch(slot, logits); }

void Executor::reserve_batch(int64_t n_tokens, int64_t n_out) { state_->reserve_batch(n_tokens, n_out); }

}  // namespace weft
