// The conversion stage of quantize_file: worker threads convert the rows of
// every converted tensor, in file order, ahead of the caller, who takes the
// results a batch at a time, in order, and writes them. The workers never
// wait for the writing (only for a free buffer), so every core converts the
// whole run through, across tensor boundaries, while the caller's writes
// overlap them. Internal to weft_model.
//
//   RowPipeline p(jobs, threads, convert, cancel);   // workers start here
//   for (each job j, in order)
//     for (each of j's batches) { RowPipeline::Batch b = p.next(); write(b.data, b.bytes); }
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace weft::model::detail {

// One tensor's rows as the pipeline cuts them.
struct RowJob {
  int64_t rows = 0;
  size_t out_row = 0;       // bytes of one converted row
  int64_t batch_rows = 1;   // rows a batch (the last may hold fewer)
  int64_t grain_rows = 1;   // rows a worker claims at a time
};

class RowPipeline {
 public:
  // Converts row `row` of job `job` into out (the job's out_row bytes);
  // thread is the worker's index in [0, threads), for per-thread scratch.
  // Called concurrently; an exception ends the run (next() rethrows it).
  using ConvertFn = std::function<void(size_t job, int64_t row, uint8_t* out, int thread)>;

  // Starts `threads` workers at once. While *cancel is true they skip their
  // rows (the caller, checking it too, stops taking batches).
  RowPipeline(std::vector<RowJob> jobs, int threads, ConvertFn convert, const std::atomic<bool>* cancel);
  // Stops the workers (those converting finish their grain) and joins them.
  ~RowPipeline();
  RowPipeline(const RowPipeline&) = delete;
  RowPipeline& operator=(const RowPipeline&) = delete;

  struct Batch {
    size_t job;
    int64_t first_row, rows;
    const uint8_t* data;  // valid until the next call of next()
    size_t bytes;
  };
  // The next batch in order, once all its rows are converted; releases the
  // buffer of the batch returned before. Once a worker has thrown, the
  // batches already converted still come; then its exception is rethrown.
  // Error(internal) past the last batch.
  Batch next();

 private:
  struct BatchInfo {
    size_t job;
    int64_t first_row, rows;
    int64_t first_grain;  // index of its first grain over the whole run
  };
  void work(int thread);
  void convert_grain(int64_t grain, int thread);
  size_t batch_of(int64_t grain) const;

  static constexpr int64_t kSlots = 4;  // batches converted or being written at once

  std::vector<RowJob> jobs_;
  std::vector<BatchInfo> batches_;
  int64_t total_grains_ = 0;
  ConvertFn convert_;
  const std::atomic<bool>* cancel_;
  std::vector<std::vector<uint8_t>> slots_;

  std::mutex m_;
  std::condition_variable slot_free_, batch_done_;
  std::vector<int64_t> grains_left_;  // a batch's grains not yet converted
  int64_t released_ = 0;             // batches the caller is done with
  int64_t taken_ = 0;                // batches next() returned
  bool stop_ = false;
  bool failed_ = false;
  std::exception_ptr error_;
  std::atomic<int64_t> next_grain_{0};
  std::vector<std::thread> threads_;
};

}  // namespace weft::model::detail
