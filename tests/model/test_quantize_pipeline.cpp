// RowPipeline (src/model/quantize_pipeline.h), the conversion stage of
// `weft quantize`: whatever the thread count and however batches and grains
// fall, the caller receives every row of every job exactly once, in order,
// each converted into its place; a worker's exception reaches the caller;
// a caller that stops early (an error of its own) does not hang the workers.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "model/quantize_pipeline.h"
#include "weft/core/error.h"

using weft::model::detail::RowJob;
using weft::model::detail::RowPipeline;

namespace {

// The bytes row `row` of job `job` converts to: a pattern no other row has.
void pipeline_row_bytes(size_t job, int64_t row, uint8_t* out, size_t n) {
  for (size_t k = 0; k < n; ++k) out[k] = static_cast<uint8_t>(job * 131 + static_cast<size_t>(row) * 7 + k);
}

std::vector<RowJob> pipeline_jobs() {
  // Batches of 1 row and of many, grains dividing them and not, a job with
  // one row, rows of 1 byte and of 100.
  return {RowJob{10, 4, 3, 1}, RowJob{1, 100, 5, 2}, RowJob{97, 1, 20, 7}, RowJob{64, 16, 64, 64},
          RowJob{33, 8, 1, 1}};
}

}  // namespace

TEST(QuantizePipeline, EveryRowOnceInOrderForAnyThreadCount) {
  for (const int threads : {1, 2, 3, 8}) {
    const std::vector<RowJob> jobs = pipeline_jobs();
    std::vector<std::atomic<int>> calls(5 * 100);
    RowPipeline p(jobs, threads, [&](size_t job, int64_t row, uint8_t* out, int thread) {
      EXPECT_GE(thread, 0);
      EXPECT_LT(thread, threads);
      calls[job * 100 + static_cast<size_t>(row)].fetch_add(1);
      pipeline_row_bytes(job, row, out, jobs[job].out_row);
    }, nullptr);
    for (size_t j = 0; j < jobs.size(); ++j) {
      for (int64_t row = 0; row < jobs[j].rows;) {
        const RowPipeline::Batch b = p.next();
        ASSERT_EQ(b.job, j) << threads << " threads";
        ASSERT_EQ(b.first_row, row);
        ASSERT_EQ(b.rows, std::min(jobs[j].batch_rows, jobs[j].rows - row));
        ASSERT_EQ(b.bytes, static_cast<size_t>(b.rows) * jobs[j].out_row);
        std::vector<uint8_t> want(b.bytes);
        for (int64_t r = 0; r < b.rows; ++r)
          pipeline_row_bytes(j, row + r, want.data() + static_cast<size_t>(r) * jobs[j].out_row, jobs[j].out_row);
        ASSERT_EQ(std::memcmp(b.data, want.data(), b.bytes), 0) << "job " << j << " row " << row;
        row += b.rows;
      }
    }
    for (size_t j = 0; j < jobs.size(); ++j)
      for (int64_t row = 0; row < jobs[j].rows; ++row) EXPECT_EQ(calls[j * 100 + static_cast<size_t>(row)].load(), 1);
    try {
      p.next();
      ADD_FAILURE() << "a batch past the last";
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::internal);
    }
  }
}

TEST(QuantizePipeline, AWorkersErrorReachesTheCaller) {
  for (const int threads : {1, 3}) {
    const std::vector<RowJob> jobs = pipeline_jobs();
    RowPipeline p(jobs, threads, [&](size_t job, int64_t row, uint8_t* out, int) {
      if (job == 2 && row == 50) throw std::runtime_error("row 50 of job 2");
      pipeline_row_bytes(job, row, out, jobs[job].out_row);
    }, nullptr);
    int batches = 0;
    try {
      for (;;) {
        p.next();
        ++batches;
      }
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "row 50 of job 2");
    }
    // At most jobs 0 and 1 (4 and 1 batches) and job 2's batches before row
    // 40: the error may end the run before the caller takes them all.
    EXPECT_LE(batches, 4 + 1 + 2) << threads << " threads";
    if (threads == 1) {
      EXPECT_EQ(batches, 4 + 1 + 2);  // one worker converts in order
    }
  }
}

TEST(QuantizePipeline, ACallerThatStopsEarlyEndsTheWorkers) {
  std::atomic<bool> cancel{false};
  std::atomic<int> converted{0};
  {
    RowPipeline p(pipeline_jobs(), 3, [&](size_t, int64_t, uint8_t*, int) { converted.fetch_add(1); }, &cancel);
    p.next();
    cancel = true;
  }  // joins: must not hang on workers waiting for a buffer
  // At most the batches the buffers hold were converted before the cancel.
  EXPECT_LT(converted.load(), 10 + 1 + 97 + 64 + 33);
}
