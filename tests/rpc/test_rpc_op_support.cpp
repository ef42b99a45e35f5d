// Op support of remote devices (docs/rpc-protocol.md section 3a): the
// worker's device answers, the client caches per shape class and
// connection, the scheduler places what a worker refuses elsewhere, and a
// worker that cannot answer (1.0) or answers nonsense is handled.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include "protocol/messages.h"
#include "rpc_client_fixture.h"
#include "transport/stream.h"
#include "weft/backend/alloc.h"
#include "weft/backend/sched.h"
#include "weft/core/ops.h"

namespace weft {
namespace {

using rpc_test::LocalWorker;
using rpc_test::pattern;

uint64_t support_queries(const std::string& endpoint) { return rpc_stats(endpoint).support_queries; }

// y = silu(W · rms_norm(x)), W a weight in a remote buffer, x an input.
struct NormMatmul {
  static constexpr int64_t kK = 64, kM = 32, kN = 4;
  explicit NormMatmul(Device& remote) {
    w = wctx.new_tensor(DType::f32, {kK, kM});
    w->flags |= kFlagWeight;
    Tensor* ws[] = {w};
    weights = allocate_tensors(remote.default_buffer_type(), ws);
    tensor_set(*w, w_data.data(), 0, w->nbytes());
  }
  // A new graph over the same weight (a new micro-batch).
  void build() {
    ctx = std::make_unique<Context>();
    g = Graph();
    x = ctx->new_tensor(DType::f32, {kK, kN});
    x->flags |= kFlagInput;
    norm = ops::rms_norm(*ctx, x, 1e-5f);
    mm = ops::mul_mat(*ctx, w, norm);
    y = ops::silu(*ctx, mm);
    y->flags |= kFlagOutput;
    g.expand(y);
  }
  void run(Scheduler& sched) {
    sched.allocate(g);
    tensor_set(*x, x_data.data(), 0, x->nbytes());
    sched.compute(g);
  }
  std::vector<float> result() const {
    std::vector<float> out(static_cast<size_t>(y->nelements()));
    tensor_get(*y, out.data(), 0, y->nbytes());
    return out;
  }
  void expect_correct() const {
    const std::vector<float> got = result();
    for (int64_t j = 0; j < kN; ++j) {
      double ss = 0;
      for (int64_t l = 0; l < kK; ++l) ss += std::pow(x_data[static_cast<size_t>(j * kK + l)], 2);
      const double inv = 1.0 / std::sqrt(ss / kK + 1e-5);
      for (int64_t i = 0; i < kM; ++i) {
        double s = 0;
        for (int64_t l = 0; l < kK; ++l) {
          s += w_data[static_cast<size_t>(i * kK + l)] * (x_data[static_cast<size_t>(j * kK + l)] * inv);
        }
        const double want = s / (1.0 + std::exp(-s));
        ASSERT_NEAR(got[static_cast<size_t>(j * kM + i)], want, 1e-3 * (1.0 + std::fabs(want))) << i << "," << j;
      }
    }
  }

  std::vector<float> w_data = pattern(kK * kM, 0.37f, 0.5f);
  std::vector<float> x_data = pattern(kK * kN, 0.11f, 1.5f);
  Context wctx;
  Tensor* w = nullptr;
  std::unique_ptr<Buffer> weights;
  std::unique_ptr<Context> ctx;
  Graph g;
  Tensor *x = nullptr, *norm = nullptr, *mm = nullptr, *y = nullptr;
};

TEST(RpcOpSupport, TheWorkersDeviceAnswers) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  Device& remote = *devices[0];
  auto cpu = make_cpu_device(1);
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {16, 8});
  Tensor* b = ctx.new_tensor(DType::f32, {16, 4});
  Tensor* h = ctx.new_tensor(DType::f16, {16, 4});
  Tensor* q = ctx.new_tensor(DType::q8_0, {32, 8});
  Tensor* idx = ctx.new_tensor(DType::i32, {3});
  // Candidates; those a constructor refuses are skipped (today the CPU's
  // rule refuses little that its constructors accept).
  std::vector<Tensor*> nodes;
  auto add = [&](const std::function<Tensor*()>& make) {
    try {
      nodes.push_back(make());
    } catch (const Error&) {
    }
  };
  add([&] { return ops::mul_mat(ctx, a, b); });
  add([&] { return ops::mul_mat(ctx, q, ctx.new_tensor(DType::f32, {32, 2})); });
  add([&] { return ops::rms_norm(ctx, b, 1e-5f); });
  add([&] { return ops::rms_norm(ctx, h, 1e-5f); });
  add([&] { return ops::add(ctx, h, h); });
  add([&] { return ops::scale(ctx, ops::permute(ctx, a, 1, 0, 2, 3), 0.5f); });
  add([&] { return ops::get_rows(ctx, a, idx); });
  add([&] { return ops::get_rows(ctx, q, idx); });
  add([&] { return ops::cont(ctx, ops::transpose(ctx, a)); });
  add([&] { return ops::cpy(ctx, h, ctx.new_tensor(DType::f32, {16, 4})); });
  add([&] { return ops::soft_max(ctx, b, nullptr, 0.5f); });
  add([&] { return ops::concat(ctx, a, a, 1); });
  ASSERT_GE(nodes.size(), 8u);
  for (Tensor* n : nodes) {
    EXPECT_EQ(remote.supports_op(*n), cpu->supports_op(*n)) << op_name(n->op) << " " << shape_string(*n);
  }
}

// One question per shape class, none per layer and none when a graph runs
// again: measured with the connection's counters (rpc_stats).
TEST(RpcOpSupport, AskedOncePerShapeClassNotPerEval) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  auto local = make_cpu_device(1);
  auto remote_backend = devices[0]->create_backend();  // holds the connection, and so its cache
  auto cpu_backend = local->create_backend();
  NormMatmul m(*devices[0]);
  Scheduler sched({remote_backend.get(), cpu_backend.get()});

  m.build();
  m.run(sched);
  m.expect_correct();
  const RpcStats first = rpc_stats(w.endpoint);
  EXPECT_GE(first.support_queries, 3u);  // rms_norm, mul_mat, silu: at least asked once each
  EXPECT_LE(first.support_queries, first.round_trips);

  m.build();  // a new graph of the same shapes, as the next token's
  m.run(sched);
  m.expect_correct();
  const RpcStats second = rpc_stats(w.endpoint);
  EXPECT_EQ(second.support_queries, first.support_queries) << "the second eval asked SUPPORTS_OP again";

  m.build();
  m.run(sched);
  m.expect_correct();
  const RpcStats third = rpc_stats(w.endpoint);
  EXPECT_EQ(third.support_queries, first.support_queries);
  EXPECT_EQ(third.round_trips - second.round_trips, second.round_trips - first.round_trips)
      << "the steady state costs the same round trips every eval";

  // Many layers of other dimensions: the same classes, no new question.
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {48, 3});
  for (int layer = 0; layer < 8; ++layer) {
    Tensor* wl = ctx.new_tensor(DType::f32, {48, 48});
    x = ops::silu(ctx, ops::mul_mat(ctx, wl, ops::rms_norm(ctx, x, 1e-5f)));
    for (const Tensor* n : {x, x->src[0], x->src[0]->src[1]}) {
      EXPECT_TRUE(devices[0]->supports_op(*n)) << op_name(n->op);
    }
  }
  EXPECT_EQ(support_queries(w.endpoint), first.support_queries);
  // Another class (f16 operands) is a new question.
  Tensor* h = ctx.new_tensor(DType::f16, {8});
  EXPECT_TRUE(devices[0]->supports_op(*ops::add(ctx, h, h)));
  EXPECT_EQ(support_queries(w.endpoint), first.support_queries + 1);
}

// The scheduler places what the worker refuses on the CPU, and the graph
// still computes: if the client ignored the refusal, the worker would refuse
// the graph holding that node (it checks its own answer again).
TEST(RpcOpSupport, RefusedOpsArePlacedOnTheCpu) {
  for (bool refuse : {false, true}) {
    SCOPED_TRACE(refuse ? "worker refuses rms_norm" : "worker refuses nothing");
    LocalWorker w({}, 2, refuse ? std::vector<Op>{Op::rms_norm} : std::vector<Op>{});
    auto devices = make_rpc_devices(w.endpoint);
    auto local = make_cpu_device(1);
    auto remote_backend = devices[0]->create_backend();
    auto cpu_backend = local->create_backend();
    NormMatmul m(*devices[0]);
    Scheduler sched({remote_backend.get(), cpu_backend.get()});
    m.build();
    EXPECT_EQ(devices[0]->supports_op(*m.norm), !refuse);
    EXPECT_TRUE(devices[0]->supports_op(*m.mm));
    m.run(sched);
    m.expect_correct();
    EXPECT_EQ(sched.backend_of(*m.norm), refuse ? 1 : 0);
    EXPECT_EQ(sched.backend_of(*m.mm), 0);  // its weight is on the worker
  }
}

// Answers belong to the connection: after a reconnect to another worker on
// the same endpoint, the new worker is asked again.
TEST(RpcOpSupport, AReconnectAsksAgain) {
  auto a = std::make_unique<LocalWorker>(rpc::WorkerOptions{}, 2, std::vector<Op>{Op::rms_norm});
  const std::string endpoint = a->endpoint;
  auto devices = make_rpc_devices(endpoint);
  auto backend = devices[0]->create_backend();  // keeps the first connection open
  Context ctx;
  Tensor* n = ops::rms_norm(ctx, ctx.new_tensor(DType::f32, {16, 2}), 1e-5f);
  EXPECT_FALSE(devices[0]->supports_op(*n));
  const uint16_t port = a->worker->port();
  a.reset();
  EXPECT_THROW(backend->synchronize(), Error);  // the connection is now known broken

  rpc::WorkerOptions same_port;
  same_port.port = port;
  LocalWorker b(same_port);
  ASSERT_EQ(b.endpoint, endpoint);
  EXPECT_TRUE(devices[0]->supports_op(*n)) << "a stale answer of the first worker was reused";
}

// A stand-in worker speaking only the handshake, GET_DEVICES and (with
// op_support) SUPPORTS_OP with a fixed reply, recording the commands it got.
// Its HELLO says minor 1 with op_support (a 1.1 worker), else 0, unless told.
class FakeWorker {
 public:
  FakeWorker(uint64_t caps, std::vector<uint8_t> supports_reply, int minor = -1)
      : caps_(caps),
        minor_(minor >= 0 ? static_cast<uint16_t>(minor) : caps & rpc::kCapOpSupport ? 1 : 0),
        reply_(std::move(supports_reply)),
        listener_(rpc::tcp_listen("127.0.0.1", 0)) {
    endpoint = "127.0.0.1:" + std::to_string(listener_->port());
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeWorker() {
    listener_->close();
    {
      std::lock_guard lock(mu_);
      if (current_) current_->shutdown();
    }
    thread_.join();
  }
  bool got(rpc::Cmd c) { return count(c) > 0; }
  size_t count(rpc::Cmd c) {
    std::lock_guard lock(mu_);
    return static_cast<size_t>(std::count(seen_.begin(), seen_.end(), static_cast<uint16_t>(c)));
  }
  std::string endpoint;

 private:
  void serve() {
    while (auto s = listener_->accept()) {
      {
        std::lock_guard lock(mu_);
        current_ = s.get();
      }
      try {
        for (;;) frame(*s);
      } catch (const Error&) {
        // the client closed: next connection
      }
      std::lock_guard lock(mu_);
      current_ = nullptr;
    }
  }
  void frame(rpc::Stream& s) {
    uint8_t raw[rpc::kFrameHeaderBytes];
    s.read_exact(raw, sizeof raw);
    const rpc::FrameHeader h = rpc::decode_header(raw);
    std::vector<uint8_t> payload(h.length);
    if (h.length > 0) s.read_exact(payload.data(), h.length);
    {
      std::lock_guard lock(mu_);
      seen_.push_back(h.command);
    }
    rpc::Writer w;
    switch (static_cast<rpc::Cmd>(h.command)) {
      case rpc::Cmd::hello: {
        rpc::HelloReply r;
        r.minor = minor_;
        r.capabilities = caps_;
        r.encode(w);
        break;
      }
      case rpc::Cmd::get_devices: {
        rpc::GetDevicesReply r;
        r.devices.push_back(rpc::DeviceInfo{"FAKE", "fake", 0, 1 << 30, 1 << 30, "FAKE", 64, 1 << 30});
        r.encode(w);
        break;
      }
      case rpc::Cmd::supports_op: w.bytes(reply_.data(), reply_.size()); break;
      default: break;  // a test never waits for anything else
    }
    uint8_t head[rpc::kFrameHeaderBytes];
    rpc::encode_header(rpc::FrameHeader{static_cast<uint32_t>(w.data().size()),
                                        static_cast<uint16_t>(h.command | rpc::kReplyBit), 0},
                       head);
    s.write_all(head, sizeof head, w.data().data(), w.data().size());
  }

  const uint64_t caps_;
  const uint16_t minor_;
  const std::vector<uint8_t> reply_;
  std::unique_ptr<rpc::Listener> listener_;
  std::mutex mu_;
  rpc::Stream* current_ = nullptr;
  std::vector<uint16_t> seen_;
  std::thread thread_;
};

TEST(RpcOpSupport, A10WorkerIsGivenNothingToCompute) {
  FakeWorker fake(rpc::kCapEvents, {});
  auto devices = make_rpc_devices(fake.endpoint);
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {8, 4});
  EXPECT_FALSE(devices[0]->supports_op(*ops::silu(ctx, a)));
  EXPECT_TRUE(devices[0]->supports_op(*ops::transpose(ctx, a)));  // views are the wire's to carry
  EXPECT_FALSE(fake.got(rpc::Cmd::supports_op)) << "SUPPORTS_OP sent to a worker without the capability";
}

// Ops appended in 1.2 are unknown numbers to a 1.1 worker, which would end
// the session over them: it is neither asked about them nor sent them; the
// older ops are asked as before. A 1.2 worker is asked.
TEST(RpcOpSupport, A11WorkerIsNeverSentOpsNewerThanIt) {
  FakeWorker fake(rpc::kCapEvents | rpc::kCapOpSupport, {1});
  auto devices = make_rpc_devices(fake.endpoint);
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {8, 4});
  Tensor* x = ctx.new_tensor(DType::f32, {8, 2, 3});
  Tensor* pos = ctx.new_tensor(DType::i32, {3});
  const Tensor* newer[] = {ops::gelu_erf(ctx, a), ops::sigmoid(ctx, a), ops::softcap(ctx, a, 30.0f),
                           ops::rope_ext(ctx, x, pos, nullptr, 8, RopeMode::neox, 1e4f)};
  for (const Tensor* t : newer) EXPECT_FALSE(devices[0]->supports_op(*t)) << op_name(t->op);
  EXPECT_FALSE(fake.got(rpc::Cmd::supports_op)) << "a 1.1 worker was asked about a 1.2 op";
  EXPECT_TRUE(devices[0]->supports_op(*ops::silu(ctx, a)));
  EXPECT_EQ(fake.count(rpc::Cmd::supports_op), 1u);
  // Nor does compute() send one (placed there by hand, past supports_op).
  Graph g;
  g.expand(ops::sigmoid(ctx, a));
  try {
    devices[0]->create_backend()->compute(g);
    ADD_FAILURE() << "a 1.2 op was sent to a 1.1 worker";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("protocol 1.1"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fake.got(rpc::Cmd::graph_compute));

  FakeWorker newer_worker(rpc::kCapEvents | rpc::kCapOpSupport, {1}, 2);
  auto devices2 = make_rpc_devices(newer_worker.endpoint);
  for (const Tensor* t : newer) EXPECT_TRUE(devices2[0]->supports_op(*t)) << op_name(t->op);
  EXPECT_EQ(newer_worker.count(rpc::Cmd::supports_op), std::size(newer));
}

// flash_attn (1.3) is never asked of a 1.2 worker: the model's probe gets
// false and the layers it holds use the unfused attention; a 1.3 worker is
// asked.
TEST(RpcOpSupport, A12WorkerIsNeverAskedAboutFlashAttn) {
  Context ctx;
  Tensor* q = ctx.new_tensor(DType::f32, {32, 1, 4});
  Tensor* k = ctx.new_tensor(DType::f16, {32, 1, 2});
  const Tensor* fa = ops::flash_attn(ctx, q, k, k, ctx.new_tensor(DType::f32, {1, 1}), 0.2f);
  FakeWorker old_worker(rpc::kCapEvents | rpc::kCapOpSupport, {1}, 2);
  auto old_devices = make_rpc_devices(old_worker.endpoint);
  EXPECT_FALSE(old_devices[0]->supports_op(*fa));
  EXPECT_FALSE(old_worker.got(rpc::Cmd::supports_op));
  FakeWorker new_worker(rpc::kCapEvents | rpc::kCapOpSupport, {1}, 3);
  auto new_devices = make_rpc_devices(new_worker.endpoint);
  EXPECT_TRUE(new_devices[0]->supports_op(*fa));
  EXPECT_EQ(new_worker.count(rpc::Cmd::supports_op), 1u);
}

// 1.4 widened flash_attn to q8_0 keys and values: a 1.3 worker's
// constructor would refuse such a node and end the session, so it is not
// asked (and the model keeps an f16 cache or says why it cannot).
TEST(RpcOpSupport, A13WorkerIsNeverAskedAboutQuantizedFlashAttn) {
  Context ctx;
  Tensor* q = ctx.new_tensor(DType::f32, {32, 1, 4});
  Tensor* k16 = ctx.new_tensor(DType::f16, {32, 1, 2});
  Tensor* k8 = ctx.new_tensor(DType::q8_0, {32, 1, 2});
  Tensor* mask = ctx.new_tensor(DType::f32, {1, 1});
  const Tensor* fa16 = ops::flash_attn(ctx, q, k16, k16, mask, 0.2f);
  const Tensor* fa8 = ops::flash_attn(ctx, q, k8, k8, mask, 0.2f);
  const Tensor* fa8v = ops::flash_attn(ctx, q, k16, k8, mask, 0.2f);
  EXPECT_EQ(rpc::minor_needed(*fa16), 3);
  EXPECT_EQ(rpc::minor_needed(*fa8), 4);
  EXPECT_EQ(rpc::minor_needed(*fa8v), 4);
  FakeWorker old_worker(rpc::kCapEvents | rpc::kCapOpSupport, {1}, 3);
  auto old_devices = make_rpc_devices(old_worker.endpoint);
  EXPECT_FALSE(old_devices[0]->supports_op(*fa8));
  EXPECT_FALSE(old_devices[0]->supports_op(*fa8v));
  EXPECT_FALSE(old_worker.got(rpc::Cmd::supports_op));
  EXPECT_TRUE(old_devices[0]->supports_op(*fa16));
  EXPECT_EQ(old_worker.count(rpc::Cmd::supports_op), 1u);
  FakeWorker new_worker(rpc::kCapEvents | rpc::kCapOpSupport, {1}, 4);
  auto new_devices = make_rpc_devices(new_worker.endpoint);
  EXPECT_TRUE(new_devices[0]->supports_op(*fa8));
  EXPECT_EQ(new_worker.count(rpc::Cmd::supports_op), 1u);
}

// 1.6 gave mul_mat_id an id_base (a slice of experts), which a 1.5 worker's
// constructor would drop: such a node is never sent to one, so an expert
// split refuses that worker rather than computing the wrong experts.
TEST(RpcOpSupport, A15WorkerIsNeverGivenAnExpertSlice) {
  Context ctx;
  Tensor* as = ctx.new_tensor(DType::f32, {32, 8, 2});
  Tensor* b = ctx.new_tensor(DType::f32, {32, 1, 3});
  Tensor* ids = ctx.new_tensor(DType::i32, {2, 3});
  const Tensor* whole = ops::mul_mat_id(ctx, as, b, ids);
  const Tensor* slice = ops::mul_mat_id(ctx, as, b, ids, 2);
  EXPECT_EQ(rpc::minor_needed(*whole), 0);
  EXPECT_EQ(rpc::minor_needed(*slice), 6);
  FakeWorker old_worker(rpc::kCapEvents | rpc::kCapOpSupport, {1}, 5);
  auto old_devices = make_rpc_devices(old_worker.endpoint);
  EXPECT_FALSE(old_devices[0]->supports_op(*slice));
  EXPECT_FALSE(old_worker.got(rpc::Cmd::supports_op));
  // Nor is it asked COMPUTE_STATS, which it would refuse by ending the session.
  EXPECT_FALSE(rpc_compute_stats(old_worker.endpoint, 0).has_value());
  EXPECT_FALSE(old_worker.got(rpc::Cmd::compute_stats));
}

// 1.9 added the mxfp4 dtype (an unknown dtype number to a 1.8 worker, which
// would end the session), op swiglu_oai and soft_max's sinks (which a 1.8
// worker's constructor refuses): none is asked of or sent to a 1.8 worker,
// the model's MXFP4 experts fall back to a device that runs them (here: the
// scheduler's error), and a 1.9 worker is asked. flash_attn with sinks uses
// a fifth source the wire does not carry: no worker is asked, and compute()
// refuses it by name.
TEST(RpcOpSupport, A18WorkerIsNeverSentMxfp4NorSinks) {
  Context ctx;
  Tensor* w4 = ctx.new_tensor(DType::mxfp4, {64, 8});
  Tensor* w8 = ctx.new_tensor(DType::q8_0, {64, 8});
  Tensor* x = ctx.new_tensor(DType::f32, {64, 3});
  Tensor* a = ctx.new_tensor(DType::f32, {8, 4, 2});
  const Tensor* mm4 = ops::mul_mat(ctx, w4, x);
  const Tensor* mm8 = ops::mul_mat(ctx, w8, x);
  const Tensor* rows4 = ops::get_rows(ctx, w4, ctx.new_tensor(DType::i32, {2}));
  const Tensor* sm = ops::soft_max(ctx, a, nullptr, 1.0f, ctx.new_tensor(DType::f32, {2}));
  const Tensor* plain_sm = ops::soft_max(ctx, a, nullptr, 1.0f);
  const Tensor* oai = ops::swiglu_oai(ctx, a, a, 1.702f, 7.0f);
  EXPECT_EQ(rpc::minor_needed(*mm4), 9);
  EXPECT_EQ(rpc::minor_needed(*rows4), 9);
  EXPECT_EQ(rpc::minor_needed(*mm8), 0);
  EXPECT_EQ(rpc::minor_needed(*sm), 9);
  EXPECT_EQ(rpc::minor_needed(*plain_sm), 0);
  EXPECT_EQ(rpc::minor_needed(*oai), 9);
  Tensor* q = ctx.new_tensor(DType::f32, {32, 1, 4});
  Tensor* k = ctx.new_tensor(DType::f16, {32, 1, 2});
  Tensor* mask = ctx.new_tensor(DType::f32, {1, 1});
  const Tensor* fa_sinks = ops::flash_attn(ctx, q, k, k, mask, 0.2f, 0.0f, ctx.new_tensor(DType::f32, {4}));
  EXPECT_EQ(rpc::minor_needed(*fa_sinks), rpc::kNoMinor);

  FakeWorker old_worker(rpc::kCapEvents | rpc::kCapOpSupport, {1}, 8);
  auto old_devices = make_rpc_devices(old_worker.endpoint);
  for (const Tensor* t : {mm4, rows4, sm, oai, fa_sinks}) EXPECT_FALSE(old_devices[0]->supports_op(*t)) << op_name(t->op);
  EXPECT_FALSE(old_worker.got(rpc::Cmd::supports_op)) << "a 1.8 worker was asked about a 1.9 node";
  EXPECT_TRUE(old_devices[0]->supports_op(*mm8));
  EXPECT_EQ(old_worker.count(rpc::Cmd::supports_op), 1u);
  // Nor does compute() send one (placed there by hand, past supports_op).
  for (Tensor* t : {const_cast<Tensor*>(mm4), const_cast<Tensor*>(fa_sinks)}) {
    Graph g;
    g.expand(t);
    try {
      old_devices[0]->create_backend()->compute(g);
      ADD_FAILURE() << op_name(t->op) << " was sent to a 1.8 worker";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::unsupported) << e.what();
      const char* why = t == fa_sinks ? "does not carry" : "this needs 1.9";
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(old_worker.got(rpc::Cmd::graph_compute));

  FakeWorker new_worker(rpc::kCapEvents | rpc::kCapOpSupport, {1}, 9);
  auto new_devices = make_rpc_devices(new_worker.endpoint);
  for (const Tensor* t : {mm4, rows4, sm, oai}) EXPECT_TRUE(new_devices[0]->supports_op(*t)) << op_name(t->op);
  EXPECT_EQ(new_worker.count(rpc::Cmd::supports_op), 4u);
  EXPECT_FALSE(new_devices[0]->supports_op(*fa_sinks));
  EXPECT_EQ(new_worker.count(rpc::Cmd::supports_op), 4u);
}

TEST(RpcOpSupport, OpsKnownAtEachMinor) {
  EXPECT_EQ(rpc::ops_known_at_minor(0), static_cast<int>(Op::transpose) + 1);
  EXPECT_EQ(rpc::ops_known_at_minor(1), static_cast<int>(Op::transpose) + 1);
  EXPECT_EQ(rpc::ops_known_at_minor(2), static_cast<int>(Op::rope_ext) + 1);
  EXPECT_EQ(rpc::ops_known_at_minor(3), static_cast<int>(Op::flash_attn) + 1);
  EXPECT_EQ(rpc::ops_known_at_minor(4), static_cast<int>(Op::flash_attn) + 1);
  EXPECT_EQ(rpc::ops_known_at_minor(6), static_cast<int>(Op::flash_attn) + 1);
  EXPECT_EQ(rpc::ops_known_at_minor(7), static_cast<int>(Op::routed_rows) + 1);
  EXPECT_EQ(rpc::ops_known_at_minor(8), static_cast<int>(Op::routed_rows) + 1);
  EXPECT_EQ(rpc::ops_known_at_minor(9), static_cast<int>(Op::swiglu_oai) + 1);
  EXPECT_EQ(rpc::ops_known_at_minor(rpc::kMinor), kOpCount);
  EXPECT_EQ(rpc::ops_known_at_minor(65535), kOpCount);
}

TEST(RpcOpSupport, AMalformedAnswerIsAnErrorNotAGuess) {
  for (const std::vector<uint8_t>& reply : {std::vector<uint8_t>{2}, std::vector<uint8_t>{}, std::vector<uint8_t>{1, 0}}) {
    FakeWorker fake(rpc::kCapEvents | rpc::kCapOpSupport, reply);
    auto devices = make_rpc_devices(fake.endpoint);
    Context ctx;
    Tensor* y = ops::silu(ctx, ctx.new_tensor(DType::f32, {8, 4}));
    try {
      devices[0]->supports_op(*y);
      ADD_FAILURE() << "a reply of " << reply.size() << " bytes was taken as an answer";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::disconnected) << e.what();
      EXPECT_NE(std::string(e.what()).find("SUPPORTS_OP"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fake.got(rpc::Cmd::supports_op));
  }
}

}  // namespace
}  // namespace weft
