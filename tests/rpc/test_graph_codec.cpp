// Graphs on the wire (docs/rpc-protocol.md section 4): a graph encoded,
// decoded against another set of buffers and computed gives the same bytes
// as the original; every kind of hostile graph is refused by name; no
// truncation crashes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "protocol/graph_codec.h"
#include "protocol/messages.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"
#include "wire_graph.h"

namespace weft::rpc {
namespace {

constexpr uint64_t kHandleA = 7;
constexpr uint64_t kHandleB = 1ull << 40;

// Hand-written tensor records in the field order of section 4 (wire_graph.h,
// written independently of the encoder, so both are checked against the spec).
using Rec = wtest::WT;

Rec packed(DType type, std::initializer_list<int64_t> ne, Op op = Op::none) {
  Tensor t;
  t.type = type;
  int i = 0;
  for (int64_t n : ne) t.ne[i++] = n;
  set_packed_strides(t);
  Rec r;
  r.dtype = static_cast<uint8_t>(type);
  r.op = static_cast<uint8_t>(op);
  for (int d = 0; d < 4; ++d) {
    r.ne[d] = t.ne[d];
    r.nb[d] = t.nb[d];
  }
  return r;
}

Rec leaf(DType type, std::initializer_list<int64_t> ne, uint64_t offset = 0, uint64_t handle = kHandleA) {
  Rec r = packed(type, ne);
  r.buffer = handle;
  r.offset = offset;
  return r;
}

Rec node(Op op, DType type, std::initializer_list<int64_t> ne, std::initializer_list<uint32_t> srcs,
         uint64_t offset = 0) {
  Rec r = packed(type, ne, op);
  int i = 0;
  for (uint32_t s : srcs) r.src[i++] = s + 1;
  r.buffer = kHandleA;
  r.offset = offset;
  return r;
}

std::vector<uint8_t> encode(const std::vector<Rec>& recs, const std::vector<uint32_t>& nodes) {
  return wtest::encode_wg(wtest::WG{recs, nodes});
}

class RpcGraphCodec : public ::testing::Test {
 protected:
  void SetUp() override {
    cpu_ = make_cpu_device(2);
    a_ = cpu_->default_buffer_type().allocate(64 << 10);
    b_ = cpu_->default_buffer_type().allocate(4096);
    a_->clear(0);
    b_->clear(0);
  }

  Buffer* buffer_of(uint64_t h) {
    if (h == kHandleA) return a_.get();
    if (h == kHandleB) return b_.get();
    return nullptr;
  }

  std::unique_ptr<DecodedGraph> decode(std::span<const uint8_t> bytes, bool supported = true) {
    Reader r(bytes, "GRAPH_COMPUTE");
    auto g = decode_graph(
        r, [this](uint64_t h) { return buffer_of(h); },
        [&](const Tensor& t) { return supported && cpu_->supports_op(t); });
    r.expect_end();
    return g;
  }

  // Expects decoding to fail with invalid_input, "[rpc graph]" and each part.
  void expect_rejected(const std::vector<Rec>& recs, const std::vector<uint32_t>& nodes,
                       std::initializer_list<const char*> parts, bool supported = true) {
    const auto bytes = encode(recs, nodes);
    try {
      decode(bytes, supported);
      ADD_FAILURE() << "accepted; expected an error mentioning " << *parts.begin();
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::invalid_input) << msg;
      EXPECT_EQ(msg.rfind("[rpc graph] ", 0), 0u) << msg;
      for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
    }
  }

  void expect_rejected_bytes(std::span<const uint8_t> bytes, std::initializer_list<const char*> parts) {
    try {
      decode(bytes);
      ADD_FAILURE() << "accepted; expected an error mentioning " << *parts.begin();
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::invalid_input) << msg;
      EXPECT_EQ(msg.rfind("[rpc graph] ", 0), 0u) << msg;
      for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
    }
  }

  std::unique_ptr<Device> cpu_;
  std::unique_ptr<Buffer> a_, b_;
};

// ------------------------------------------------------------ round trips

// A graph touching every op, placed in one local buffer; the worker side
// gets a second buffer with the same layout.
struct ModelGraph {
  Context ctx;
  Graph graph;
  std::vector<Tensor*> leafs;
};

void fill_leaf(Tensor& t, std::mt19937& rng, int64_t index_range) {
  const int64_t n = t.nelements();
  if (t.type == DType::i32) {
    auto* p = static_cast<int32_t*>(t.data);
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(rng() % static_cast<uint32_t>(index_range));
    return;
  }
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> f(static_cast<size_t>(n));
  for (float& v : f) v = dist(rng);
  from_f32(t.type, f.data(), t.data, n);
}

void build_model(ModelGraph& m) {
  Context& c = m.ctx;
  auto L = [&](DType type, std::initializer_list<int64_t> ne) {
    Tensor* t = c.new_tensor(type, ne);
    t->flags = kFlagInput;
    m.leafs.push_back(t);
    return t;
  };
  Tensor* x = L(DType::f32, {32, 6});
  Tensor* norm_w = L(DType::f32, {32});
  Tensor* wq = L(DType::q8_0, {32, 32});
  Tensor* wk = L(DType::f16, {32, 32});
  Tensor* wv = L(DType::bf16, {32, 32});
  Tensor* pos = L(DType::i32, {6});
  Tensor* mask = L(DType::f16, {6, 6});
  Tensor* w_up = L(DType::f32, {32, 64});
  Tensor* w_gate = L(DType::q4_0, {32, 64});
  Tensor* w_down = L(DType::f16, {64, 32});
  Tensor* divisor = L(DType::f32, {32, 1});
  Tensor* emb = L(DType::f16, {32, 10});
  Tensor* rows = L(DType::i32, {3, 1});
  Tensor* cache = L(DType::f16, {32, 8});
  Tensor* cache_rows = L(DType::i32, {3, 1});
  Tensor* dst = L(DType::bf16, {32, 6});
  Tensor* experts = L(DType::q8_0, {32, 16, 4});
  Tensor* ids = L(DType::i32, {2, 6});
  Tensor* factors = L(DType::f32, {4});  // rope_ext's, for n_dims 8

  Tensor* h = ops::mul(c, ops::rms_norm(c, x, 1e-5f), norm_w);
  Tensor* q = ops::rope(c, ops::reshape(c, ops::mul_mat(c, wq, h), {8, 4, 6}), pos, 8, RopeMode::normal, 10000.0f);
  Tensor* k = ops::rope(c, ops::reshape(c, ops::mul_mat(c, wk, h), {8, 4, 6}), pos, 4, RopeMode::neox, 500.0f);
  Tensor* v = ops::reshape(c, ops::mul_mat(c, wv, h), {8, 4, 6});
  Tensor* kq = ops::mul_mat(c, ops::permute(c, k, 0, 2, 1, 3), ops::permute(c, q, 0, 2, 1, 3));
  kq = ops::soft_max(c, kq, mask, 0.35f);
  Tensor* vt = ops::cont(c, ops::permute(c, v, 1, 2, 0, 3));
  Tensor* kqv = ops::mul_mat(c, vt, kq);
  Tensor* merged = ops::reshape(c, ops::cont(c, ops::permute(c, kqv, 0, 2, 1, 3)), {32, 6});
  Tensor* out1 = ops::add(c, x, merged);
  Tensor* act = ops::gelu(c, ops::swiglu(c, ops::mul_mat(c, w_gate, out1), ops::mul_mat(c, w_up, out1)));
  Tensor* out2 = ops::add(c, out1, ops::scale(c, ops::mul_mat(c, w_down, act), 0.5f));
  out2->flags = kFlagOutput;

  Tensor* n = ops::norm(c, out2, 1e-5f);
  Tensor* d = ops::div(c, ops::sub(c, ops::sqrt(c, ops::sqr(c, n)), n), ops::add(c, ops::sqr(c, divisor), divisor));
  Tensor* gr = ops::get_rows(c, emb, rows);
  Tensor* sr = ops::set_rows(c, cache, gr, cache_rows);
  Tensor* cached = ops::mul_mat(c, sr, out2);
  Tensor* copied = ops::cpy(c, out2, dst);
  Tensor* e = ops::mul(c, out2, copied);
  Tensor* joined = ops::concat(c, out2, e, 1);
  Tensor* moe = ops::mul_mat_id(c, experts, ops::reshape(c, out2, {32, 1, 6}), ids);
  Tensor* strided = ops::silu(c, ops::cont(c, ops::view_2d(c, out2, 16, 6, out2->nb[1], 16 * sizeof(float))));
  Tensor* tr = ops::cont(c, ops::transpose(c, out2));
  // The ops of protocol 1.2: rope_ext with and without factors, on a view.
  Tensor* q_heads = ops::reshape(c, ops::mul_mat(c, wq, h), {8, 4, 6});
  Tensor* q_ext = ops::rope_ext(c, q_heads, pos, factors, 8, RopeMode::normal, 500000.0f, {0.5f, 1.1f});
  Tensor* k_ext = ops::rope_ext(c, ops::view_3d(c, q_heads, 8, 2, 6, q_heads->nb[1], q_heads->nb[2], q_heads->nb[1]),
                                pos, nullptr, 4, RopeMode::neox, 10000.0f, {0.25f, 1.0f});
  Tensor* capped = ops::softcap(c, ops::gelu_erf(c, ops::sigmoid(c, out2)), 0.75f);
  for (Tensor* t : {out2, d, cached, joined, moe, strided, tr, ops::sum_rows(c, out2), ops::argmax(c, out2),
                    ops::argsort(c, out2, SortOrder::descending), ops::top_k(c, out2, 3), q_ext, k_ext, capped,
                    ops::soft_max(c, out2, nullptr, 1.0f)}) {
    m.graph.expand(t);
  }
}

struct Placed {
  std::unique_ptr<Buffer> local;
  std::map<const Tensor*, RemoteLocation> where;
};

// Places every tensor of g in one local buffer; locations name kHandleA.
Placed place(Device& cpu, const Graph& g) {
  std::vector<Tensor*> all(g.leafs().begin(), g.leafs().end());
  all.insert(all.end(), g.nodes().begin(), g.nodes().end());
  Placed p;
  p.local = allocate_tensors(cpu.default_buffer_type(), all);
  p.local->clear(0);
  for (Tensor* t : all) {
    if (t->view_src == nullptr) {
      p.where[t] = {kHandleA, static_cast<uint64_t>(static_cast<uint8_t*>(t->data) -
                                                    static_cast<uint8_t*>(p.local->base()))};
    }
  }
  return p;
}

TEST_F(RpcGraphCodec, ModelGraphComputesTheSameBytesAfterDecoding) {
  ModelGraph m;
  build_model(m);
  Placed p = place(*cpu_, m.graph);
  ASSERT_LE(p.local->size(), a_->size());
  std::mt19937 rng(42);
  for (Tensor* t : m.leafs) fill_leaf(*t, rng, 3);  // indices < 3 fit every index operand
  std::memcpy(a_->base(), p.local->base(), p.local->size());

  Writer w;
  encode_graph(w, m.graph, [&](const Tensor& t) { return p.where.at(&t); });
  auto decoded = decode(w.data());
  // Every view here is read by a node, so all come back (just before their
  // first reader); the computing nodes keep their order.
  ASSERT_EQ(decoded->graph.nodes().size(), m.graph.nodes().size());
  ASSERT_EQ(decoded->graph.leafs().size(), m.graph.leafs().size());
  std::vector<const Tensor*> want_computing, got_computing;
  for (const Tensor* t : m.graph.nodes()) {
    if (!op_is_view(t->op)) want_computing.push_back(t);
  }
  for (const Tensor* t : decoded->graph.nodes()) {
    if (!op_is_view(t->op)) got_computing.push_back(t);
  }
  ASSERT_EQ(got_computing.size(), want_computing.size());
  for (size_t i = 0; i < want_computing.size(); ++i) {
    const Tensor& want = *want_computing[i];
    const Tensor& got = *got_computing[i];
    EXPECT_EQ(got.op, want.op) << i;
    EXPECT_EQ(got.flags, want.flags) << i;
    EXPECT_EQ(got.buffer, a_.get()) << i;
    EXPECT_EQ(static_cast<uint8_t*>(got.data) - static_cast<uint8_t*>(a_->base()),
              static_cast<uint8_t*>(want.data) - static_cast<uint8_t*>(p.local->base()))
        << i;
  }

  auto backend = cpu_->create_backend();
  backend->compute(m.graph);
  backend->compute(decoded->graph);
  backend->synchronize();
  EXPECT_EQ(std::memcmp(a_->base(), p.local->base(), p.local->size()), 0);
  // And the computation did something: the output is not all zeros.
  const Tensor* out = m.graph.nodes().back();
  std::vector<uint8_t> zeros(out->nbytes(), 0);
  EXPECT_NE(std::memcmp(out->data, zeros.data(), zeros.size()), 0);
}

// A graph built with append() (as the scheduler builds a split) reads
// tensors it does not contain: they go as leafs, or as plain views of their
// root, and are not computed on the worker.
TEST_F(RpcGraphCodec, TensorsOutsideTheGraphAreSentAsLeafsAndRootViews) {
  Context c;
  Tensor* w = c.new_tensor(DType::f32, {8, 8});
  Tensor* x = c.new_tensor(DType::f32, {8, 4});
  Tensor* mm = ops::mul_mat(c, w, x);                 // computed earlier, elsewhere
  Tensor* t = ops::transpose(c, mm);                   // a view outside the graph
  Tensor* y = ops::add(c, ops::cont(c, t), ops::cont(c, t));
  Graph full;
  full.expand(y);
  Placed p = place(*cpu_, full);
  std::mt19937 rng(1);
  fill_leaf(*w, rng, 1);
  fill_leaf(*x, rng, 1);
  auto backend = cpu_->create_backend();
  backend->compute(full);
  std::memcpy(a_->base(), p.local->base(), p.local->size());
  std::memset(static_cast<uint8_t*>(a_->base()) + p.where.at(y).offset, 0, y->nbytes());

  Graph split;  // the last add and one cont only; the other cont's data is present
  split.append(y->src[0]);
  split.append(y);
  Writer enc;
  encode_graph(enc, split, [&](const Tensor& u) { return p.where.at(&u); });
  Reader peek(enc.data(), "peek");
  EXPECT_EQ(peek.u32(), 5u);  // mm (leaf), t (view of mm), the first cont, the second cont (leaf), y
  auto decoded = decode(enc.data());
  EXPECT_EQ(decoded->graph.nodes().size(), 3u);  // the view t, cont, add
  EXPECT_EQ(decoded->graph.nodes()[0]->op, Op::view);
  EXPECT_EQ(decoded->graph.leafs().size(), 2u);  // mm and the second cont, as data
  backend->compute(decoded->graph);
  EXPECT_EQ(std::memcmp(static_cast<uint8_t*>(a_->base()) + p.where.at(y).offset, y->data, y->nbytes()), 0);
}

// The scheduler leaves views over memory the worker lacks in a split's
// graph when no node of the split reads them: they are not sent.
TEST_F(RpcGraphCodec, UnreadViewsAreNotSent) {
  Context c;
  Tensor* elsewhere = c.new_tensor(DType::f32, {4, 4});
  Tensor* x = c.new_tensor(DType::f32, {4});
  Graph g;
  g.append(ops::transpose(c, elsewhere));
  g.append(ops::silu(c, x));
  Writer w;
  encode_graph(w, g, [&](const Tensor& t) {
    EXPECT_NE(&t, elsewhere);
    return RemoteLocation{kHandleA, 0};
  });
  Reader r(w.data(), "peek");
  EXPECT_EQ(r.u32(), 2u);  // x and the silu
  auto d = decode(w.data());
  ASSERT_EQ(d->graph.nodes().size(), 1u);
  EXPECT_EQ(d->graph.nodes()[0]->op, Op::silu);
}

TEST_F(RpcGraphCodec, EncoderRefusesTensorsWithoutRemoteMemory) {
  Context c;
  Tensor* x = c.new_tensor(DType::f32, {4});
  Graph g;
  g.expand(ops::silu(c, x));
  Writer w;
  try {
    encode_graph(w, g, [](const Tensor&) { return RemoteLocation{}; });
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no memory on the worker"), std::string::npos) << e.what();
  }
}

TEST_F(RpcGraphCodec, EveryTruncationIsRejectedCleanly) {
  ModelGraph m;
  build_model(m);
  Placed p = place(*cpu_, m.graph);
  Writer w;
  encode_graph(w, m.graph, [&](const Tensor& t) { return p.where.at(&t); });
  const std::vector<uint8_t>& bytes = w.data();
  for (size_t len = 0; len < bytes.size(); ++len) {
    Reader r(std::span<const uint8_t>(bytes.data(), len), "GRAPH_COMPUTE");
    try {
      decode_graph(r, [this](uint64_t h) { return buffer_of(h); }, [](const Tensor&) { return true; });
      ADD_FAILURE() << "a graph cut at byte " << len << " of " << bytes.size() << " was accepted";
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), ErrorKind::invalid_input) << e.what();
      ASSERT_EQ(std::string(e.what()).rfind("[rpc graph] ", 0), 0u) << e.what();
    }
  }
}

// A long chain: the encoder walks it without recursion, and a graph that
// fills most of a 16 MiB payload decodes quickly.
TEST_F(RpcGraphCodec, LongChainsRoundTrip) {
  Context c;
  Tensor* x = c.new_tensor(DType::f32, {4});
  Tensor* y = x;
  const int n = 90000;  // 90001 tensors of 176 bytes: about 15.1 MiB
  for (int i = 0; i < n; ++i) y = ops::scale(c, y, 1.0f);
  Graph g;
  g.expand(y);
  auto big = cpu_->default_buffer_type().allocate(size_t{16} * (n + 1));
  std::map<const Tensor*, RemoteLocation> where;
  uint64_t offset = 0;
  for (const Tensor& t : c.tensors()) {
    where[&t] = {kHandleB, offset};
    offset += 16;
  }
  Writer w;
  encode_graph(w, g, [&](const Tensor& t) { return where.at(&t); });
  EXPECT_LT(w.data().size(), size_t{kMaxPayload});
  Reader r(w.data(), "GRAPH_COMPUTE");
  auto d = decode_graph(r, [&](uint64_t h) { return h == kHandleB ? big.get() : nullptr; },
                        [](const Tensor&) { return true; });
  r.expect_end();
  EXPECT_EQ(d->graph.nodes().size(), static_cast<size_t>(n));
  EXPECT_EQ(d->graph.nodes().back()->data, static_cast<uint8_t*>(big->base()) + 16 * n);
}

// ------------------------------------------------------------ hostile graphs

TEST_F(RpcGraphCodec, AValidHandWrittenGraphDecodes) {
  std::vector<Rec> g = {leaf(DType::f32, {4, 2}), leaf(DType::f32, {4}, 64),
                        node(Op::add, DType::f32, {4, 2}, {0, 1}, 128)};
  auto d = decode(encode(g, {2}));
  ASSERT_EQ(d->graph.nodes().size(), 1u);
  EXPECT_EQ(d->graph.nodes()[0]->data, static_cast<uint8_t*>(a_->base()) + 128);
}

TEST_F(RpcGraphCodec, RejectsReferencesThatAreNotEarlier) {
  std::vector<Rec> g = {leaf(DType::f32, {4}), node(Op::silu, DType::f32, {4}, {2}, 64),
                        leaf(DType::f32, {4}, 128)};
  expect_rejected(g, {1}, {"tensor 1", "src[0]", "tensor 2", "not an earlier"});  // forward
  g[1].src[0] = 2;  // itself
  expect_rejected(g, {1}, {"tensor 1", "src[0]", "tensor 1", "not an earlier"});
  g[1].src[0] = 1;
  g[1].view_src = 3;
  expect_rejected(g, {1}, {"tensor 1", "view_src"});
  g[1].view_src = 0;
  g[1].src[3] = 0xFFFFFFFF;
  expect_rejected(g, {1}, {"tensor 1", "src[3]", "4294967294"});
}

TEST_F(RpcGraphCodec, RejectsUnknownValues) {
  std::vector<Rec> g = {leaf(DType::f32, {4})};
  static_assert(kDTypeCount == 17);
  g[0].dtype = kDTypeCount;
  expect_rejected(g, {}, {"tensor 0", "dtype 17 is unknown"});
  g = {leaf(DType::f32, {4}), node(Op::silu, DType::f32, {4}, {0}, 64)};
  g[1].op = 200;
  expect_rejected(g, {1}, {"tensor 1", "op 200 is unknown"});
  g[1].op = kOpCount;
  const std::string unknown = "op " + std::to_string(kOpCount) + " is unknown";
  expect_rejected(g, {1}, {unknown.c_str()});
  g[1].op = static_cast<uint8_t>(Op::silu);
  g[1].flags = 8;
  expect_rejected(g, {1}, {"tensor 1", "flags"});
  g[1].flags = 0;
  g[0].ne[1] = -1;
  expect_rejected(g, {1}, {"tensor 0", "ne[1] is negative"});
}

TEST_F(RpcGraphCodec, RejectsShapesTheOpWouldRefuse) {
  // mul_mat with a wrong inner dimension.
  std::vector<Rec> g = {leaf(DType::f32, {8, 3}), leaf(DType::f32, {4, 2}, 256),
                        node(Op::mul_mat, DType::f32, {3, 2}, {0, 1}, 512)};
  expect_rejected(g, {2}, {"tensor 2", "mul_mat", "inner dimensions differ"});
  // add broadcasting the wrong way.
  g = {leaf(DType::f32, {4, 3}), leaf(DType::f32, {4, 2}, 256), node(Op::add, DType::f32, {4, 3}, {0, 1}, 512)};
  expect_rejected(g, {2}, {"tensor 2", "[add]", "cannot broadcast"});
  // rope with an odd n_dims.
  g = {leaf(DType::f32, {8, 2, 3}), leaf(DType::i32, {3}, 256), node(Op::rope, DType::f32, {8, 2, 3}, {0, 1}, 512)};
  g[2].op_params[0] = 3;
  float base = 10000.0f;
  std::memcpy(&g[2].op_params[2], &base, 4);
  expect_rejected(g, {2}, {"tensor 2", "[rope]", "n_dims 3"});
  g[2].op_params[0] = 4;
  decode(encode(g, {2}));  // and the fixed one is fine
  // rope_ext: a bad scaling parameter, factors of the wrong length; then fixed.
  g = {leaf(DType::f32, {8, 2, 3}), leaf(DType::i32, {3}, 256), leaf(DType::f32, {3}, 320),
       node(Op::rope_ext, DType::f32, {8, 2, 3}, {0, 1, 2}, 512)};
  g[3].op_params[0] = 4;
  const float ext[] = {10000.0f, 1.0f, INFINITY};  // freq_base, freq_scale, attn_factor
  std::memcpy(&g[3].op_params[2], ext, sizeof ext);
  expect_rejected(g, {3}, {"tensor 3", "[rope_ext]", "attn_factor must be finite and > 0, got inf"});
  g[3].op_params[4] = g[3].op_params[3];
  expect_rejected(g, {3}, {"tensor 3", "[rope_ext]", "freq_factors f32[3,1,1,1]", "[2]"});
  g[2] = leaf(DType::f32, {2}, 320);
  decode(encode(g, {3}));
  // softcap with a cap of 0.
  g = {leaf(DType::f32, {4}), node(Op::softcap, DType::f32, {4}, {0}, 64)};
  expect_rejected(g, {1}, {"tensor 1", "[softcap]", "cap must be finite and > 0, got 0"});
  // a missing operand
  g = {leaf(DType::f32, {4}), node(Op::add, DType::f32, {4}, {0}, 64)};
  expect_rejected(g, {1}, {"tensor 1", "missing operand b"});
}

TEST_F(RpcGraphCodec, RejectsResultsThatContradictTheOp) {
  std::vector<Rec> g = {leaf(DType::f32, {4, 2}), leaf(DType::f32, {4}, 64),
                        node(Op::add, DType::f32, {4, 2}, {0, 1}, 128)};
  g[2].ne[1] = 3;
  expect_rejected(g, {2}, {"tensor 2", "ne[1] is 3"});
  g[2].ne[1] = 2;
  g[2].dtype = static_cast<uint8_t>(DType::f16);
  expect_rejected(g, {2}, {"tensor 2", "dtype is f16"});
  g[2].dtype = 0;
  g[2].nb[1] = 32;
  expect_rejected(g, {2}, {"tensor 2", "nb[1] is 32"});
  g[2].nb[1] = 16;
  g[2].src[2] = 1;  // an operand add does not take
  expect_rejected(g, {2}, {"tensor 2", "src[2]"});
  g[2].src[2] = 0;
  g[2].view_src = 1;
  expect_rejected(g, {2}, {"tensor 2", "view_src"});
  g[2].view_src = 0;
  g[2].view_offs = 4;
  expect_rejected(g, {2}, {"tensor 2", "view_offs"});
  g[2].view_offs = 0;
  g[2].op_params[3] = 7;  // a parameter add does not read (a newer peer's meaning)
  expect_rejected(g, {2}, {"tensor 2", "op_params[3] is 7", "the op gives 0"});
}

// mul_mat_id's id_base (1.6) survives the round trip, and the decoded node
// reads it: ids outside the slice give zeros.
TEST_F(RpcGraphCodec, MulMatIdKeepsItsIdBase) {
  std::vector<Rec> g = {leaf(DType::f32, {4, 3, 2}), leaf(DType::f32, {4, 1, 2}, 128), leaf(DType::i32, {2, 2}, 192),
                        node(Op::mul_mat_id, DType::f32, {3, 2, 2}, {0, 1, 2}, 256)};
  g[3].op_params[0] = 5;
  auto d = decode(encode(g, {3}));
  ASSERT_EQ(d->graph.nodes().size(), 1u);
  EXPECT_EQ(d->graph.nodes()[0]->op_params[0], 5);
  g[3].op_params[1] = 1;
  expect_rejected(g, {3}, {"tensor 3", "op_params[1] is 1"});
}

TEST_F(RpcGraphCodec, RejectsViewsReachingOutsideTheirSource) {
  Rec v = packed(DType::f32, {4, 2}, Op::view);
  v.src[0] = 1;
  v.view_src = 1;
  std::vector<Rec> g = {leaf(DType::f32, {4, 2}), v};
  decode(encode(g, {1}));  // the whole of it is fine
  g[1].view_offs = 4;
  expect_rejected(g, {1}, {"tensor 1", "[view]", "exceeds"});
  g[1].view_offs = 0;
  g[1].nb[1] = 1ull << 62;
  expect_rejected(g, {1}, {"tensor 1", "[view]"});
  g[1].nb[1] = 16;
  g[1].view_offs = UINT64_MAX - 3;
  expect_rejected(g, {1}, {"tensor 1", "[view]", "outside"});
  // A view of a view: view_offs is relative to the root and may not point
  // before its source's start.
  Rec inner = packed(DType::f32, {2}, Op::view);
  inner.src[0] = 2;
  inner.view_src = 1;
  g[1].ne[0] = 2;
  g[1].ne[1] = 1;
  g[1].nb[1] = 8;
  g[1].nb[2] = g[1].nb[3] = 8;
  g[1].view_offs = 16;
  inner.view_offs = 8;
  g.push_back(inner);
  expect_rejected(g, {2}, {"tensor 2", "before its source"});
  g[2].view_offs = 24;
  decode(encode(g, {2}));
  g[2].view_offs = 28;
  expect_rejected(g, {2}, {"tensor 2", "exceeds"});
  // And a view must not claim memory of its own.
  g[2].view_offs = 24;
  g[2].buffer = kHandleA;
  expect_rejected(g, {2}, {"tensor 2", "buffer", "aliases"});
}

TEST_F(RpcGraphCodec, RejectsLeafsOutsideTheirBuffer) {
  const uint64_t size = 64 << 10;
  expect_rejected({leaf(DType::f32, {4}, size - 8)}, {}, {"tensor 0", "offset", "outside buffer 7"});
  expect_rejected({leaf(DType::f32, {4}, UINT64_MAX - 8)}, {}, {"tensor 0", "outside buffer"});
  expect_rejected({leaf(DType::f32, {4}, UINT64_MAX)}, {}, {"tensor 0", "outside buffer"});
  decode(encode({leaf(DType::f32, {4}, size - 16)}, {}));  // the last 16 bytes are fine
  decode(encode({leaf(DType::f32, {1024}, 0, kHandleB)}, {}));
  expect_rejected({leaf(DType::f32, {1025}, 0, kHandleB)}, {}, {"tensor 0", "outside buffer"});
  expect_rejected({leaf(DType::f32, {4}, 0, 3)}, {}, {"tensor 0", "buffer 3 is not a live buffer"});
  expect_rejected({leaf(DType::f32, {4}, 0, 0)}, {}, {"tensor 0", "buffer is 0"});
  // Sizes that overflow when multiplied out are refused before any range math.
  expect_rejected({leaf(DType::f32, {1ll << 40, 1ll << 40})}, {}, {"tensor 0", "more than 2^32 elements"});
  expect_rejected({leaf(DType::f32, {0, 1ll << 40, 1ll << 40})}, {}, {"tensor 0", "more than 2^32 elements"});
  // A zero-stride view spans few bytes but too many elements to count.
  Rec wide = packed(DType::f32, {1ll << 40, 1ll << 40}, Op::view);
  wide.nb[0] = wide.nb[1] = wide.nb[2] = wide.nb[3] = 0;
  wide.src[0] = wide.view_src = 1;
  expect_rejected({leaf(DType::f32, {4}), wide}, {}, {"tensor 1", "more than 2^32 elements"});
  // A computed tensor must fit its buffer too.
  expect_rejected({leaf(DType::f32, {4}), node(Op::silu, DType::f32, {4}, {0}, size - 4)}, {1},
                  {"tensor 1", "outside buffer"});
}

TEST_F(RpcGraphCodec, RejectsMisalignedData) {
  expect_rejected({leaf(DType::f32, {4}, 2)}, {}, {"tensor 0", "byte 2", "aligned to 4"});
  expect_rejected({leaf(DType::f16, {4}, 1)}, {}, {"tensor 0", "aligned to 2"});
  expect_rejected({leaf(DType::q8_0, {32}, 3)}, {}, {"tensor 0", "aligned to 2"});
  decode(encode({leaf(DType::f16, {4}, 2), leaf(DType::q4_0, {32}, 34)}, {}));
  // mxfp4 blocks are 17 bytes led by a scale byte: odd addresses and rows
  // of an odd number of blocks (nb[1] = 17) are its normal layout.
  decode(encode({leaf(DType::mxfp4, {32, 3}, 3)}, {}));
  Rec v = packed(DType::f32, {2, 2}, Op::view);
  v.src[0] = v.view_src = 1;
  v.nb[1] = 6;
  expect_rejected({leaf(DType::f32, {8}), v}, {}, {"tensor 1", "nb[1] 6 is not a multiple of 4"});
  v.nb[1] = 8;
  v.view_offs = 2;
  expect_rejected({leaf(DType::f32, {8}), v}, {}, {"tensor 1", "byte 2", "aligned to 4"});
  v.view_offs = 4;
  decode(encode({leaf(DType::f32, {8}), v}, {}));
}

TEST_F(RpcGraphCodec, RejectsLeafsThatAreNotPlain) {
  std::vector<Rec> g = {leaf(DType::f32, {4, 2})};
  g[0].nb[1] = 32;
  expect_rejected(g, {}, {"tensor 0", "nb[1] is 32", "packed"});
  g = {leaf(DType::f32, {4}), leaf(DType::f32, {4}, 64)};
  g[1].src[0] = 1;
  expect_rejected(g, {}, {"tensor 1", "src[0] is set on a leaf"});
  g[1].src[0] = 0;
  g[1].view_src = 1;
  expect_rejected(g, {}, {"tensor 1", "view_src"});
  g = {leaf(DType::q8_0, {33})};
  expect_rejected(g, {}, {"tensor 0", "block"});
}

TEST_F(RpcGraphCodec, RejectsBadCounts) {
  Writer huge;
  huge.u32(0xFFFFFFFF);
  expect_rejected_bytes(huge.data(), {"n_tensors 4294967295", "cap of 262144"});
  Writer capped;
  capped.u32(kMaxGraphTensors + 1);
  expect_rejected_bytes(capped.data(), {"n_tensors 262145", "cap"});
  Writer short_of_bytes;  // under the cap, but the payload cannot hold them
  short_of_bytes.u32(1000);
  short_of_bytes.bytes(std::vector<uint8_t>(500, 0).data(), 500);
  expect_rejected_bytes(short_of_bytes.data(), {"n_tensors 1000", "500 left"});
  expect_rejected_bytes({}, {"n_tensors", "truncated"});
  auto bytes = encode({leaf(DType::f32, {4})}, {});
  bytes[bytes.size() - 4] = 2;  // n_nodes 2 of 1 tensor
  expect_rejected_bytes(bytes, {"n_nodes 2 is more than n_tensors 1"});
  EXPECT_EQ(decode(encode({}, {}))->graph.nodes().size(), 0u);  // empty is fine
}

TEST_F(RpcGraphCodec, RejectsBadNodeLists) {
  std::vector<Rec> g = {leaf(DType::f32, {4}), node(Op::silu, DType::f32, {4}, {0}, 64),
                        node(Op::sqr, DType::f32, {4}, {1}, 128)};
  expect_rejected(g, {1, 3}, {"node 1", "index 3 is out of range"});
  expect_rejected(g, {0}, {"node 0", "tensor 0 is a leaf"});
  expect_rejected(g, {1, 1}, {"node 1", "listed twice"});
  expect_rejected(g, {2, 1}, {"node 0", "reads tensor 1", "listed later"});
  expect_rejected(g, {1, 2}, {"node 0", "not supported"}, false);
  decode(encode(g, {1, 2}));
  decode(encode(g, {2}));  // tensor 1 is data computed earlier
}

}  // namespace
}  // namespace weft::rpc

// ------------------------------------------------------------ fuzz seeds

namespace weft::rpc {
namespace {

// Writes tests/rpc/fuzz_corpus (the seeds of fuzz_decode.cpp: one selector
// byte, the low byte of the command code, then a valid payload). Run by hand
// (one line):
//   WEFT_FUZZ_SEED_DIR=tests/rpc/fuzz_corpus weft_tests --gtest_also_run_disabled_tests
//       --gtest_filter=RpcFuzzSeeds.*
TEST(RpcFuzzSeeds, DISABLED_Write) {
  const char* dir = std::getenv("WEFT_FUZZ_SEED_DIR");
  ASSERT_NE(dir, nullptr) << "set WEFT_FUZZ_SEED_DIR";
  auto save = [&](const char* name, uint8_t selector, const Writer& w) {  // w: a message of messages.h
    std::vector<uint8_t> bytes{selector};
    bytes.insert(bytes.end(), w.data().begin(), w.data().end());
    FILE* f = std::fopen((std::string(dir) + "/" + name).c_str(), "wb");
    ASSERT_NE(f, nullptr) << name;
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  };
  {
    HelloRequest hello;
    hello.capabilities = kCapTensorCache | kCapEvents;
    save("hello", 0x01, encoded(hello));
  }
  save("alloc_buffer", 0x11, encoded(AllocBufferRequest{0, 4096}));
  {
    const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    save("set_tensor", 0x20, encoded(SetTensorRequest{1, 16, 8, data}));
  }
  {
    GetDevicesReply devices;
    devices.devices.push_back(DeviceInfo{"CPU", "host CPU, 16 threads", 0, 1ull << 34, 1ull << 35, "CPU", 64, UINT64_MAX});
    save("get_devices_reply", 0x90, encoded(devices));
  }
  save("error", 0xFF, encoded(ErrorReply{ErrorKind::invalid_input, "[GRAPH_COMPUTE] tensor 3: op 99 is unknown"}));
  {
    const uint8_t rows[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    save("set_tensor_rows", 0x25, encoded(SetTensorRowsRequest{1, 0, 8, 5, {1, 3}, rows}));
    Writer reply;  // the request's row_bytes and n_rows, then the reply
    reply.u64(8);
    reply.u32(5);
    GetTensorRowsReply{{0, 4}, rows}.encode(reply);
    save("get_tensor_rows_reply", 0xA6, reply);
  }
  {
    Context c;
    Tensor* mm = ops::mul_mat(c, c.new_tensor(DType::f32, {16, 8}), c.new_tensor(DType::f32, {16, 4}));
    save("supports_op", 0x14, encoded(SupportsOpRequest::of(0, *mm)));
  }
  // Graphs over the fuzzer's two 4 KiB buffers (handles 1 and 2).
  auto cpu = make_cpu_device(1);
  std::unique_ptr<Buffer> bufs[2] = {cpu->default_buffer_type().allocate(4096),
                                     cpu->default_buffer_type().allocate(4096)};
  bufs[0]->clear(0);
  bufs[1]->clear(0);
  auto save_graph = [&](const char* name, const std::vector<Tensor*>& outputs) {
    Graph g;
    for (Tensor* t : outputs) g.expand(t);
    std::map<const Tensor*, RemoteLocation> where;
    uint64_t used[2] = {0, 0};
    auto place_one = [&](const Tensor* t) {
      if (t->view_src != nullptr || where.count(t)) return;
      const int b = used[0] + t->nbytes() <= 4096 ? 0 : 1;
      where[t] = {static_cast<uint64_t>(b + 1), used[b]};
      used[b] += (t->nbytes() + 63) / 64 * 64;
      ASSERT_LE(used[b], 4096u) << name;
    };
    for (Tensor* t : g.leafs()) place_one(t);
    for (Tensor* t : g.nodes()) place_one(t);
    Writer w;
    GraphComputeRequest{0, 42, true, {}}.encode_head(w);  // device 0, graph 42, then the graph
    encode_graph(w, g, [&](const Tensor& t) { return where.at(&t); });
    save(name, 0x30, w);
    // The seed must decode and run, or the fuzzer starts shallow.
    Reader r(std::span<const uint8_t>(w.data()).subspan(GraphComputeRequest::kHeadBytes), "seed");
    auto decoded = decode_graph(r, [&](uint64_t h) { return h == 1 || h == 2 ? bufs[h - 1].get() : nullptr; },
                                [&](const Tensor& t) { return cpu->supports_op(t); });
    r.expect_end();
    cpu->create_backend()->compute(decoded->graph);
  };
  {
    Context c;
    Tensor* a = c.new_tensor(DType::f32, {8, 4});
    Tensor* b = c.new_tensor(DType::f32, {8});
    save_graph("graph_add", {ops::add(c, a, b)});
  }
  {
    Context c;
    Tensor* x = c.new_tensor(DType::f32, {16, 3});
    Tensor* wq = c.new_tensor(DType::q8_0, {32, 16});  // unused by the attention, used by get_rows
    Tensor* wk = c.new_tensor(DType::f16, {16, 16});
    Tensor* pos = c.new_tensor(DType::i32, {3});
    Tensor* k = ops::rope(c, ops::reshape(c, ops::mul_mat(c, wk, ops::rms_norm(c, x, 1e-5f)), {4, 4, 3}), pos, 4,
                          RopeMode::neox, 10000.0f);
    Tensor* kp = ops::permute(c, k, 0, 2, 1, 3);
    Tensor* kq = ops::soft_max(c, ops::mul_mat(c, kp, kp), nullptr, 0.5f);
    Tensor* idx = c.new_tensor(DType::i32, {2, 1});
    Tensor* rows = ops::get_rows(c, wq, idx);
    save_graph("graph_attention", {kq, ops::top_k(c, ops::cont(c, ops::transpose(c, kq)), 2), rows});
  }
  {
    Context c;
    Tensor* cache = c.new_tensor(DType::f16, {16, 4});
    Tensor* src = c.new_tensor(DType::f32, {16, 2});
    Tensor* idx = c.new_tensor(DType::i32, {2, 1});
    Tensor* sr = ops::set_rows(c, cache, src, idx);
    Tensor* dst = c.new_tensor(DType::bf16, {16, 2});
    Tensor* cp = ops::cpy(c, src, dst);
    Tensor* joined = ops::concat(c, ops::cont(c, sr), ops::view_2d(c, sr, 16, 2, sr->nb[1], 0), 1);
    save_graph("graph_rows", {joined, ops::mul(c, ops::sub(c, src, cp), cp), ops::argsort(c, src, SortOrder::ascending)});
  }
  {  // an expert slice: the rows routed to experts [1, 3) of 4, and their products
    Context c;
    Tensor* x = c.new_tensor(DType::f32, {32, 3});
    Tensor* ids = c.new_tensor(DType::i32, {2, 3});
    Tensor* as = c.new_tensor(DType::q8_0, {32, 4, 2});
    Tensor* routed = ops::routed_rows(c, x, ids, 1, 2);
    save_graph("graph_experts", {ops::mul_mat_id(c, as, ops::reshape(c, routed, {32, 1, 3}), ids, 1)});
  }
}

}  // namespace
}  // namespace weft::rpc
