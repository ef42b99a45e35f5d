// Reads started ahead (Buffer::start_read over a worker: a GET_TENSOR queued
// now, its reply taken later; Connection::start_get_tensor). Replies come in
// request order, so a reply read for another call first takes the started
// ones off the stream and keeps them; a dropped read's reply is discarded;
// the bytes are those the worker held when it reached the request; a
// worker that dies ends a started read with an error naming it.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "rpc/local_workers.h"
#include "weft/backend/backend.h"
#include "weft/core/context.h"
#include "weft/core/error.h"
#include "weft/rpc/client.h"

namespace weft {
namespace {

std::vector<float> values(float base, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i);
  return v;
}

std::vector<float> read_now(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.nelements()));
  tensor_get(t, out.data(), 0, t.nbytes());
  return out;
}

std::vector<float> finish(Tensor& t, uint64_t ticket) {
  std::vector<float> out(static_cast<size_t>(t.nelements()));
  t.buffer->finish_read(ticket, out.data());
  return out;
}

TEST(RpcStartedReads, RepliesAreKeptInRequestOrderAndDropsDiscarded) {
  testing::LocalWorkers worker(1);
  auto devices = make_rpc_devices(worker.endpoint(0));
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {300});
  Tensor* b = ctx.new_tensor(DType::f32, {200});
  std::vector<Tensor*> both = {a, b};
  auto buffer = allocate_tensors(devices.at(0)->default_buffer_type(), both);
  ASSERT_NE(buffer, nullptr);
  ASSERT_TRUE(buffer->reads_in_stream_order());
  const auto va = values(1000, 300), vb = values(-50, 200);
  tensor_set(*a, va.data(), 0, a->nbytes());
  tensor_set(*b, vb.data(), 0, b->nbytes());

  const uint64_t first = buffer->start_read(*a);
  ASSERT_NE(first, 0u);
  EXPECT_EQ(read_now(*b), vb);  // its reply came after a's, which was kept
  // Started before b changes: a's bytes as they were then, whatever comes later.
  const uint64_t second = buffer->start_read(*b);
  const auto vb2 = values(7, 200);
  tensor_set(*b, vb2.data(), 0, b->nbytes());
  const uint64_t dropped = buffer->start_read(*a);
  const uint64_t third = buffer->start_read(*b);
  buffer->drop_read(dropped);
  EXPECT_EQ(finish(*b, third), vb2);  // reads the replies of second and dropped on the way
  EXPECT_EQ(finish(*a, first), va);
  EXPECT_EQ(finish(*b, second), vb);
  EXPECT_THROW(finish(*b, second), Error);  // taken once
  const RpcStats stats = rpc_stats(worker.endpoint(0));
  EXPECT_GE(stats.round_trips, 4u);
}

TEST(RpcStartedReads, AWorkerThatDiesEndsAStartedReadNamingIt) {
  auto worker = std::make_unique<testing::LocalWorkers>(1);
  const std::string endpoint = worker->endpoint(0);
  auto devices = make_rpc_devices(endpoint);
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {64});
  std::vector<Tensor*> one = {a};
  auto buffer = allocate_tensors(devices.at(0)->default_buffer_type(), one);
  ASSERT_NE(buffer, nullptr);
  tensor_set(*a, values(1, 64).data(), 0, a->nbytes());
  (void)read_now(*a);
  worker.reset();  // gone before the request is even written: the client has not noticed yet
  const uint64_t ticket = buffer->start_read(*a);
  ASSERT_NE(ticket, 0u);
  try {
    (void)finish(*a, ticket);
    ADD_FAILURE() << "a read from a dead worker returned bytes";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::disconnected) << e.what();
    EXPECT_NE(std::string(e.what()).find(endpoint), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft
