// SUPPORTS_OP on the worker (docs/rpc-protocol.md section 3a), spoken by
// hand: valid questions get the device's own answer (less WorkerTestAccess::refuse_ops, which
// also refuses graphs holding such a node); malformed ones end only their
// session with ERROR invalid_input, while a client connected before keeps
// computing correct results.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/worker_testing.h"
#include "protocol/messages.h"
#include "weft/backend/cpu.h"
#include "weft/rpc/worker.h"
#include "wire_graph.h"
#include "worker_wire.h"

namespace weft::rpc::wtest {
namespace {

class WorkerSupportsOp : public ::testing::Test {
 protected:
  void SetUp() override {
    cpu_ = make_cpu_device(1);
    WorkerOptions o;
    o.log = false;
    worker_ = std::make_unique<Worker>(std::vector<Device*>{cpu_.get()}, o);
    WorkerTestAccess::refuse_ops(*worker_, {Op::sqrt});
    worker_->start();
    good_ = std::make_unique<GoodClient>(worker_->port(), 0, 3);
    good_->round();
  }
  void TearDown() override {
    good_->round();  // the attack ended only its own session
    EXPECT_TRUE(eventually([&] { return worker_->active_sessions() == 1; }));
    good_.reset();
    worker_->stop();
  }
  std::unique_ptr<Conn> fresh() {
    auto c = std::make_unique<Conn>(worker_->port());
    EXPECT_NE(c->handshake() & kCapOpSupport, 0u) << "the worker does not offer SUPPORTS_OP";
    return c;
  }
  // A valid question, changed by mutate, ends the session with invalid_input
  // whose message holds `want`.
  void expect_refused(const std::function<void(SupportsOpRequest&)>& mutate, const std::string& want) {
    auto c = fresh();
    SupportsOpRequest q = SupportsOpRequest::of(0, *mm_);
    mutate(q);
    c->send(q);
    const Frame f = c->recv();
    ASSERT_TRUE(f.is_error()) << "answered a malformed question (" << want << ")";
    EXPECT_EQ(f.error_kind(), ErrorKind::invalid_input);
    EXPECT_NE(f.error_message().find(want), std::string::npos) << f.error_message();
    EXPECT_TRUE(c->closed_by_peer());
  }
  void expect_fatal_bytes(const Bytes& payload, const std::string& want) {
    auto c = fresh();
    c->send(Cmd::supports_op, payload);
    const Frame f = c->recv();
    ASSERT_TRUE(f.is_error());
    EXPECT_EQ(f.error_kind(), ErrorKind::invalid_input);
    EXPECT_NE(f.error_message().find(want), std::string::npos) << f.error_message();
    EXPECT_TRUE(c->closed_by_peer());
  }

  std::unique_ptr<Device> cpu_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<GoodClient> good_;
  Context ctx_;
  Tensor* a_ = ctx_.new_tensor(DType::f32, {16, 8});
  Tensor* b_ = ctx_.new_tensor(DType::f32, {16, 4});
  Tensor* mm_ = ops::mul_mat(ctx_, a_, b_);
};

TEST_F(WorkerSupportsOp, AnswersWithTheDevicesRuleLessRefusedOps) {
  auto c = fresh();
  Tensor* h = ctx_.new_tensor(DType::f16, {16, 4});
  Tensor* q = ctx_.new_tensor(DType::q4_0, {32, 4});
  Tensor* idx = ctx_.new_tensor(DType::i32, {2});
  const std::vector<Tensor*> nodes = {mm_,
                                      ops::add(ctx_, h, h),
                                      ops::soft_max(ctx_, b_, nullptr, 1.0f),
                                      ops::mul_mat(ctx_, q, ctx_.new_tensor(DType::f32, {32, 3})),
                                      ops::get_rows(ctx_, q, idx),
                                      ops::cpy(ctx_, h, ctx_.new_tensor(DType::bf16, {16, 4})),
                                      ops::scale(ctx_, ops::permute(ctx_, a_, 1, 0, 2, 3), 2.0f)};
  for (Tensor* n : nodes) {
    EXPECT_EQ(c->call(SupportsOpRequest::of(0, *n)).supported, cpu_->supports_op(*n)) << op_name(n->op);
  }
  Tensor* root = ops::sqrt(ctx_, b_);
  EXPECT_TRUE(cpu_->supports_op(*root));
  EXPECT_FALSE(c->call(SupportsOpRequest::of(0, *root)).supported) << "refuse_ops was not applied";
  c->ping();  // the session stays after valid questions
}

// A graph holding a refused op is refused like any unsupported node.
TEST_F(WorkerSupportsOp, AGraphWithARefusedOpIsRefused) {
  auto c = fresh();
  const uint64_t h = c->alloc(0, 1024);
  WG g;
  g.t.push_back(packed_f32(8, 4, h, 0));
  WT root = packed_f32(8, 4, h, 128);
  root.op = static_cast<uint8_t>(Op::sqrt);
  root.src[0] = 1;
  g.t.push_back(root);
  g.nodes = {1};
  const Bytes encoded = encode_wg(g);
  c->compute(0, 1, &encoded);
  expect_fatal(*c);
}

TEST_F(WorkerSupportsOp, MalformedQuestionsEndTheSession) {
  expect_refused([](SupportsOpRequest& q) { q.device = 1; }, "device 1 is out of range");
  expect_refused([](SupportsOpRequest& q) { q.op = kOpCount; }, "is unknown");
  expect_refused([](SupportsOpRequest& q) { q.op = static_cast<uint8_t>(Op::view); }, "computes nothing");
  expect_refused([](SupportsOpRequest& q) { q.op = static_cast<uint8_t>(Op::none); }, "computes nothing");
  expect_refused([](SupportsOpRequest& q) { q.node.dtype = 200; }, "node dtype 200");
  expect_refused([](SupportsOpRequest& q) { q.src[1]->dtype = kDTypeCount; }, "src[1] dtype");
  expect_refused([](SupportsOpRequest& q) { q.src[0]->ne[2] = -1; }, "negative");
  expect_refused([](SupportsOpRequest& q) { q.node.ne[1] = int64_t{1} << 40; }, "2^32");
  expect_refused([](SupportsOpRequest& q) { q.src[0]->nb[1] = 66; }, "not a multiple of 4");
  expect_refused([](SupportsOpRequest& q) { q.src[0]->nb[1] = uint64_t{1} << 60; }, "2^62");
  expect_refused([](SupportsOpRequest& q) { q.src[0]->ne[0] = 15; }, "mul_mat");  // the constructor refuses
  expect_refused([](SupportsOpRequest& q) { q.src[1].reset(); }, "mul_mat");      // an operand missing
  expect_refused([](SupportsOpRequest& q) { q.node.ne[0] = 9; }, "not what the op gives");
  expect_refused([](SupportsOpRequest& q) { q.node.nb[1] = 64; }, "not what the op gives");
  expect_refused([](SupportsOpRequest& q) { q.node.dtype = static_cast<uint8_t>(DType::f16); }, "the op gives");
  expect_refused([](SupportsOpRequest& q) { q.src[0]->dtype = static_cast<uint8_t>(DType::q8_0); }, "blocks");
}

TEST_F(WorkerSupportsOp, MalformedPayloadsEndTheSession) {
  const Bytes valid = encoded(SupportsOpRequest::of(0, *mm_)).data();
  expect_fatal_bytes(Bytes(valid.begin(), valid.end() - 1), "truncated");
  Bytes longer = valid;
  longer.push_back(0);
  expect_fatal_bytes(longer, "unexpected bytes");
  Bytes mask = valid;
  mask[4 + 1 + 1 + 32 + 32 + 64] |= 0x10;  // src_mask, after device, op and the node's fields
  expect_fatal_bytes(mask, "src_mask");
  expect_fatal_bytes({}, "truncated");
}

}  // namespace
}  // namespace weft::rpc::wtest
