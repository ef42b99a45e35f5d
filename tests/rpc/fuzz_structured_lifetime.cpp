// weft_fuzz_worker's lifetime abuse (fuzz_structured.h lists the parts):
// freed, double-freed, foreign and evicted handles and graphs, graphs run on
// the other device or after their buffer went, events across devices,
// ranges at a buffer's edges, the budget, copies that overlap, and indices
// out of range in a graph's data; and SUPPORTS_OP questions
// (fuzz_structured_support.cpp). Each case runs on a fresh session and
// expects the worker's documented answer: a result, out_of_memory with the
// session kept, or ERROR invalid_input and the connection closed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conformance/cases.h"
#include "conformance/reference.h"
#include "fuzz_structured.h"
#include "protocol/messages.h"
#include "worker_wire.h"

namespace weft::rpc::fuzz {

using namespace wtest;

namespace {

void send_event(Conn& c, Cmd cmd, uint32_t device, uint64_t id) {
  if (cmd == Cmd::event_record) {
    c.send(EventRecordRequest{device, id});
  } else {
    c.send(EventWaitRequest{device, id});
  }
}

// A small valid graph stored (and run) under id in a fresh buffer of c.
struct Stored {
  std::unique_ptr<Placed> p;
  uint64_t h = 0;
  Bytes encoded;
};
Stored store_graph(Conn& c, Rng& rng, uint64_t id, uint32_t device = 0) {
  Stored s;
  s.p = make_graph(rng, true);
  s.h = c.alloc(device, s.p->bytes);
  conformance::Reference ref;
  upload(c, s.h, *s.p, rng, ref);
  s.encoded = s.p->encode(s.h);
  c.compute(device, id, &s.encoded);
  return s;
}

// A graph whose i32 data indexes out of range: get_rows, set_rows or
// mul_mat_id. The worker may run it, defer an error, or refuse; never crash.
// When it runs, the CPU kernels' rule holds (src/backend/cpu/ops_rows.cpp):
// get_rows gives a row of zeros for such an index, set_rows skips it.
void bad_indices(Rng& rng, std::string& desc) {
  auto c = env->fresh();
  Placed p;
  conformance::CaseBuilder& b = p.b;
  const int64_t rows = pick(rng, 1, 6), n = pick(rng, 1, 4);
  const float bad_values[] = {-1.0f,      static_cast<float>(rows),    static_cast<float>(rows + 1000),
                              -100000.0f, static_cast<float>(1 << 30), -static_cast<float>(1 << 30)};
  const float bad = bad_values[pick(rng, 0, 5)];
  conformance::Init idx_init = [bad, rows](const Tensor&, Rng& r, std::vector<float>& v) {
    for (float& x : v) x = std::uniform_int_distribution<int>(0, 1)(r) ? bad : static_cast<float>(rows - 1);
    v[0] = bad;
  };
  const int k = static_cast<int>(pick(rng, 0, 2));
  desc += std::string(k == 0 ? "get_rows" : k == 1 ? "set_rows" : "mul_mat_id") + " with index " + std::to_string(bad);
  Context& ctx = b.ctx();
  Tensor* idx = b.input(DType::i32, {n, k == 2 ? 2 : 1, 1, 1}, idx_init);
  Tensor *a = nullptr, *out = nullptr;  // get_rows: a, out; set_rows: a = src, out = dst
  if (k == 0) {
    a = b.input(DType::f32, {32, rows, 1, 1});
    out = ops::get_rows(ctx, a, idx);
    b.output(out, 0.0);
  } else if (k == 1) {
    out = b.input(chance(rng, 0.5) ? DType::f32 : DType::q8_0, {32, rows, 1, 1});
    a = b.input(DType::f32, {32, n, 1, 1});
    b.output(ops::set_rows(ctx, out, a, idx), out, 0.0);
  } else {
    Tensor* as = b.input(DType::f32, {32, 4, rows, 1});
    b.output(ops::mul_mat_id(ctx, as, b.input(DType::f32, {32, 1, 2, 1}), idx), 0.0);
  }
  p.finish();
  set_case_line(desc);
  const uint64_t h = c->alloc(0, p.bytes);
  conformance::Reference ref;  // not run: it has no rule for such indices
  upload(*c, h, p, rng, ref);
  auto fetch = [&](const Tensor& t) {
    const Bytes bytes = c->get(h, p.offset(t), t.nbytes());
    return bytes.size() == t.nbytes() ? conformance::decode_tensor(t, bytes.data(), bytes.size())
                                      : std::vector<double>();
  };
  std::vector<double> want;
  if (k == 1 && out->type == DType::f32) want = fetch(*out);  // before the writes
  const Bytes g = p.encode(h);
  c->compute(0, 1, &g);
  if (settle(*c, desc) == Outcome::refused || k == 2 || out->type != DType::f32) return;
  const std::vector<double> iv = fetch(*idx), av = fetch(*a), got = fetch(*out);
  if (k == 0) want.assign(got.size(), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const auto r = static_cast<int64_t>(iv.at(static_cast<size_t>(i)));
    if (r < 0 || r >= rows) continue;
    for (int64_t e = 0; e < 32; ++e) {
      if (k == 0) want.at(static_cast<size_t>(i * 32 + e)) = av.at(static_cast<size_t>(r * 32 + e));
      if (k == 1) want.at(static_cast<size_t>(r * 32 + e)) = av.at(static_cast<size_t>(i * 32 + e));
    }
  }
  EXPECT_EQ(got, want) << "[" << desc << "] rows with an index out of range are not as the kernel documents";
}

// SET_TENSOR_ROWS and GET_TENSOR_ROWS (1.7) at random rows and ranges,
// well-formed or broken one way; COMPUTE_STATS on a device that may not
// exist; PEER_TICKET, and PUSH_TO_PEER and PEER_WAIT naming a link or
// source that was never made. A well-formed rows message writes and reads
// what a model of the buffer says; anything else ends the session.
void rows_and_newer_commands(Rng& rng, std::string& desc) {
  auto c = env->fresh();
  const int kind = static_cast<int>(pick(rng, 0, 3));
  if (kind == 1) {
    const auto device = static_cast<uint32_t>(pick(rng, 0, kDevices));
    desc += "COMPUTE_STATS device " + std::to_string(device);
    c->send(ComputeStatsRequest{device});
    if (device < kDevices) {
      const auto r = parse<ComputeStatsReply>(c->expect_reply(Cmd::compute_stats));
      EXPECT_EQ(r.graphs, 0u) << desc;
    } else {
      expect_fatal(*c);
    }
    return;
  }
  if (kind == 2) {
    desc += "PEER_TICKET, then PUSH_TO_PEER on a link never opened";
    const PeerTicketReply ticket = c->call(PeerTicketRequest{});
    EXPECT_EQ(ticket.ticket.size(), kTicketBytes) << desc;
    const uint64_t h = c->alloc(0, 64);
    c->send(PushToPeerRequest{static_cast<uint32_t>(pick(rng, 0, 70)), h, 0, 16, h, 0, 1});
    expect_fatal(*c);
    return;
  }
  if (kind == 3) {
    desc += "PEER_WAIT on a source never attached";
    c->send(PeerWaitRequest{static_cast<uint32_t>(pick(rng, 0, 70)), static_cast<uint64_t>(pick(rng, 0, 5))});
    expect_fatal(*c);
    return;
  }
  const uint64_t row_bytes = static_cast<uint64_t>(pick(rng, 1, 40));
  const auto n_rows = static_cast<uint32_t>(pick(rng, 0, 12));
  const uint64_t size = row_bytes * n_rows + static_cast<uint64_t>(pick(rng, 0, 20));
  const uint64_t offset = static_cast<uint64_t>(pick(rng, 0, static_cast<int64_t>(size - row_bytes * n_rows)));
  const uint64_t h = c->alloc(static_cast<uint32_t>(pick(rng, 0, 1)), std::max<uint64_t>(size, 1));
  Bytes model = random_bytes(rng, std::max<uint64_t>(size, 1));
  c->set(h, 0, model.data(), model.size());
  SetTensorRowsRequest req{h, offset, row_bytes, n_rows, {}, {}};
  for (uint32_t r = 0; r < n_rows; ++r)
    if (chance(rng, 0.5)) req.rows.push_back(r);
  Bytes data = random_bytes(rng, req.rows.size() * row_bytes);
  // One way to break it (1-7), or none (0, 8, 9).
  const int broken = static_cast<int>(pick(rng, 0, 9));
  desc += std::to_string(req.rows.size()) + " of " + std::to_string(n_rows) + " rows of " +
          std::to_string(row_bytes) + " bytes at " + std::to_string(offset) + " of " + std::to_string(size) +
          ", broken " + std::to_string(broken);
  if (broken == 1 && req.rows.size() >= 2) std::swap(req.rows[0], req.rows[1]);
  if (broken == 2) req.rows.push_back(n_rows + static_cast<uint32_t>(pick(rng, 0, 3)));
  if (broken == 3) data.push_back(1);
  if (broken == 4 && !data.empty()) data.pop_back();
  if (broken == 5) req.offset = size - row_bytes * n_rows + 1;
  if (broken == 6) req.row_bytes = 0;
  const bool valid = broken == 0 || broken >= 8 || (broken == 1 && req.rows.size() < 2) ||
                     (broken == 4 && data.empty() && req.rows.empty());
  if (broken == 2) data.resize(req.rows.size() * row_bytes);
  req.data = data;
  if (broken == 7) {  // GET_TENSOR_ROWS past the end instead
    c->send(GetTensorRowsRequest{h, size - row_bytes * n_rows + 1, row_bytes, n_rows});
    expect_fatal(*c);
    return;
  }
  c->send(req);
  if (!valid) {
    expect_fatal(*c);
    return;
  }
  for (uint32_t r = 0; r < n_rows; ++r)
    std::fill_n(model.begin() + static_cast<ptrdiff_t>(offset + r * row_bytes), row_bytes, 0);
  for (size_t i = 0; i < req.rows.size(); ++i)
    std::copy_n(data.begin() + static_cast<ptrdiff_t>(i * row_bytes), row_bytes,
                model.begin() + static_cast<ptrdiff_t>(offset + req.rows[i] * row_bytes));
  EXPECT_EQ(c->get(h, 0, model.size()), model) << desc;
  c->send(GetTensorRowsRequest{h, offset, row_bytes, n_rows});
  const Bytes reply = c->expect_reply(Cmd::get_tensor_rows);
  Reader r(reply, "GET_TENSOR_ROWS reply");
  const GetTensorRowsReply got = GetTensorRowsReply::decode(r, row_bytes, n_rows);
  EXPECT_EQ(got.rows, nonzero_rows(model.data() + offset, row_bytes, n_rows)) << desc;
  for (size_t i = 0; i < got.rows.size(); ++i)
    EXPECT_TRUE(std::equal(got.data.begin() + static_cast<ptrdiff_t>(i * row_bytes),
                           got.data.begin() + static_cast<ptrdiff_t>((i + 1) * row_bytes),
                           model.begin() + static_cast<ptrdiff_t>(offset + got.rows[i] * row_bytes)))
        << desc << ", row " << got.rows[i];
}

}  // namespace

void run_lifetime(Rng& rng, std::string& desc) {
  const int kind = static_cast<int>(pick(rng, 0, 15));
  if (kind == 12) return bad_indices(rng, desc);
  if (kind == 15) return rows_and_newer_commands(rng, desc);
  if (kind >= 13) return run_support(rng, desc);
  auto c = env->fresh();
  switch (kind) {
    case 0: {  // a stored graph whose buffer was freed
      desc += "run a stored graph after FREE_BUFFER";
      Stored s = store_graph(*c, rng, 5);
      if (chance(rng, 0.5)) c->synchronize(0);  // else the free races the compute
      c->free_buffer(s.h);
      c->compute(0, 5, nullptr);
      expect_fatal(*c);
      break;
    }
    case 1: {
      desc += "double FREE_BUFFER";
      const uint64_t h = c->alloc(static_cast<uint32_t>(pick(rng, 0, 1)), static_cast<uint64_t>(pick(rng, 0, 4096)));
      c->free_buffer(h);
      if (chance(rng, 0.5)) {
        c->free_buffer(h);
      } else {
        c->send(GetTensorRequest{h, 0, 0});
      }
      expect_fatal(*c);
      break;
    }
    case 2: {  // another session's handle, live or freed, in every kind of request
      auto other = env->fresh();
      const uint64_t theirs = other->alloc(0, 256);
      const Bytes pattern = random_bytes(rng, 256);
      other->set(theirs, 0, pattern.data(), pattern.size());
      const bool freed = chance(rng, 0.2);
      const uint64_t spare = other->alloc(0, 64);
      const uint64_t target = freed ? spare : theirs;
      if (freed) other->free_buffer(spare);
      other->ping();
      const uint64_t mine = c->alloc(0, 256);
      const int how = static_cast<int>(pick(rng, 0, 7));
      desc += std::string(freed ? "a freed" : "a live") + " foreign handle in request kind " + std::to_string(how);
      switch (how) {
        case 0: c->send(GetTensorRequest{target, 0, 4}); break;
        case 1: c->set(target, 0, pattern.data(), 16); break;
        case 2: c->free_buffer(target); break;
        case 3: c->send(CopyTensorRequest{mine, 0, target, 0, 16}); break;
        case 4: c->send(CopyTensorRequest{target, 0, mine, 0, 16}); break;
        case 5: c->send(MemsetTensorRequest{target, 0, 8, 0x77}); break;
        case 6: c->send(ClearBufferRequest{target, 0x55}); break;
        default: {  // a graph whose tensors all live in that buffer
          auto p = make_graph(rng, true);
          const Bytes g = p->encode(target);
          c->compute(0, 1, &g);
        }
      }
      expect_fatal(*c);
      EXPECT_EQ(other->get(theirs, 0, 256), pattern) << "[" << desc << "] the other session's bytes changed";
      break;
    }
    case 3: {  // more than 64 stored graphs: the least recently used are gone
      const uint64_t extra = static_cast<uint64_t>(pick(rng, 1, 3));
      desc += "graph ids 1.." + std::to_string(kMaxGraphsPerSession + extra) + ", then an evicted id";
      Stored s = store_graph(*c, rng, 1);
      for (uint64_t id = 2; id <= kMaxGraphsPerSession + extra; ++id) c->compute(0, id, &s.encoded);
      c->compute(0, kMaxGraphsPerSession + extra, nullptr);
      c->ping();
      c->compute(0, static_cast<uint64_t>(pick(rng, 1, static_cast<int64_t>(extra))), nullptr);
      expect_fatal(*c);
      break;
    }
    case 4: {  // events across devices, then one on a device that does not exist
      desc += "events across devices";
      Stored s = store_graph(*c, rng, 9);
      const uint64_t id = rng();
      send_event(*c, Cmd::event_record, 0, id);
      send_event(*c, Cmd::event_wait, 1, id);
      send_event(*c, Cmd::event_record, 1, id);  // recorded again, elsewhere
      send_event(*c, Cmd::event_wait, 0, id);
      c->send(EventSyncRequest{id});
      c->expect_reply(Cmd::event_sync);
      c->send(EventSyncRequest{id + 1});  // never recorded: passed
      c->expect_reply(Cmd::event_sync);
      c->synchronize(1);
      send_event(*c, chance(rng, 0.5) ? Cmd::event_record : Cmd::event_wait, chance(rng, 0.5) ? kDevices : UINT32_MAX,
                 id);
      expect_fatal(*c);
      break;
    }
    case 5: {  // ranges at the edges: the last byte is fine, one more is not
      const uint64_t size = static_cast<uint64_t>(pick(rng, 0, 300));
      const uint64_t h = c->alloc(0, size);
      EXPECT_TRUE(c->get(h, size, 0).empty());
      if (size > 0) {
        const uint64_t k = static_cast<uint64_t>(pick(rng, 1, static_cast<int64_t>(size)));
        const Bytes tail = random_bytes(rng, k);
        c->set(h, size - k, tail.data(), k);
        EXPECT_EQ(c->get(h, size - k, k), tail);
        EXPECT_EQ(c->get(h, 0, size).size(), size);
      }
      const int how = static_cast<int>(pick(rng, 0, 6));
      desc += "buffer of " + std::to_string(size) + " bytes, out-of-range request kind " + std::to_string(how);
      switch (how) {
        case 0: c->send(GetTensorRequest{h, 0, size + 1}); break;
        case 1: c->send(GetTensorRequest{h, size + 1, 0}); break;
        case 2: c->send(GetTensorRequest{h, UINT64_MAX - 3, 8}); break;
        case 3: {
          const Bytes two(2, 1);
          c->set(h, size == 0 ? 0 : size - 1, two.data(), 2);
          break;
        }
        case 4: c->send(MemsetTensorRequest{h, size, UINT64_MAX, 1}); break;
        case 5: c->send(CopyTensorRequest{h, 0, h, size, 1}); break;
        default: c->send(CopyTensorRequest{h, 1, h, 0, size}); break;
      }
      expect_fatal(*c);
      break;
    }
    case 6: {
      desc += "a stored graph run on the other device";
      store_graph(*c, rng, 3, 0);
      c->compute(1, 3, nullptr);
      expect_fatal(*c);
      break;
    }
    case 7: {  // an id replaced by another graph; the first one's buffer freed after
      desc += "graph id replaced, first buffer freed";
      Stored a = store_graph(*c, rng, 11);
      Stored b = store_graph(*c, rng, 11);
      desc += " [" + a.p->desc + "] then [" + b.p->desc + "]";
      set_case_line(desc);
      for (int round = 0; round < 2; ++round) {
        if (round == 1) c->free_buffer(a.h);  // b's graph does not use it
        conformance::Reference ref;
        upload(*c, b.h, *b.p, rng, ref);
        c->compute(0, 11, nullptr);
        ref.run(b.p->g);
        const std::string f = check_outputs(*c, b.h, *b.p, ref);
        if (!f.empty()) ADD_FAILURE() << "[" << desc << "] round " << round << ":" << f;
      }
      break;
    }
    case 8: {  // freed while its graph may still run; the graph goes with it
      desc += "FREE_BUFFER right after GRAPH_COMPUTE";
      Stored s = store_graph(*c, rng, 4);
      c->free_buffer(s.h);
      c->ping();
      const uint64_t h = c->alloc(0, 128);
      EXPECT_EQ(c->get(h, 0, 128).size(), 128u);
      c->compute(0, 4, nullptr);
      expect_fatal(*c);
      break;
    }
    case 9: {  // over the budget: out_of_memory, the session stays
      desc += "ALLOC_BUFFER over the budget";
      c->send(AllocBufferRequest{0, chance(rng, 0.5) ? kBudget + 1 : UINT64_MAX - static_cast<uint64_t>(pick(rng, 0, 4096))});
      const Frame f = c->recv();
      EXPECT_TRUE(f.is_error() && f.error_kind() == ErrorKind::out_of_memory) << desc;
      const uint64_t h = c->alloc(1, 64);
      const float x = 1.25f;
      c->set(h, 60, &x, 4);
      EXPECT_EQ(as_floats(c->get(h, 60, 4)).at(0), 1.25f);
      break;
    }
    case 10: {  // CLEAR_BUFFER and MEMSET_TENSOR write what and where they say
      const uint64_t size = static_cast<uint64_t>(pick(rng, 1, 300));
      const uint64_t off = static_cast<uint64_t>(pick(rng, 0, static_cast<int64_t>(size)));
      const uint64_t n = static_cast<uint64_t>(pick(rng, 0, static_cast<int64_t>(size - off)));
      desc += "CLEAR_BUFFER then MEMSET_TENSOR [" + std::to_string(off) + ", +" + std::to_string(n) + ") of " +
              std::to_string(size);
      const uint64_t h = c->alloc(static_cast<uint32_t>(pick(rng, 0, 1)), size);
      c->send(ClearBufferRequest{h, 0xA5});
      c->send(MemsetTensorRequest{h, off, n, 0x3C});
      Bytes want(size, 0xA5);
      std::fill(want.begin() + static_cast<ptrdiff_t>(off), want.begin() + static_cast<ptrdiff_t>(off + n), 0x3C);
      EXPECT_EQ(c->get(h, 0, size), want) << desc;
      break;
    }
    default: {  // COPY_TENSOR within one buffer, ranges overlapping: nothing outside dst changes
      const uint64_t size = 256;
      const uint64_t n = static_cast<uint64_t>(pick(rng, 1, 128));
      const uint64_t src = static_cast<uint64_t>(pick(rng, 0, static_cast<int64_t>(size - n)));
      const uint64_t dst = static_cast<uint64_t>(
          std::clamp<int64_t>(static_cast<int64_t>(src) + pick(rng, -static_cast<int64_t>(n), static_cast<int64_t>(n)),
                              0, static_cast<int64_t>(size - n)));
      desc += "COPY_TENSOR " + std::to_string(n) + " bytes " + std::to_string(src) + " -> " + std::to_string(dst);
      const uint64_t h = c->alloc(0, size);
      const Bytes before = random_bytes(rng, size);
      c->set(h, 0, before.data(), size);
      c->send(CopyTensorRequest{h, src, h, dst, n});
      const Bytes after = c->get(h, 0, size);
      ASSERT_EQ(after.size(), size);
      for (uint64_t i = 0; i < size; ++i) {
        if (i < dst || i >= dst + n) {
          EXPECT_EQ(after[i], before[i]) << "[" << desc << "] byte " << i << " outside the destination changed";
        }
      }
    }
  }
}

}  // namespace weft::rpc::fuzz
