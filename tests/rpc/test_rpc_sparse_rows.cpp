// Tensors flagged kFlagSparseRows travel as their nonzero rows (protocol
// 1.7, SET_TENSOR_ROWS and GET_TENSOR_ROWS): what the worker holds and what
// the host reads back are byte for byte what a whole transfer gives, the
// unsent rows are zeros on the worker even where it held something else,
// and the bytes on the wire are the listed rows' plus their numbers.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "protocol/wire.h"
#include "rpc_client_fixture.h"

namespace weft {
namespace {

using rpc_test::LocalWorker;

// f32 [width, rows] whose row r is zeros unless r % every == 0.
std::vector<float> every_nth_row(int64_t width, int64_t rows, int64_t every) {
  std::vector<float> v(static_cast<size_t>(width * rows), 0.0f);
  for (int64_t r = 0; r < rows; r += every)
    for (int64_t k = 0; k < width; ++k) v[static_cast<size_t>(r * width + k)] = 1.0f + static_cast<float>(r * width + k);
  return v;
}

struct Pair {
  Pair(Device& remote, Device& local, int64_t width, int64_t rows) {
    host = ctx.new_tensor(DType::f32, {width, rows});
    worker = ctx.new_tensor(DType::f32, {width, rows});
    host->flags |= kFlagSparseRows;
    worker->flags |= kFlagSparseRows;
    std::vector<Tensor*> h{host}, w{worker};
    host_buf = allocate_tensors(local.default_buffer_type(), h);
    worker_buf = allocate_tensors(remote.default_buffer_type(), w);
  }
  Context ctx;
  Tensor* host = nullptr;
  Tensor* worker = nullptr;
  std::unique_ptr<Buffer> host_buf, worker_buf;
};

uint64_t sent(const LocalWorker& w) { return rpc_stats(w.endpoint).bytes_sent; }
uint64_t received(const LocalWorker& w) { return rpc_stats(w.endpoint).bytes_received; }

TEST(RpcSparseRows, AFlaggedTensorTravelsAsItsNonzeroRows) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  auto local = make_cpu_device(1);
  constexpr int64_t kWidth = 32, kRows = 50, kEvery = 3;  // rows 0, 3, ..., 48: 17 of 50
  constexpr uint64_t kListed = 17, kRowBytes = kWidth * 4;
  Pair p(*devices[0], *local, kWidth, kRows);
  // The worker's memory holds something else first: the unsent rows must become zeros.
  const std::vector<float> before = rpc_test::pattern(kWidth * kRows, 0.3f, 2.0f);
  tensor_set(*p.worker, before.data(), 0, p.worker->nbytes());
  const std::vector<float> data = every_nth_row(kWidth, kRows, kEvery);
  tensor_set(*p.host, data.data(), 0, p.host->nbytes());

  const uint64_t sent0 = sent(w);
  ASSERT_TRUE(p.worker_buf->copy_tensor(*p.host, *p.worker));
  // One SET_TENSOR_ROWS: header, 32 bytes of fields, the row numbers, the rows.
  EXPECT_EQ(sent(w) - sent0, rpc::kFrameHeaderBytes + 32 + 4 * kListed + kRowBytes * kListed);

  // Read back as rows (GET_TENSOR_ROWS) and whole (an unflagged view, GET_TENSOR).
  std::vector<float> back(data.size(), -1.0f);
  const uint64_t received0 = received(w);
  tensor_get(*p.worker, back.data(), 0, p.worker->nbytes());
  EXPECT_EQ(received(w) - received0, rpc::kFrameHeaderBytes + 4 + 4 * kListed + kRowBytes * kListed);
  EXPECT_EQ(back, data);
  Tensor whole = *p.worker;
  whole.flags = 0;
  std::vector<float> plain(data.size(), -1.0f);
  tensor_get(whole, plain.data(), 0, whole.nbytes());
  EXPECT_EQ(plain, data);
  EXPECT_EQ(received(w) - received0,
            2 * rpc::kFrameHeaderBytes + 4 + 4 * kListed + kRowBytes * kListed + kRowBytes * kRows);
}

TEST(RpcSparseRows, AllZeroAndNoZeroRows) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  auto local = make_cpu_device(1);
  constexpr int64_t kWidth = 16, kRows = 8;
  Pair p(*devices[0], *local, kWidth, kRows);
  const std::vector<float> ones(kWidth * kRows, 1.0f);
  tensor_set(*p.worker, ones.data(), 0, p.worker->nbytes());

  // No row to list: the fields alone, and the worker's copy is zeros.
  const std::vector<float> zeros(kWidth * kRows, 0.0f);
  tensor_set(*p.host, zeros.data(), 0, p.host->nbytes());
  uint64_t sent0 = sent(w);
  ASSERT_TRUE(p.worker_buf->copy_tensor(*p.host, *p.worker));
  EXPECT_EQ(sent(w) - sent0, rpc::kFrameHeaderBytes + 32);
  std::vector<float> back(zeros.size(), -1.0f);
  tensor_get(*p.worker, back.data(), 0, p.worker->nbytes());
  EXPECT_EQ(back, zeros);

  // No zero row: a plain SET_TENSOR (listing every row would only add bytes);
  // -0.0 is not zero bytes, so a row of it travels.
  std::vector<float> full = rpc_test::pattern(kWidth * kRows, 0.7f, 0.5f);
  for (int64_t k = 0; k < kWidth; ++k) full[static_cast<size_t>(k)] = -0.0f;
  tensor_set(*p.host, full.data(), 0, p.host->nbytes());
  sent0 = sent(w);
  ASSERT_TRUE(p.worker_buf->copy_tensor(*p.host, *p.worker));
  EXPECT_EQ(sent(w) - sent0, rpc::kFrameHeaderBytes + 24 + p.host->nbytes());
  tensor_get(*p.worker, back.data(), 0, p.worker->nbytes());
  EXPECT_EQ(std::memcmp(back.data(), full.data(), p.host->nbytes()), 0);
}

// Rows too short to list, an unflagged tensor, and RpcOptions::sparse_rows
// false all travel whole.
TEST(RpcSparseRows, WhatTravelsWhole) {
  LocalWorker w, w_off;
  auto local = make_cpu_device(1);
  const auto check_whole = [&](const LocalWorker& w, Device& remote, int64_t width, bool flagged) {
    Pair p(remote, *local, width, 10);
    if (!flagged) p.host->flags = p.worker->flags = 0;
    const std::vector<float> data = every_nth_row(width, 10, 4);
    tensor_set(*p.host, data.data(), 0, p.host->nbytes());
    const uint64_t sent0 = sent(w), received0 = received(w);
    ASSERT_TRUE(p.worker_buf->copy_tensor(*p.host, *p.worker));
    std::vector<float> back(data.size());
    tensor_get(*p.worker, back.data(), 0, p.worker->nbytes());
    EXPECT_EQ(back, data);
    EXPECT_EQ(sent(w) - sent0, rpc::kFrameHeaderBytes * 2 + 24 * 2 + p.host->nbytes());  // SET_TENSOR, GET_TENSOR
    EXPECT_EQ(received(w) - received0, rpc::kFrameHeaderBytes + p.host->nbytes());
  };
  auto devices = make_rpc_devices(w.endpoint);
  check_whole(w, *devices[0], 8, true);    // 32-byte rows
  check_whole(w, *devices[0], 64, false);  // not flagged
  RpcOptions off;
  off.sparse_rows = false;
  auto whole_devices = make_rpc_devices(w_off.endpoint, off);
  check_whole(w_off, *whole_devices[0], 64, true);
}

// More rows than one frame carries: SET_TENSOR_ROWS in two frames (64 MiB
// each at most), GET_TENSOR_ROWS in pieces whose replies fit 16 MiB.
TEST(RpcSparseRows, BigTensorsGoInPieces) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  auto local = make_cpu_device(1);
  constexpr int64_t kWidth = 4096, kRows = 4500;  // 72 MiB, 16 KiB rows
  Pair p(*devices[0], *local, kWidth, kRows);
  std::vector<float> data = every_nth_row(kWidth, kRows, 1);
  for (int64_t r = 7; r < kRows; r += 10)  // one row in ten zeros
    std::fill_n(data.begin() + r * kWidth, kWidth, 0.0f);
  tensor_set(*p.host, data.data(), 0, p.host->nbytes());
  ASSERT_TRUE(p.worker_buf->copy_tensor(*p.host, *p.worker));
  std::vector<float> back(data.size(), -1.0f);
  tensor_get(*p.worker, back.data(), 0, p.worker->nbytes());
  EXPECT_TRUE(back == data);
}

}  // namespace
}  // namespace weft
