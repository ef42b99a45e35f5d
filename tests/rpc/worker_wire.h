// What the worker tests share: a client that speaks the protocol by hand
// (frames, fields, handshake) so tests can send anything, well-formed or not,
// and a small graph with its expected result computed in plain C++.
#pragma once

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "protocol/content_hash.h"
#include "protocol/graph_codec.h"
#include "protocol/messages.h"
#include "protocol/wire.h"
#include "transport/stream.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"

namespace weft::rpc::wtest {

using Bytes = std::vector<uint8_t>;
using namespace std::chrono_literals;

inline constexpr uint16_t kErrorCmd = 0xFFFF;
inline constexpr auto kReadTimeout = std::chrono::milliseconds(8000);

struct Frame {
  uint16_t command = 0;
  Bytes payload;
  bool is_error() const { return command == kErrorCmd; }
  ErrorKind error_kind() const { return error_kind_from_code(payload.at(0)); }
  std::string error_message() const { return parse<ErrorReply>(payload).message; }
};

// What a host that links its workers says it can do (docs/rpc-protocol.md).
inline constexpr uint64_t kPeerCaps = kCapTensorCache | kCapEvents | kCapOpSupport | kCapPeerLinks;

inline Bytes hello_payload(const char* magic = "WEFT", uint16_t major = kMajor, uint16_t minor = kMinor,
                           uint64_t caps = kCapTensorCache | kCapEvents | kCapOpSupport) {
  HelloRequest m;
  std::memcpy(m.magic.data(), magic, 4);
  m.major = major;
  m.minor = minor;
  m.capabilities = caps;
  return encoded(m).data();
}

inline std::array<uint8_t, 32> auth_mac(const std::string& secret, const uint8_t* challenge) {
  uint8_t msg[12 + 32];
  std::memcpy(msg, "weft-auth-v1", 12);
  std::memcpy(msg + 12, challenge, 32);
  std::array<uint8_t, 32> mac{};
  unsigned int n = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg, sizeof msg, mac.data(), &n);
  return mac;
}

// One connection to a worker, driven field by field.
class Conn {
 public:
  explicit Conn(uint16_t port) {
    TcpOptions o;
    o.read_timeout = kReadTimeout;
    s_ = tcp_connect("127.0.0.1", port, o);
  }
  explicit Conn(std::unique_ptr<Stream> s) : s_(std::move(s)) {}

  Stream& stream() { return *s_; }
  void raw(const void* p, size_t n) { s_->write_all(p, n); }
  // A frame; length defaults to the payload's size (a lie is allowed).
  void send(uint16_t command, const Bytes& payload, uint16_t flags = 0, std::optional<uint32_t> length = {}) {
    FrameHeader h;
    h.length = length ? *length : static_cast<uint32_t>(payload.size());
    h.command = command;
    h.flags = flags;
    uint8_t raw[kFrameHeaderBytes];
    encode_header(h, raw);
    s_->write_all(raw, sizeof raw, payload.data(), payload.size());
  }
  void send(Cmd c, const Bytes& payload) { send(static_cast<uint16_t>(c), payload); }
  void send(Cmd c, const Writer& w) { send(static_cast<uint16_t>(c), w.data()); }
  // A message of protocol/messages.h, as the client sends it.
  template <class M>
  void send(const M& m) {
    send(M::kCode, encoded(m).data());
  }

  Frame recv() {
    uint8_t raw[kFrameHeaderBytes];
    s_->read_exact(raw, sizeof raw);
    const FrameHeader h = decode_header(raw);
    Frame f;
    f.command = h.command;
    f.payload.resize(h.length);
    if (h.length) s_->read_exact(f.payload.data(), h.length);
    return f;
  }
  // The reply to c; an ERROR (or another frame) fails the test.
  Bytes expect_reply(Cmd c) {
    Frame f = recv();
    if (f.is_error()) {
      ADD_FAILURE() << cmd_name(static_cast<uint16_t>(c)) << " got ERROR: " << f.error_message();
      return {};
    }
    EXPECT_EQ(f.command, static_cast<uint16_t>(c) | kReplyBit);
    return f.payload;
  }
  Bytes call(Cmd c, const Writer& w) {
    send(c, w);
    return expect_reply(c);
  }
  // A message and its decoded reply (an ERROR fails the test and throws).
  template <class M>
  typename M::Reply call(const M& m) {
    send(m);
    const Bytes reply = expect_reply(static_cast<Cmd>(M::kCode));
    return parse<typename M::Reply>(reply);
  }

  // True when the worker closed the connection (rather than a read timeout).
  bool closed_by_peer() {
    const auto start = std::chrono::steady_clock::now();
    try {
      uint8_t b;
      s_->read_exact(&b, 1);
      return false;
    } catch (const Error& e) {
      return e.kind() == ErrorKind::disconnected && std::chrono::steady_clock::now() - start < kReadTimeout - 1000ms;
    }
  }
  void close() {
    if (s_) s_->shutdown();
    s_.reset();
  }

  // HELLO (and AUTH when the worker asks); returns the HELLO reply's capabilities.
  uint64_t handshake(const std::optional<std::string>& secret = {}) {
    send(Cmd::hello, hello_payload());
    const HelloReply reply = parse<HelloReply>(expect_reply(Cmd::hello));
    EXPECT_EQ(reply.magic, kMagicBytes);
    EXPECT_EQ(reply.major, kMajor);
    if (reply.auth_required) {
      EXPECT_TRUE(secret.has_value());
      call(AuthRequest{auth_mac(secret.value_or(""), reply.challenge.data())});
    }
    return reply.capabilities;
  }

  uint64_t alloc(uint32_t device, uint64_t size) {
    send(AllocBufferRequest{device, size});
    const Bytes reply = expect_reply(Cmd::alloc_buffer);
    if (reply.size() != 8) return 0;
    return parse<AllocBufferReply>(reply).handle;
  }
  void set(uint64_t handle, uint64_t offset, const void* data, size_t n) {
    send(SetTensorRequest{handle, offset, n, {static_cast<const uint8_t*>(data), n}});
  }
  Bytes get(uint64_t handle, uint64_t offset, uint64_t n) {
    send(GetTensorRequest{handle, offset, n});
    return expect_reply(Cmd::get_tensor);
  }
  void free_buffer(uint64_t handle) {
    send(FreeBufferRequest{handle});
  }
  void ping() { call(PingRequest{}); }
  // SET_TENSOR_HASH: whether the worker had the bytes.
  bool set_hash(uint64_t handle, uint64_t offset, uint64_t n, const ContentHash& h) {
    send(SetTensorHashRequest{handle, offset, n, h});
    const Bytes reply = expect_reply(Cmd::set_tensor_hash);
    return reply.size() == 1 && reply[0] == 1;
  }
  void compute(uint32_t device, uint64_t graph_id, const Bytes* graph) {
    GraphComputeRequest m{device, graph_id, graph != nullptr, {}};
    if (graph) m.graph = *graph;
    send(m);
  }
  void synchronize(uint32_t device) {
    call(SynchronizeRequest{device});
  }

 private:
  std::unique_ptr<Stream> s_;
};

// Expects an ERROR of this kind, then the worker closing the connection.
// Fragments the next ERROR's message must each contain (a test sets them
// for the case it runs: the check is that the validation meant to fire
// fired, and that its message names what was wrong); empty: any message.
inline std::vector<std::string>& expected_error_words() {
  static std::vector<std::string> words;
  return words;
}

inline void expect_fatal(Conn& c, ErrorKind kind = ErrorKind::invalid_input) {
  Frame f;
  try {
    f = c.recv();
  } catch (const Error& e) {
    FAIL() << "no ERROR frame: " << e.what();
  }
  ASSERT_TRUE(f.is_error()) << "got command " << f.command << " instead of ERROR";
  EXPECT_EQ(f.error_kind(), kind) << f.error_message();
  EXPECT_FALSE(f.error_message().empty());
  for (const std::string& words : expected_error_words())
    EXPECT_NE(f.error_message().find(words), std::string::npos)
        << "the refusal does not say \"" << words << "\": " << f.error_message();
  EXPECT_TRUE(c.closed_by_peer()) << "the worker kept the connection after: " << f.error_message();
}

// Polls cond for up to 5 s.
inline bool eventually(const std::function<bool()>& cond) {
  for (int i = 0; i < 500; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

inline std::vector<float> random_floats(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

// Every tensor of g that owns memory at its own 64-byte aligned offset of one
// remote buffer (views follow their roots); encode() writes g so placed.
struct Placement {
  explicit Placement(const Graph& g) {
    for (const Tensor* t : g.leafs()) place(t);
    for (const Tensor* t : g.nodes()) place(t);
  }
  void place(const Tensor* t) {
    if (t->view_src != nullptr || offsets.count(t)) return;
    offsets[t] = bytes;
    bytes += (t->nbytes() + 63) / 64 * 64;
  }
  Bytes encode(const Graph& g, uint64_t handle) const {
    Writer w;
    encode_graph(w, g, [&](const Tensor& t) { return RemoteLocation{handle, offsets.at(&t)}; });
    return w.data();
  }
  std::unordered_map<const Tensor*, uint64_t> offsets;
  uint64_t bytes = 0;
};

// y = scale(silu(mul_mat(a, b) + bias), 0.5): a f32 [K, M], b f32 [K, N],
// bias f32 [M, 1], y [M, N]; every tensor in one remote buffer at 64-byte
// aligned offsets of its own.
struct TestGraph {
  TestGraph(int64_t k, int64_t m, int64_t n) : k(k), m(m), n(n) {
    a = ctx.new_tensor(DType::f32, {k, m});
    b = ctx.new_tensor(DType::f32, {k, n});
    bias = ctx.new_tensor(DType::f32, {m, 1});
    y = ops::scale(ctx, ops::silu(ctx, ops::add(ctx, ops::mul_mat(ctx, a, b), bias)), 0.5f);
    g.expand(y);
    const Placement p(g);
    offsets = p.offsets;
    bytes = p.bytes;
  }
  Bytes encode(uint64_t handle) const {
    Placement p(g);
    return p.encode(g, handle);
  }
  std::vector<float> expected(const std::vector<float>& av, const std::vector<float>& bv,
                              const std::vector<float>& biasv) const {
    std::vector<float> out(static_cast<size_t>(m * n));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        double s = biasv[static_cast<size_t>(i)];
        for (int64_t l = 0; l < k; ++l) {
          s += static_cast<double>(av[static_cast<size_t>(i * k + l)]) * bv[static_cast<size_t>(j * k + l)];
        }
        out[static_cast<size_t>(j * m + i)] = static_cast<float>(0.5 * s / (1.0 + std::exp(-s)));
      }
    }
    return out;
  }

  int64_t k, m, n;
  Context ctx;
  Graph g;
  Tensor *a, *b, *bias, *y;
  std::unordered_map<const Tensor*, uint64_t> offsets;
  uint64_t bytes = 0;
};

inline std::vector<float> as_floats(const Bytes& b) {
  std::vector<float> v(b.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

inline void expect_near_all(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4f + 1e-4f * std::fabs(want[i])) << "at " << i;
  }
}

// A client that uploads random inputs, runs TestGraph and checks the result.
class GoodClient {
 public:
  GoodClient(uint16_t port, uint32_t device, uint64_t seed, int64_t k = 32, int64_t m = 8, int64_t n = 4,
             const std::optional<std::string>& secret = {})
      : GoodClient(Conn(port), device, seed, k, m, n, secret) {}
  // Over a stream of the caller's (a TLS one, say).
  GoodClient(Conn conn, uint32_t device, uint64_t seed, int64_t k = 32, int64_t m = 8, int64_t n = 4,
             const std::optional<std::string>& secret = {})
      : conn_(std::move(conn)), device_(device), rng_(static_cast<uint32_t>(seed)), graph_(k, m, n), graph_id_(seed) {
    conn_.handshake(secret);
    handle_ = conn_.alloc(device, graph_.bytes);
    EXPECT_NE(handle_, 0u);
  }
  // Uploads fresh inputs (done before an attack; checked after it).
  void upload() {
    av_ = random_floats(rng_, static_cast<size_t>(graph_.k * graph_.m));
    bv_ = random_floats(rng_, static_cast<size_t>(graph_.k * graph_.n));
    biasv_ = random_floats(rng_, static_cast<size_t>(graph_.m));
    conn_.set(handle_, graph_.offsets.at(graph_.a), av_.data(), av_.size() * 4);
    conn_.set(handle_, graph_.offsets.at(graph_.b), bv_.data(), bv_.size() * 4);
    conn_.set(handle_, graph_.offsets.at(graph_.bias), biasv_.data(), biasv_.size() * 4);
  }
  void compute_and_check() {
    if (!sent_) {
      const Bytes encoded = graph_.encode(handle_);
      conn_.compute(device_, graph_id_, &encoded);
      sent_ = true;
    } else {
      conn_.compute(device_, graph_id_, nullptr);  // the stored graph
    }
    const Bytes y = conn_.get(handle_, graph_.offsets.at(graph_.y), graph_.y->nbytes());
    expect_near_all(as_floats(y), graph_.expected(av_, bv_, biasv_));
  }
  void round() {
    upload();
    compute_and_check();
  }
  Conn& conn() { return conn_; }
  uint64_t handle() const { return handle_; }

 private:
  Conn conn_;
  uint32_t device_;
  std::mt19937 rng_;
  TestGraph graph_;
  uint64_t graph_id_;
  uint64_t handle_ = 0;
  bool sent_ = false;
  std::vector<float> av_, bv_, biasv_;
};

}  // namespace weft::rpc::wtest
