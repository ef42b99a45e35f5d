// Hostile and malformed messages against an in-process worker. Each case
// runs on a fresh connection and must get an ERROR (then a closed
// connection), or a quiet close where no reply is possible. Meanwhile a
// well-behaved client, connected before every attack, uploads its inputs
// before the attack and must still compute correct results after it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "weft/backend/cpu.h"
#include "weft/rpc/worker.h"
#include "wire_graph.h"
#include "worker_wire.h"

namespace weft::rpc::wtest {
namespace {

// A CPU device whose backends fail (Error internal) on any graph with a
// sqrt node: a kernel error that is not the client's fault.
class FailingBackend final : public Backend {
 public:
  FailingBackend(Device& device, std::unique_ptr<Backend> inner) : device_(device), inner_(std::move(inner)) {}
  std::string name() const override { return "failing"; }
  Device& device() override { return device_; }
  void compute(const Graph& g) override {
    for (Tensor* t : g.nodes()) {
      if (t->op == Op::sqrt) fail(ErrorKind::internal, "test kernel", "injected failure");
    }
    inner_->compute(g);
  }
  void synchronize() override { inner_->synchronize(); }

 private:
  Device& device_;
  std::unique_ptr<Backend> inner_;
};

class FailingDevice final : public Device {
 public:
  FailingDevice() : inner_(make_cpu_device(1)) {}
  std::string name() const override { return "failing"; }
  std::string description() const override { return "CPU that fails on sqrt"; }
  DeviceKind kind() const override { return DeviceKind::cpu; }
  MemoryInfo memory() const override { return inner_->memory(); }
  BufferType& default_buffer_type() override { return inner_->default_buffer_type(); }
  bool supports_op(const Tensor& t) const override { return inner_->supports_op(t); }
  bool supports_buffer_type(const BufferType& bt) const override { return inner_->supports_buffer_type(bt); }
  std::unique_ptr<Backend> create_backend(const BackendOptions& o) override {
    return std::make_unique<FailingBackend>(*this, inner_->create_backend(o));
  }

 private:
  std::unique_ptr<Device> inner_;
};

constexpr size_t kBudget = size_t{64} << 20;
constexpr uint32_t kFailingDevice = 2;
const std::string kSecret = "correct horse battery staple";

struct Env {
  Env() : cpu0(make_cpu_device(1)), cpu1(make_cpu_device(1)) {
    WorkerOptions o;
    o.log = std::getenv("WEFT_WORKER_TEST_LOG") != nullptr;  // to see why each attack was refused
    o.memory_budget = kBudget;
    worker = std::make_unique<Worker>(std::vector<Device*>{cpu0.get(), cpu1.get(), &failing}, o);
    worker->start();
    WorkerOptions a;
    a.log = o.log;
    a.auth_secret = kSecret;
    auth_worker = std::make_unique<Worker>(std::vector<Device*>{cpu0.get()}, a);
    auth_worker->start();
    good = std::make_unique<GoodClient>(worker->port(), 0, 7);
    good->round();
  }
  ~Env() {
    good.reset();
    worker->stop();
    auth_worker->stop();
  }
  uint16_t port() const { return worker->port(); }
  std::unique_ptr<Conn> fresh() {
    auto c = std::make_unique<Conn>(port());
    c->handshake();
    return c;
  }

  std::unique_ptr<Device> cpu0, cpu1;
  FailingDevice failing;
  std::unique_ptr<Worker> worker, auth_worker;
  std::unique_ptr<GoodClient> good;
};

Env* env = nullptr;

// --- graphs written field by field (wire_graph.h), to be broken on purpose ---

// t0, t1: f32 [8, 4] leafs at 0 and 128; t2 = add(t0, t1) at 256.
WG base_graph(uint64_t handle) {
  WG g;
  g.t.push_back(packed_f32(8, 4, handle, 0));
  g.t.push_back(packed_f32(8, 4, handle, 128));
  WT sum = packed_f32(8, 4, handle, 256);
  sum.op = static_cast<uint8_t>(Op::add);
  sum.src[0] = 1;
  sum.src[1] = 2;
  g.t.push_back(sum);
  g.nodes = {2};
  return g;
}

// A fresh session with a 1 KiB buffer sends base_graph changed by mutate.
void attack_graph(const std::function<void(WG&, uint64_t handle)>& mutate) {
  auto c = env->fresh();
  const uint64_t h = c->alloc(0, 1024);
  WG g = base_graph(h);
  mutate(g, h);
  const Bytes encoded = encode_wg(g);
  c->compute(0, 1, &encoded);
  expect_fatal(*c);
}

// One request with these fields on a fresh session; expects the end.
void attack_fields(Cmd c, const std::function<void(Writer&, uint64_t handle)>& fields, uint64_t size = 64) {
  auto conn = env->fresh();
  const uint64_t h = conn->alloc(0, size);
  Writer w;
  fields(w, h);
  conn->send(c, w);
  expect_fatal(*conn);
}

void get_fields(Writer& w, uint64_t h, uint64_t offset, uint64_t size) {
  w.u64(h);
  w.u64(offset);
  w.u64(size);
}

struct Case {
  std::string name;
  std::function<void()> run;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  // --- frames ---
  v.push_back({"truncated_header", [] {
                 Conn c(env->port());
                 const uint8_t part[3] = {1, 0, 0};
                 c.raw(part, sizeof part);
                 c.close();  // no reply possible: the session just ends
               }});
  v.push_back({"truncated_header_after_hello", [] {
                 auto c = env->fresh();
                 const uint8_t part[5] = {0, 0, 0, 0, 0x50};
                 c->raw(part, sizeof part);
                 c->close();
               }});
  v.push_back({"truncated_payload", [] {
                 auto c = env->fresh();
                 c->send(static_cast<uint16_t>(Cmd::alloc_buffer), Bytes{1, 2, 3, 4, 5}, 0, 12);
                 c->close();
               }});
  v.push_back({"truncated_set_tensor_bytes", [] {
                 auto c = env->fresh();
                 const uint64_t h = c->alloc(0, 64);
                 Writer w;
                 get_fields(w, h, 0, 64);
                 w.bytes(Bytes(10, 0xAB).data(), 10);
                 c->send(static_cast<uint16_t>(Cmd::set_tensor), w.data(), 0, 24 + 64);
                 c->close();
               }});
  v.push_back({"payload_over_limit", [] {
                 auto c = env->fresh();
                 c->send(static_cast<uint16_t>(Cmd::get_devices), {}, 0, 0xFFFFFFFFu);
                 expect_fatal(*c);
               }});
  v.push_back({"set_tensor_payload_over_limit", [] {
                 auto c = env->fresh();
                 c->send(static_cast<uint16_t>(Cmd::set_tensor), {}, 0, kMaxSetTensorPayload + 1);
                 expect_fatal(*c);
               }});
  v.push_back({"hello_over_limit", [] {
                 Conn c(env->port());
                 c.send(static_cast<uint16_t>(Cmd::hello), {}, 0, kMaxPayload + 1);
                 expect_fatal(c);
               }});
  v.push_back({"nonzero_flags", [] {
                 auto c = env->fresh();
                 c->send(static_cast<uint16_t>(Cmd::ping), {}, 1);
                 expect_fatal(*c);
               }});
  v.push_back({"unknown_command", [] {
                 auto c = env->fresh();
                 c->send(0x0099, {});
                 expect_fatal(*c);
               }});
  v.push_back({"client_sends_error", [] {
                 auto c = env->fresh();
                 c->send(kErrorCmd, Bytes{0, 0, 0, 0, 0});
                 expect_fatal(*c);
               }});
  v.push_back({"client_sends_reply", [] {
                 auto c = env->fresh();
                 c->send(static_cast<uint16_t>(Cmd::ping) | kReplyBit, {});
                 expect_fatal(*c);
               }});
  // --- handshake ---
  v.push_back({"command_before_hello", [] {
                 Conn c(env->port());
                 c.send(Cmd::get_devices, Bytes{});
                 expect_fatal(c);
               }});
  v.push_back({"bad_magic", [] {
                 Conn c(env->port());
                 c.send(Cmd::hello, hello_payload("WEFX"));
                 expect_fatal(c);
               }});
  v.push_back({"wrong_major_version", [] {
                 Conn c(env->port());
                 c.send(Cmd::hello, hello_payload("WEFT", 2));
                 expect_fatal(c, ErrorKind::unsupported);
               }});
  v.push_back({"hello_truncated", [] {
                 Conn c(env->port());
                 Bytes p = hello_payload();
                 p.resize(10);
                 c.send(Cmd::hello, p);
                 expect_fatal(c);
               }});
  v.push_back({"hello_trailing_byte", [] {
                 Conn c(env->port());
                 Bytes p = hello_payload();
                 p.push_back(0);
                 c.send(Cmd::hello, p);
                 expect_fatal(c);
               }});
  v.push_back({"second_hello", [] {
                 auto c = env->fresh();
                 c->send(Cmd::hello, hello_payload());
                 expect_fatal(*c);
               }});
  v.push_back({"auth_wrong_mac", [] {
                 Conn c(env->auth_worker->port());
                 c.send(Cmd::hello, hello_payload());
                 c.expect_reply(Cmd::hello);
                 c.send(Cmd::auth, Bytes(32, 0x5A));
                 expect_fatal(c);
               }});
  v.push_back({"auth_mac_of_wrong_secret", [] {
                 Conn c(env->auth_worker->port());
                 c.send(Cmd::hello, hello_payload());
                 const Bytes reply = c.expect_reply(Cmd::hello);
                 ASSERT_EQ(reply.size(), 49u);
                 ASSERT_EQ(reply[16], 1);  // auth_required
                 const auto mac = auth_mac(kSecret + "x", reply.data() + 17);
                 c.send(Cmd::auth, Bytes(mac.begin(), mac.end()));
                 expect_fatal(c);
               }});
  v.push_back({"auth_skipped", [] {
                 Conn c(env->auth_worker->port());
                 c.send(Cmd::hello, hello_payload());
                 c.expect_reply(Cmd::hello);
                 c.send(Cmd::ping, Bytes{});
                 expect_fatal(c);
               }});
  v.push_back({"auth_short_mac", [] {
                 Conn c(env->auth_worker->port());
                 c.send(Cmd::hello, hello_payload());
                 c.expect_reply(Cmd::hello);
                 c.send(Cmd::auth, Bytes(16, 1));
                 expect_fatal(c);
               }});
  v.push_back({"auth_on_open_worker", [] {
                 auto c = env->fresh();
                 c->send(Cmd::auth, Bytes(32, 1));
                 expect_fatal(*c);
               }});
  // --- handles ---
  v.push_back(
      {"handle_zero", [] { attack_fields(Cmd::get_tensor, [](Writer& w, uint64_t) { get_fields(w, 0, 0, 4); }); }});
  v.push_back({"unknown_handle", [] {
                 attack_fields(Cmd::get_tensor, [](Writer& w, uint64_t h) { get_fields(w, h + 1000003, 0, 4); });
               }});
  v.push_back({"other_sessions_handle_read", [] {
                 attack_fields(Cmd::get_tensor, [](Writer& w, uint64_t) { get_fields(w, env->good->handle(), 0, 4); });
               }});
  v.push_back({"other_sessions_handle_write", [] {
                 attack_fields(Cmd::set_tensor, [](Writer& w, uint64_t) {
                   get_fields(w, env->good->handle(), 0, 16);
                   w.bytes(Bytes(16, 0xEE).data(), 16);
                 });
               }});
  v.push_back({"other_sessions_handle_free",
               [] { attack_fields(Cmd::free_buffer, [](Writer& w, uint64_t) { w.u64(env->good->handle()); }); }});
  v.push_back({"freed_handle", [] {
                 auto c = env->fresh();
                 const uint64_t h = c->alloc(0, 64);
                 c->free_buffer(h);
                 Writer w;
                 get_fields(w, h, 0, 4);
                 c->send(Cmd::get_tensor, w);
                 expect_fatal(*c);
               }});
  v.push_back({"double_free", [] {
                 auto c = env->fresh();
                 const uint64_t h = c->alloc(0, 64);
                 c->free_buffer(h);
                 c->free_buffer(h);
                 expect_fatal(*c);
               }});
  // --- ranges ---
  v.push_back({"range_overflow", [] {
                 attack_fields(Cmd::get_tensor, [](Writer& w, uint64_t h) { get_fields(w, h, UINT64_MAX - 3, 8); });
               }});
  v.push_back({"offset_past_end",
               [] { attack_fields(Cmd::get_tensor, [](Writer& w, uint64_t h) { get_fields(w, h, 65, 0); }); }});
  v.push_back({"size_past_end",
               [] { attack_fields(Cmd::get_tensor, [](Writer& w, uint64_t h) { get_fields(w, h, 0, 65); }); }});
  v.push_back({"set_tensor_range_overflow", [] {
                 attack_fields(Cmd::set_tensor, [](Writer& w, uint64_t h) {
                   get_fields(w, h, UINT64_MAX - 3, 8);
                   w.bytes(Bytes(8, 1).data(), 8);
                 });
               }});
  v.push_back({"set_tensor_payload_shorter_than_size", [] {
                 attack_fields(Cmd::set_tensor, [](Writer& w, uint64_t h) {
                   get_fields(w, h, 0, 64);
                   w.bytes(Bytes(16, 1).data(), 16);
                 });
               }});
  v.push_back({"set_tensor_payload_longer_than_size", [] {
                 attack_fields(Cmd::set_tensor, [](Writer& w, uint64_t h) {
                   get_fields(w, h, 0, 8);
                   w.bytes(Bytes(16, 1).data(), 16);
                 });
               }});
  v.push_back({"memset_past_end", [] {
                 attack_fields(Cmd::memset_tensor, [](Writer& w, uint64_t h) {
                   get_fields(w, h, 60, 8);
                   w.u8(0);
                 });
               }});
  // SET_TENSOR_ROWS: handle, offset, row_bytes, n_rows, count, rows, data.
  auto rows_fields = [](Writer& w, uint64_t h, uint64_t offset, uint64_t row_bytes, uint32_t n_rows,
                        std::vector<uint32_t> rows, size_t data_bytes) {
    w.u64(h);
    w.u64(offset);
    w.u64(row_bytes);
    w.u32(n_rows);
    w.u32(static_cast<uint32_t>(rows.size()));
    for (uint32_t r : rows) w.u32(r);
    const Bytes data(data_bytes, 7);
    w.bytes(data.data(), data.size());
  };
  v.push_back({"set_tensor_rows_not_ascending", [rows_fields] {
                 attack_fields(Cmd::set_tensor_rows,
                               [&](Writer& w, uint64_t h) { rows_fields(w, h, 0, 8, 8, {3, 1}, 16); });
               }});
  v.push_back({"set_tensor_rows_repeated_row", [rows_fields] {
                 attack_fields(Cmd::set_tensor_rows,
                               [&](Writer& w, uint64_t h) { rows_fields(w, h, 0, 8, 8, {2, 2}, 16); });
               }});
  v.push_back({"set_tensor_rows_row_past_n_rows", [rows_fields] {
                 attack_fields(Cmd::set_tensor_rows,
                               [&](Writer& w, uint64_t h) { rows_fields(w, h, 0, 8, 4, {1, 4}, 16); });
               }});
  v.push_back({"set_tensor_rows_past_end", [rows_fields] {
                 attack_fields(Cmd::set_tensor_rows,
                               [&](Writer& w, uint64_t h) { rows_fields(w, h, 8, 8, 8, {0}, 8); });
               }});
  v.push_back({"set_tensor_rows_data_short", [rows_fields] {
                 attack_fields(Cmd::set_tensor_rows,
                               [&](Writer& w, uint64_t h) { rows_fields(w, h, 0, 8, 8, {0, 5}, 15); });
               }});
  v.push_back({"set_tensor_rows_data_long", [rows_fields] {
                 attack_fields(Cmd::set_tensor_rows,
                               [&](Writer& w, uint64_t h) { rows_fields(w, h, 0, 8, 8, {0, 5}, 17); });
               }});
  v.push_back({"set_tensor_rows_count_over_payload", [] {
                 attack_fields(Cmd::set_tensor_rows, [](Writer& w, uint64_t h) {
                   w.u64(h);
                   w.u64(0);
                   w.u64(1);
                   w.u32(UINT32_MAX);
                   w.u32(UINT32_MAX);  // four billion rows listed in a few bytes
                   w.u32(0);
                 });
               }});
  v.push_back({"set_tensor_rows_range_overflow", [rows_fields] {
                 attack_fields(Cmd::set_tensor_rows, [&](Writer& w, uint64_t h) {
                   rows_fields(w, h, 0, uint64_t{1} << 40, 1u << 30, {}, 0);
                 });
               }});
  v.push_back({"set_tensor_rows_zero_row_bytes", [rows_fields] {
                 attack_fields(Cmd::set_tensor_rows,
                               [&](Writer& w, uint64_t h) { rows_fields(w, h, 0, 0, 8, {}, 0); });
               }});
  v.push_back({"get_tensor_rows_past_end", [] {
                 attack_fields(Cmd::get_tensor_rows, [](Writer& w, uint64_t h) {
                   w.u64(h);
                   w.u64(16);
                   w.u64(8);
                   w.u32(7);
                 });
               }});
  v.push_back({"get_tensor_rows_reply_over_a_frame", [] {
                 // 17 MiB of one-byte rows fits the buffer, but listing them could not fit a reply.
                 attack_fields(
                     Cmd::get_tensor_rows,
                     [](Writer& w, uint64_t h) {
                       w.u64(h);
                       w.u64(0);
                       w.u64(1);
                       w.u32(17u << 20);
                     },
                     17u << 20);
               }});
  v.push_back({"copy_dst_past_end", [] {
                 attack_fields(Cmd::copy_tensor, [](Writer& w, uint64_t h) {
                   w.u64(h);
                   w.u64(0);
                   w.u64(h);
                   w.u64(32);
                   w.u64(33);
                 });
               }});
  v.push_back({"set_tensor_hash_range_overflow", [] {
                 attack_fields(Cmd::set_tensor_hash, [](Writer& w, uint64_t h) {
                   get_fields(w, h, 8, UINT64_MAX - 4);
                   w.bytes(Bytes(16, 0).data(), 16);
                 });
               }});
  // --- payload shapes ---
  v.push_back({"trailing_byte_ping", [] {
                 auto c = env->fresh();
                 c->send(Cmd::ping, Bytes{0});
                 expect_fatal(*c);
               }});
  v.push_back({"trailing_byte_get", [] {
                 attack_fields(Cmd::get_tensor, [](Writer& w, uint64_t h) {
                   get_fields(w, h, 0, 4);
                   w.u8(0);
                 });
               }});
  v.push_back({"free_truncated", [] {
                 auto c = env->fresh();
                 c->send(Cmd::free_buffer, Bytes{1, 0, 0, 0});
                 expect_fatal(*c);
               }});
  v.push_back({"set_tensor_hash_truncated_hash", [] {
                 attack_fields(Cmd::set_tensor_hash, [](Writer& w, uint64_t h) {
                   get_fields(w, h, 0, 8);
                   w.bytes(Bytes(10, 0).data(), 10);
                 });
               }});
  // --- devices and events ---
  v.push_back({"alloc_device_out_of_range", [] {
                 auto c = env->fresh();
                 Writer w;
                 w.u32(3);
                 w.u64(64);
                 c->send(Cmd::alloc_buffer, w);
                 expect_fatal(*c);
               }});
  v.push_back({"synchronize_device_out_of_range", [] {
                 auto c = env->fresh();
                 Writer w;
                 w.u32(0xFFFFFFFFu);
                 c->send(Cmd::synchronize, w);
                 expect_fatal(*c);
               }});
  v.push_back({"compute_device_out_of_range", [] {
                 auto c = env->fresh();
                 const uint64_t h = c->alloc(0, 1024);
                 const Bytes g = encode_wg(base_graph(h));
                 c->compute(77, 1, &g);
                 expect_fatal(*c);
               }});
  v.push_back({"event_device_out_of_range", [] {
                 auto c = env->fresh();
                 Writer w;
                 w.u32(9);
                 w.u64(1);
                 c->send(Cmd::event_record, w);
                 expect_fatal(*c);
               }});
  v.push_back({"event_cap", [] {
                 auto c = env->fresh();
                 Writer many;  // 4096 distinct events are allowed, in one write
                 for (uint64_t id = 0; id < kMaxEventsPerSession; ++id) {
                   Writer w;
                   w.u32(id % 2);
                   w.u64(id * 7919);
                   FrameHeader fh;
                   fh.length = static_cast<uint32_t>(w.data().size());
                   fh.command = static_cast<uint16_t>(Cmd::event_record);
                   uint8_t raw[kFrameHeaderBytes];
                   encode_header(fh, raw);
                   many.bytes(raw, sizeof raw);
                   many.bytes(w.data().data(), w.data().size());
                 }
                 c->raw(many.data().data(), many.data().size());
                 Writer sync;
                 sync.u64(7919);
                 c->call(Cmd::event_sync, sync);  // still alive; recorded events pass
                 Writer w;
                 w.u32(0);
                 w.u64(1);  // one more distinct id
                 c->send(Cmd::event_record, w);
                 expect_fatal(*c);
               }});
  v.push_back({"buffer_count_cap", [] {
                 auto c = env->fresh();
                 constexpr uint32_t kBatch = 1024;
                 for (uint32_t done = 0; done < kMaxBuffersPerSession; done += kBatch) {
                   Writer many;
                   for (uint32_t i = 0; i < kBatch; ++i) {
                     Writer w;
                     w.u32(0);
                     w.u64(0);
                     FrameHeader fh;
                     fh.length = 12;
                     fh.command = static_cast<uint16_t>(Cmd::alloc_buffer);
                     uint8_t raw[kFrameHeaderBytes];
                     encode_header(fh, raw);
                     many.bytes(raw, sizeof raw);
                     many.bytes(w.data().data(), w.data().size());
                   }
                   c->raw(many.data().data(), many.data().size());
                   for (uint32_t i = 0; i < kBatch; ++i) {
                     const Frame f = c->recv();
                     ASSERT_EQ(f.command, static_cast<uint16_t>(Cmd::alloc_buffer) | kReplyBit);
                   }
                 }
                 Writer w;
                 w.u32(0);
                 w.u64(0);
                 c->send(Cmd::alloc_buffer, w);
                 expect_fatal(*c);
               }});
  // --- graphs ---
  v.push_back({"graph_forward_reference", [] {
                 attack_graph([](WG& g, uint64_t h) {
                   g.t.push_back(packed_f32(8, 4, h, 512));
                   g.t[2].src[1] = 4;  // tensor 3, after the add
                 });
               }});
  v.push_back({"graph_self_reference", [] { attack_graph([](WG& g, uint64_t) { g.t[2].src[0] = 3; }); }});
  v.push_back({"graph_unknown_op", [] { attack_graph([](WG& g, uint64_t) { g.t[2].op = kOpCount; }); }});
  v.push_back({"graph_op_255", [] { attack_graph([](WG& g, uint64_t) { g.t[2].op = 255; }); }});
  v.push_back({"graph_unknown_dtype", [] { attack_graph([](WG& g, uint64_t) { g.t[0].dtype = kDTypeCount; }); }});
  // Every block type: a leaf whose row splits a block ([8, 4]: 8 is no
  // multiple of 32 or 256), and one whose whole blocks run past its buffer.
  for (int d = 0; d < kDTypeCount; ++d) {
    const DTypeTraits& tr = traits(static_cast<DType>(d));
    if (!tr.quantized) continue;
    v.push_back({"graph_" + std::string(tr.name) + "_row_splits_a_block", [d] {
                   attack_graph([d](WG& g, uint64_t) { g.t[0].dtype = static_cast<uint8_t>(d); });
                 }});
    v.push_back({"graph_" + std::string(tr.name) + "_blocks_past_the_buffer", [d, tr] {
                   attack_graph([d, tr](WG& g, uint64_t) {
                     WT& t = g.t[0];
                     t.dtype = static_cast<uint8_t>(d);
                     t.ne[0] = tr.block_size;
                     t.ne[1] = static_cast<int64_t>(1024 / tr.unit_bytes + 1);  // one block per row
                     t.nb[0] = tr.unit_bytes;
                     t.nb[1] = tr.unit_bytes;
                     t.nb[2] = t.nb[3] = tr.unit_bytes * static_cast<uint64_t>(t.ne[1]);
                   });
                 }});
  }
  v.push_back({"graph_shape_contradicts_op", [] { attack_graph([](WG& g, uint64_t) { g.t[2].ne[0] = 4; }); }});
  v.push_back({"graph_dtype_contradicts_op",
               [] { attack_graph([](WG& g, uint64_t) { g.t[2].dtype = static_cast<uint8_t>(DType::i32); }); }});
  v.push_back({"graph_operands_impossible", [] {
                 attack_graph([](WG& g, uint64_t) {  // add of [8,4] and [3,4]: 8 % 3 != 0
                   g.t[1].ne[0] = 3;
                   g.t[1].nb[1] = 12;
                   g.t[1].nb[2] = g.t[1].nb[3] = 48;
                 });
               }});
  v.push_back({"graph_negative_ne", [] { attack_graph([](WG& g, uint64_t) { g.t[0].ne[1] = -4; }); }});
  v.push_back(
      {"graph_stride_outside_buffer", [] { attack_graph([](WG& g, uint64_t) { g.t[0].nb[1] = uint64_t{1} << 40; }); }});
  v.push_back({"graph_node_stride_outside_buffer",
               [] { attack_graph([](WG& g, uint64_t) { g.t[2].nb[3] = uint64_t{1} << 62; }); }});
  v.push_back({"graph_view_outside_source", [] {
                 attack_graph([](WG& g, uint64_t) {
                   WT view = g.t[0];
                   view.op = static_cast<uint8_t>(Op::view);
                   view.src[0] = 1;
                   view.view_src = 1;
                   view.view_offs = 64;  // 128 bytes from 64 in a 128-byte source
                   view.buffer = 0;
                   view.offset = 0;
                   g.t.push_back(view);
                   g.nodes = {3};
                 });
               }});
  v.push_back({"graph_view_offset_overflow", [] {
                 attack_graph([](WG& g, uint64_t) {
                   WT view = g.t[0];
                   view.op = static_cast<uint8_t>(Op::view);
                   view.ne[1] = 1;
                   view.src[0] = 1;
                   view.view_src = 1;
                   view.view_offs = UINT64_MAX - 8;
                   view.buffer = 0;
                   view.offset = 0;
                   g.t.push_back(view);
                   g.nodes = {3};
                 });
               }});
  v.push_back({"graph_leaf_outside_buffer", [] { attack_graph([](WG& g, uint64_t) { g.t[1].offset = 1000; }); }});
  v.push_back(
      {"graph_leaf_offset_overflow", [] { attack_graph([](WG& g, uint64_t) { g.t[1].offset = UINT64_MAX - 16; }); }});
  v.push_back({"graph_node_outside_buffer", [] { attack_graph([](WG& g, uint64_t) { g.t[2].offset = 1024 - 64; }); }});
  v.push_back({"graph_misaligned_leaf", [] { attack_graph([](WG& g, uint64_t) { g.t[1].offset = 130; }); }});
  v.push_back({"graph_element_cap_zero_stride_view", [] {
                 attack_graph([](WG& g, uint64_t h) {  // 2^40 elements in 4 bytes: no memory, endless work
                   WT view = g.t[0];
                   view.op = static_cast<uint8_t>(Op::view);
                   view.ne[0] = view.ne[1] = int64_t{1} << 20;
                   view.nb[0] = view.nb[1] = view.nb[2] = view.nb[3] = 0;
                   view.src[0] = 1;
                   view.view_src = 1;
                   view.buffer = 0;
                   view.offset = 0;
                   g.t.push_back(view);
                   WT sq = view;  // a node that reads it
                   sq.op = static_cast<uint8_t>(Op::sqr);
                   sq.src[0] = 4;
                   sq.view_src = 0;
                   sq.buffer = h;
                   g.t.push_back(sq);
                   g.nodes = {4};
                 });
               }});
  v.push_back({"graph_leaf_without_buffer", [] { attack_graph([](WG& g, uint64_t) { g.t[0].buffer = 0; }); }});
  v.push_back(
      {"graph_leaf_unknown_buffer", [] { attack_graph([](WG& g, uint64_t h) { g.t[0].buffer = h + 999983; }); }});
  v.push_back({"graph_other_sessions_buffer",
               [] { attack_graph([](WG& g, uint64_t) { g.t[0].buffer = env->good->handle(); }); }});
  v.push_back({"graph_node_index_out_of_range", [] { attack_graph([](WG& g, uint64_t) { g.nodes = {7}; }); }});
  v.push_back({"graph_node_is_leaf", [] { attack_graph([](WG& g, uint64_t) { g.nodes = {0}; }); }});
  v.push_back({"graph_node_listed_twice", [] { attack_graph([](WG& g, uint64_t) { g.nodes = {2, 2}; }); }});
  v.push_back({"graph_n_tensors_huge", [] {
                 auto c = env->fresh();
                 Writer w;
                 w.u32(0);
                 w.u64(1);
                 w.u8(1);
                 w.u32(0xFFFFFFFFu);
                 w.u32(0);
                 c->send(Cmd::graph_compute, w);
                 expect_fatal(*c);
               }});
  v.push_back({"graph_n_tensors_over_payload", [] {
                 auto c = env->fresh();
                 const uint64_t h = c->alloc(0, 1024);
                 Bytes g = encode_wg(base_graph(h));
                 g[0] = 5;  // 5 tensors claimed, 3 sent
                 c->compute(0, 1, &g);
                 expect_fatal(*c);
               }});
  v.push_back({"graph_trailing_bytes", [] {
                 auto c = env->fresh();
                 const uint64_t h = c->alloc(0, 1024);
                 Bytes g = encode_wg(base_graph(h));
                 g.push_back(0);
                 c->compute(0, 1, &g);
                 expect_fatal(*c);
               }});
  v.push_back({"graph_has_graph_2", [] {
                 auto c = env->fresh();
                 Writer w;
                 w.u32(0);
                 w.u64(1);
                 w.u8(2);
                 c->send(Cmd::graph_compute, w);
                 expect_fatal(*c);
               }});
  v.push_back({"graph_unknown_id", [] {
                 auto c = env->fresh();
                 c->compute(0, 12345, nullptr);
                 expect_fatal(*c);
               }});
  v.push_back({"graph_run_after_free", [] {
                 auto c = env->fresh();
                 const uint64_t h = c->alloc(0, 1024);
                 const Bytes g = encode_wg(base_graph(h));
                 c->compute(0, 5, &g);
                 c->synchronize(0);
                 c->free_buffer(h);
                 c->compute(0, 5, nullptr);  // its buffer is gone: not runnable
                 expect_fatal(*c);
               }});
  v.push_back({"graph_run_on_other_device", [] {
                 auto c = env->fresh();
                 const uint64_t h = c->alloc(0, 1024);
                 const Bytes g = encode_wg(base_graph(h));
                 c->compute(0, 5, &g);
                 c->compute(1, 5, nullptr);
                 expect_fatal(*c);
               }});
  // --- not fatal: out of memory and kernel errors leave the session open ---
  v.push_back({"alloc_over_budget_session_stays", [] {
                 auto c = env->fresh();
                 Writer w;
                 w.u32(0);
                 w.u64(kBudget + 1);
                 c->send(Cmd::alloc_buffer, w);
                 const Frame f = c->recv();
                 ASSERT_TRUE(f.is_error());
                 EXPECT_EQ(f.error_kind(), ErrorKind::out_of_memory) << f.error_message();
                 c->ping();
                 const uint64_t h = c->alloc(0, 1024);
                 const float x = 3.5f;
                 c->set(h, 4, &x, 4);
                 EXPECT_EQ(as_floats(c->get(h, 4, 4)).at(0), 3.5f);
               }});
  v.push_back({"alloc_size_max_session_stays", [] {
                 auto c = env->fresh();
                 Writer w;
                 w.u32(0);
                 w.u64(UINT64_MAX);
                 c->send(Cmd::alloc_buffer, w);
                 const Frame f = c->recv();
                 ASSERT_TRUE(f.is_error());
                 EXPECT_EQ(f.error_kind(), ErrorKind::out_of_memory) << f.error_message();
                 c->ping();
               }});
  v.push_back({"alloc_size_zero", [] {
                 auto c = env->fresh();
                 const uint64_t h = c->alloc(0, 0);
                 EXPECT_NE(h, 0u);
                 EXPECT_TRUE(c->get(h, 0, 0).empty());
                 Writer w;
                 get_fields(w, h, 0, 1);
                 c->send(Cmd::get_tensor, w);
                 expect_fatal(*c);
               }});
  v.push_back({"deferred_kernel_error", [] {
                 auto c = env->fresh();
                 const uint64_t h = c->alloc(kFailingDevice, 1024);
                 WG g = base_graph(h);
                 g.t[2].op = static_cast<uint8_t>(Op::sqrt);  // fails in the kernel, valid on the wire
                 g.t[2].src[1] = 0;
                 const Bytes encoded = encode_wg(g);
                 c->compute(kFailingDevice, 1, &encoded);  // no reply: the error is deferred
                 c->send(Cmd::ping, Bytes{});
                 const Frame f = c->recv();
                 ASSERT_TRUE(f.is_error());
                 EXPECT_EQ(f.error_kind(), ErrorKind::internal) << f.error_message();
                 c->ping();  // cleared, and the session stays
                 EXPECT_EQ(c->get(h, 0, 8).size(), 8u);
               }});
  // Issue 9, item 1: add over an empty row of a with 64 elements of b (a
  // stride-8 f32 view) overflowed the kernel's row scratch on the worker.
  static constexpr std::pair<Op, const char*> kBroadcastCases[] = {{Op::add, "broadcast_empty_row_add"},
                                                                    {Op::sub, "broadcast_empty_row_sub"},
                                                                    {Op::mul, "broadcast_empty_row_mul"},
                                                                    {Op::div, "broadcast_empty_row_div"}};
  for (const auto& [bop, name] : kBroadcastCases) {
    const auto op = static_cast<uint8_t>(bop);
    v.push_back({name, [op] {
                   attack_graph([op](WG& g, uint64_t) {
                     g.t[0].ne[0] = 0;  // a: f32 [0, 4]
                     g.t[0].nb[1] = 0;
                     g.t[0].nb[2] = g.t[0].nb[3] = 0;
                     g.t[1].ne[0] = 64;  // b: f32 [64, 1]
                     g.t[1].ne[1] = 1;
                     g.t[1].nb[1] = g.t[1].nb[2] = g.t[1].nb[3] = 256;
                     g.t[2].op = op;
                     g.t[2].ne[0] = 0;
                     g.t[2].nb[1] = g.t[2].nb[2] = g.t[2].nb[3] = 0;
                   });
                 }});
  }
  // Item 2: a result placed over the rows it reads (get_rows over a, set_rows
  // reading the rows it writes) is refused before anything runs.
  v.push_back({"get_rows_over_its_source", [] {
                 attack_graph([](WG& g, uint64_t h) {
                   WT idx = packed_f32(2, 1, h, 512);
                   idx.dtype = static_cast<uint8_t>(DType::i32);
                   g.t[1] = idx;
                   WT rows = packed_f32(8, 2, h, 64);  // inside a's 128 bytes
                   rows.op = static_cast<uint8_t>(Op::get_rows);
                   rows.src[0] = 1;
                   rows.src[1] = 2;
                   g.t[2] = rows;
                 });
               }});
  v.push_back({"add_result_half_over_its_operand", [] {
                 attack_graph([](WG& g, uint64_t) { g.t[2].offset = 64; });  // not the exact in-place form
               }});
  v.push_back({"in_place_add_is_valid", [] {
                 auto c = env->fresh();
                 const uint64_t h = c->alloc(0, 1024);
                 std::vector<float> a(32, 2.0f), b(32, 0.25f);
                 c->set(h, 0, a.data(), 128);
                 c->set(h, 128, b.data(), 128);
                 WG g = base_graph(h);
                 g.t[2].offset = 0;  // exactly over a: what the planner makes
                 const Bytes encoded = encode_wg(g);
                 c->compute(0, 1, &encoded);
                 const std::vector<float> y = as_floats(c->get(h, 0, 128));
                 for (float x : y) EXPECT_EQ(x, 2.25f);
               }});
  v.push_back({"base_graph_is_valid", [] {
                 auto c = env->fresh();
                 const uint64_t h = c->alloc(0, 1024);
                 std::vector<float> a(32), b(32);
                 for (int i = 0; i < 32; ++i) {
                   a[static_cast<size_t>(i)] = static_cast<float>(i);
                   b[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i);
                 }
                 c->set(h, 0, a.data(), 128);
                 c->set(h, 128, b.data(), 128);
                 const Bytes g = encode_wg(base_graph(h));
                 c->compute(0, 1, &g);
                 const std::vector<float> y = as_floats(c->get(h, 256, 128));
                 for (int i = 0; i < 32; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], 1.5f * static_cast<float>(i));
               }});
  return v;
}

// What each refusal must say: the validation that fires and the field or
// value it names (docs/security.md: "an ERROR naming what was wrong").
// Fragments separated by '|' must each appear. Cases made per dtype or per
// op are matched by their suffix below.
const std::map<std::string, std::string>& refusal_words() {
  static const std::map<std::string, std::string> words{
      {"payload_over_limit", "[GET_DEVICES] payload of 4294967295 bytes is over the limit"},
      {"set_tensor_payload_over_limit", "[SET_TENSOR] payload of 67108865 bytes is over the limit"},
      {"hello_over_limit", "[HELLO] payload of 16777217 bytes is over the limit"},
      {"nonzero_flags", "[PING] flags 0x0001 (must be 0)"},
      {"unknown_command", "unknown command 0x0099"},
      {"client_sends_error", "unknown command 0xffff"},
      {"client_sends_reply", "unknown command 0x8050"},
      {"command_before_hello", "[GET_DEVICES] not allowed before HELLO"},
      {"bad_magic", "[HELLO] bad magic"},
      {"wrong_major_version", "protocol major version 2"},
      {"hello_truncated", "[rpc HELLO] truncated: caps needs 8 bytes"},
      {"hello_trailing_byte", "[rpc HELLO] 1 unexpected bytes after the last field"},
      {"second_hello", "[HELLO] the handshake is already done"},
      {"auth_wrong_mac", "[AUTH] authentication failed"},
      {"auth_mac_of_wrong_secret", "[AUTH] authentication failed"},
      {"auth_skipped", "[PING] not allowed before authentication"},
      {"auth_short_mac", "[rpc AUTH] truncated: mac needs 32 bytes"},
      {"auth_on_open_worker", "[AUTH] the handshake is already done"},
      {"handle_zero", "[GET_TENSOR] handle 0 is never a buffer"},
      {"unknown_handle", "[GET_TENSOR] handle|is not a live buffer of this session"},
      {"other_sessions_handle_read", "[GET_TENSOR] handle|is not a live buffer of this session"},
      {"other_sessions_handle_write", "[SET_TENSOR] handle|is not a live buffer of this session"},
      {"other_sessions_handle_free", "[FREE_BUFFER] handle|is not a live buffer of this session"},
      {"freed_handle", "[GET_TENSOR] handle|is not a live buffer of this session"},
      {"double_free", "[FREE_BUFFER] handle|is not a live buffer of this session"},
      {"range_overflow", "[GET_TENSOR] bytes [18446744073709551612, +8) are outside buffer"},
      {"offset_past_end", "[GET_TENSOR] bytes [65, +0) are outside buffer"},
      {"size_past_end", "[GET_TENSOR] bytes [0, +65) are outside buffer"},
      {"set_tensor_range_overflow", "[SET_TENSOR] bytes [18446744073709551612, +8) are outside buffer"},
      {"set_tensor_payload_shorter_than_size", "size field says 64 bytes but the frame carries 16"},
      {"set_tensor_payload_longer_than_size", "size field says 8 bytes but the frame carries 16"},
      {"memset_past_end", "[MEMSET_TENSOR] bytes [60, +8) are outside buffer"},
      {"set_tensor_rows_not_ascending", "row 1 (entry 1 of 2) is not ascending"},
      {"set_tensor_rows_repeated_row", "row 2 (entry 1 of 2) is not ascending"},
      {"set_tensor_rows_row_past_n_rows", "row 4 (entry 1 of 2) is not ascending and below n_rows 4"},
      {"set_tensor_rows_past_end", "[SET_TENSOR_ROWS] bytes [8, +64) are outside buffer"},
      {"set_tensor_rows_data_short", "2 rows of 8 bytes do not fit the 15 bytes left"},
      {"set_tensor_rows_data_long", "[rpc SET_TENSOR_ROWS] 1 unexpected bytes after the last field"},
      {"set_tensor_rows_count_over_payload", "count 4294967295 rows"},
      {"set_tensor_rows_range_overflow", "rows of 1099511627776 bytes is not a range"},
      {"set_tensor_rows_zero_row_bytes", "8 rows of 0 bytes is not a range"},
      {"get_tensor_rows_past_end", "[GET_TENSOR_ROWS] bytes [16, +56) are outside buffer"},
      {"get_tensor_rows_reply_over_a_frame", "could need a reply over 16777216 bytes"},
      {"copy_dst_past_end", "[COPY_TENSOR] bytes [32, +33) are outside buffer"},
      {"set_tensor_hash_range_overflow", "[SET_TENSOR_HASH] bytes [8, +18446744073709551611) are outside buffer"},
      {"trailing_byte_ping", "[rpc PING] 1 unexpected bytes after the last field"},
      {"trailing_byte_get", "[rpc GET_TENSOR] 1 unexpected bytes after the last field"},
      {"free_truncated", "[rpc FREE_BUFFER] truncated: handle needs 8 bytes"},
      {"set_tensor_hash_truncated_hash", "[rpc SET_TENSOR_HASH] truncated: hash needs 16 bytes"},
      {"alloc_device_out_of_range", "[ALLOC_BUFFER] device 3 is out of range (3 devices)"},
      {"synchronize_device_out_of_range", "[SYNCHRONIZE] device 4294967295 is out of range"},
      {"compute_device_out_of_range", "[GRAPH_COMPUTE] device 77 is out of range"},
      {"event_device_out_of_range", "[EVENT_RECORD] device 9 is out of range"},
      {"event_cap", "cap of 4096 events per session"},
      {"buffer_count_cap", "65536 live buffers (the cap)"},
      {"graph_forward_reference", "tensor 2: src[1] refers to tensor 3, which is not an earlier tensor"},
      {"graph_self_reference", "tensor 2: src[0] refers to tensor 2, which is not an earlier tensor"},
      {"graph_unknown_op", "tensor 2: op |is unknown"},
      {"graph_op_255", "tensor 2: op 255 is unknown"},
      {"graph_unknown_dtype", "tensor 0: dtype |is unknown"},
      {"graph_shape_contradicts_op", "tensor 2: (add) ne[0] is 4, but the op gives f32[8,4,1,1]"},
      {"graph_dtype_contradicts_op", "tensor 2: (add) dtype is i32, but the op gives f32[8,4,1,1]"},
      {"graph_operands_impossible", "[add] cannot broadcast f32[3,4,1,1] and f32[8,4,1,1]"},
      {"graph_negative_ne", "tensor 0: ne[1] is negative (-4)"},
      {"graph_stride_outside_buffer", "tensor 0: nb[1] is 1099511627776, but a leaf f32[8,4,1,1] must be packed"},
      {"graph_node_stride_outside_buffer", "tensor 2: (add) nb[3] is 4611686018427387904, but the op gives 128"},
      {"graph_view_outside_source", "[view] view of 128 bytes at offset 64 exceeds f32[8,4,1,1]"},
      {"graph_view_offset_overflow", "[view] offset 18446744073709551607 is outside f32[8,4,1,1]"},
      {"graph_leaf_outside_buffer", "tensor 1: offset 1000 + 128 bytes of f32[8,4,1,1] is outside buffer"},
      {"graph_leaf_offset_overflow", "tensor 1: offset 18446744073709551599 + 128 bytes|is outside buffer"},
      {"graph_node_outside_buffer", "tensor 2: offset 960 + 128 bytes of f32[8,4,1,1] is outside buffer"},
      {"graph_misaligned_leaf", "tensor 1: data at byte 130 is not aligned to 4 bytes for f32"},
      {"graph_element_cap_zero_stride_view", "tensor 3: ne [1048576,1048576,1,1] spans more than 2^32 elements"},
      {"graph_leaf_without_buffer", "tensor 0: buffer is 0, but f32[8,4,1,1] needs memory of its own"},
      {"graph_leaf_unknown_buffer", "tensor 0: buffer|is not a live buffer of this session"},
      {"graph_other_sessions_buffer", "tensor 0: buffer|is not a live buffer of this session"},
      {"graph_node_index_out_of_range", "node 0: index 7 is out of range (n_tensors 3)"},
      {"graph_node_is_leaf", "node 0: tensor 0 is a leaf (op none)"},
      {"graph_node_listed_twice", "node 1: tensor 2 is listed twice"},
      {"graph_n_tensors_huge", "n_tensors 4294967295 is over the cap"},
      {"graph_n_tensors_over_payload", "n_tensors 5 needs"},
      {"graph_trailing_bytes", "[rpc GRAPH_COMPUTE] 1 unexpected bytes after the last field"},
      {"graph_has_graph_2", "has_graph is 2 (must be 0 or 1)"},
      {"graph_unknown_id", "no stored graph 12345"},
      {"graph_run_after_free", "was dropped: buffer|it uses was freed"},
      {"graph_run_on_other_device", "was built for device 0, not device 1"},
      {"alloc_size_zero", "[GET_TENSOR] bytes [0, +1) are outside buffer|(0 bytes)"},
      {"get_rows_over_its_source", "tensor 2 (get_rows f32[8,2,1,1]) writes bytes that its src[0] (tensor 0) reads"},
      {"add_result_half_over_its_operand", "tensor 2 (add f32[8,4,1,1]) writes bytes that its src[0] (tensor 0) reads"},
      // No ERROR is possible (the frame never completes), or none is sent.
      {"truncated_header", ""},
      {"truncated_header_after_hello", ""},
      {"truncated_payload", ""},
      {"truncated_set_tensor_bytes", ""},
      {"alloc_over_budget_session_stays", ""},
      {"alloc_size_max_session_stays", ""},
      {"deferred_kernel_error", ""},
      {"in_place_add_is_valid", ""},
      {"base_graph_is_valid", ""},
  };
  return words;
}

// The fragments for case name: from the table, or from the per-dtype and
// per-op families' names.
std::vector<std::string> words_for(const std::string& name) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  std::string joined;
  if (auto it = refusal_words().find(name); it != refusal_words().end()) {
    joined = it->second;
  } else if (ends_with("_row_splits_a_block")) {
    const std::string type = name.substr(6, name.size() - 6 - std::string("_row_splits_a_block").size());
    joined = "tensor 0: [new_tensor] " + type + "[8,4,1,1]: row length is not a multiple of the";
  } else if (ends_with("_blocks_past_the_buffer")) {
    const std::string type = name.substr(6, name.size() - 6 - std::string("_blocks_past_the_buffer").size());
    joined = "tensor 0: offset 0 + | bytes of " + type + "[|is outside buffer";
  } else if (name.rfind("broadcast_empty_row_", 0) == 0) {
    joined = "[" + name.substr(20) + "] cannot broadcast f32[64,1,1,1] and f32[0,4,1,1]";
  } else {
    ADD_FAILURE() << "no expected refusal for case " << name << ": add it to refusal_words()";
  }
  std::vector<std::string> out;
  for (size_t at = 0; !joined.empty();) {
    const size_t bar = joined.find('|', at);
    out.push_back(joined.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
    if (bar == std::string::npos) break;
    at = bar + 1;
  }
  return out;
}

class WorkerHostile : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { env = new Env(); }
  static void TearDownTestSuite() {
    delete env;
    env = nullptr;
  }
};

TEST_P(WorkerHostile, OtherSessionsUnaffected) {
  env->good->upload();  // before the attack; used after it
  expected_error_words() = words_for(GetParam().name);
  GetParam().run();
  expected_error_words().clear();
  env->good->compute_and_check();
  Conn& c = env->good->conn();  // and a buffer of its own still comes and goes
  const uint64_t h = c.alloc(1, 256);
  const float x = 42.0f;
  c.set(h, 128, &x, 4);
  EXPECT_EQ(as_floats(c.get(h, 128, 4)).at(0), 42.0f);
  c.free_buffer(h);
  EXPECT_TRUE(eventually([] { return env->worker->active_sessions() == 1; }))
      << env->worker->active_sessions() << " sessions still open";
  EXPECT_TRUE(eventually([] { return env->auth_worker->active_sessions() == 0; }));
}

INSTANTIATE_TEST_SUITE_P(Cases, WorkerHostile, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace weft::rpc::wtest
