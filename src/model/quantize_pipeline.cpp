// RowPipeline (quantize_pipeline.h). Grains are numbered over the whole run
// in file order and claimed in that order, so a worker waiting for its
// batch's buffer holds the latest grain claimed: every earlier batch is
// already claimed whole, and converting it needs no buffer but its own. The
// caller frees buffers in order, so the workers never wait on each other.
#include "quantize_pipeline.h"

#include <algorithm>

#include "weft/core/error.h"

namespace weft::model::detail {

RowPipeline::RowPipeline(std::vector<RowJob> jobs, int threads, ConvertFn convert, const std::atomic<bool>* cancel)
    : jobs_(std::move(jobs)), convert_(std::move(convert)), cancel_(cancel) {
  size_t slot_bytes = 0;
  for (size_t j = 0; j < jobs_.size(); ++j) {
    const RowJob& job = jobs_[j];
    for (int64_t r0 = 0; r0 < job.rows; r0 += job.batch_rows) {
      const int64_t n = std::min(job.batch_rows, job.rows - r0);
      batches_.push_back(BatchInfo{j, r0, n, total_grains_});
      grains_left_.push_back((n + job.grain_rows - 1) / job.grain_rows);
      total_grains_ += grains_left_.back();
      slot_bytes = std::max(slot_bytes, static_cast<size_t>(n) * job.out_row);
    }
  }
  slots_.assign(static_cast<size_t>(std::min<int64_t>(kSlots, static_cast<int64_t>(batches_.size()))),
                std::vector<uint8_t>(slot_bytes));
  for (int t = 0; t < std::max(1, threads); ++t) threads_.emplace_back([this, t] { work(t); });
}

RowPipeline::~RowPipeline() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  slot_free_.notify_all();
  for (std::thread& t : threads_) t.join();
}

size_t RowPipeline::batch_of(int64_t grain) const {
  const auto after = std::upper_bound(batches_.begin(), batches_.end(), grain,
                                      [](int64_t g, const BatchInfo& b) { return g < b.first_grain; });
  return static_cast<size_t>(after - batches_.begin()) - 1;
}

void RowPipeline::convert_grain(int64_t grain, int thread) {
  const size_t b = batch_of(grain);
  const BatchInfo& batch = batches_[b];
  const RowJob& job = jobs_[batch.job];
  {
    // The batch's buffer is free once the caller released batch b - kSlots.
    std::unique_lock<std::mutex> lock(m_);
    slot_free_.wait(lock, [&] { return stop_ || failed_ || static_cast<int64_t>(b) < released_ + kSlots; });
    if (stop_ || failed_) return;
  }
  const int64_t begin = (grain - batch.first_grain) * job.grain_rows;
  const int64_t end = std::min(batch.rows, begin + job.grain_rows);
  uint8_t* out = slots_[b % slots_.size()].data();
  if (!(cancel_ && cancel_->load(std::memory_order_relaxed))) {
    for (int64_t r = begin; r < end; ++r)
      convert_(batch.job, batch.first_row + r, out + static_cast<size_t>(r) * job.out_row, thread);
  }
  std::lock_guard<std::mutex> lock(m_);
  if (--grains_left_[b] == 0) batch_done_.notify_all();
}

void RowPipeline::work(int thread) {
  try {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(m_);
        if (stop_ || failed_) return;
      }
      const int64_t grain = next_grain_.fetch_add(1);
      if (grain >= total_grains_) return;
      convert_grain(grain, thread);
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (!error_) error_ = std::current_exception();
      failed_ = true;
    }
    slot_free_.notify_all();
    batch_done_.notify_all();
  }
}

RowPipeline::Batch RowPipeline::next() {
  std::unique_lock<std::mutex> lock(m_);
  if (taken_ > released_) {
    released_ = taken_;
    slot_free_.notify_all();
  }
  if (taken_ >= static_cast<int64_t>(batches_.size()))
    fail(ErrorKind::internal, "quantize", "a batch was asked for past the last one");
  const size_t b = static_cast<size_t>(taken_);
  batch_done_.wait(lock, [&] { return failed_ || grains_left_[b] == 0; });
  if (grains_left_[b] != 0) std::rethrow_exception(error_);  // a batch done before the error still comes
  ++taken_;
  const BatchInfo& batch = batches_[b];
  const size_t bytes = static_cast<size_t>(batch.rows) * jobs_[batch.job].out_row;
  return Batch{batch.job, batch.first_row, batch.rows, slots_[b % slots_.size()].data(), bytes};
}

}  // namespace weft::model::detail
