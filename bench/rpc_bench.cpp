#include "rpc_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/connection.h"
#include "loopback_bandwidth.h"
#include "transport/stream.h"
#include "weft/backend/cpu.h"
#include "weft/core/context.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"
#include "weft/rpc/client.h"
#include "weft/rpc/worker.h"

namespace weft::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Raw TCP round trip on loopback: 8 bytes there and back, median seconds.
double loopback_round_trip(int samples) {
  auto listener = rpc::tcp_listen("127.0.0.1", 0);
  std::thread echo([&] {
    try {
      auto in = listener->accept();
      uint8_t b[8];
      for (int i = 0; i < samples; ++i) {
        in->read_exact(b, sizeof b);
        in->write_all(b, sizeof b);
      }
    } catch (const Error&) {
    }
  });
  std::vector<double> times;
  {
    auto out = rpc::tcp_connect("127.0.0.1", listener->port());
    uint8_t b[8] = {};
    for (int i = 0; i < samples; ++i) {
      const auto t0 = Clock::now();
      out->write_all(b, sizeof b);
      out->read_exact(b, sizeof b);
      times.push_back(seconds_since(t0));
    }
  }
  echo.join();
  return median(times);
}

// One token through `layers` graphs: graph i computes silu(W_i x) from one
// of two ping-pong leaves into the other (a cpy), like one layer each.
struct Chain {
  Chain(int layers, int64_t n) {
    a = ctx.new_tensor(DType::f32, {n});
    b = ctx.new_tensor(DType::f32, {n});
    std::vector<Tensor*> all{a, b};
    graphs.resize(static_cast<size_t>(layers));
    for (int i = 0; i < layers; ++i) {
      Tensor* w = ctx.new_tensor(DType::f32, {n, n});
      weights.push_back(w);
      Tensor* in = i % 2 == 0 ? a : b;
      Tensor* out = i % 2 == 0 ? b : a;
      Tensor* mm = ops::mul_mat(ctx, w, in);
      Tensor* act = ops::silu(ctx, mm);
      Tensor* write = ops::cpy(ctx, act, out);
      graphs[static_cast<size_t>(i)].expand(write);
      for (Tensor* t : {w, mm, act, write}) all.push_back(t);
    }
    result = layers % 2 == 0 ? a : b;
    tensors = all;
  }
  void place(BufferType& bt) {
    buffer = allocate_tensors(bt, tensors);
    for (size_t i = 0; i < weights.size(); ++i) {
      std::vector<float> w(static_cast<size_t>(weights[i]->nelements()));
      for (size_t j = 0; j < w.size(); ++j) w[j] = std::sin(0.37f * static_cast<float>(j) + static_cast<float>(i)) / 16;
      tensor_set(*weights[i], w.data(), 0, weights[i]->nbytes());
    }
  }
  std::vector<float> token(Backend& backend) {
    std::vector<float> x(static_cast<size_t>(a->nelements()), 0.5f);
    backend.set_tensor_async(*a, x.data(), 0, a->nbytes());
    for (const Graph& g : graphs) backend.compute(g);
    backend.synchronize();
    tensor_get(*result, x.data(), 0, result->nbytes());
    return x;
  }

  Context ctx;
  Tensor* a;
  Tensor* b;
  Tensor* result;
  std::vector<Tensor*> weights;
  std::vector<Tensor*> tensors;
  std::vector<Graph> graphs;
  std::unique_ptr<Buffer> buffer;
};

// Tokens per second of `tokens` tokens after one warm-up; *out gets the last result.
double tokens_per_second(Chain& chain, Backend& backend, int tokens, std::vector<float>* out) {
  *out = chain.token(backend);
  const auto t0 = Clock::now();
  for (int i = 0; i < tokens; ++i) *out = chain.token(backend);
  return tokens / seconds_since(t0);
}

// Best upload (bytes/s) of five and the median PING round trip (s) of one
// connection, opened here.
struct Wire {
  double upload = 0, ping = 0;
};
Wire measure_wire(const std::string& endpoint, const std::vector<uint8_t>& data, int samples) {
  RpcOptions ro;
  ro.cache_min_bytes = SIZE_MAX;
  auto devices = make_rpc_devices(endpoint, ro);
  Context ctx;
  Tensor* big = ctx.new_tensor(DType::i32, {static_cast<int64_t>(data.size() / 4)});
  std::vector<Tensor*> bigs{big};
  auto buffer = allocate_tensors(devices[0]->default_buffer_type(), bigs);
  Wire w;
  int32_t probe = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    tensor_set(*big, data.data(), 0, big->nbytes());
    tensor_get(*big, &probe, 0, sizeof probe);
    w.upload = std::max(w.upload, static_cast<double>(big->nbytes()) / seconds_since(t0));
  }
  auto connection = rpc::find_connection(endpoint);
  std::vector<double> pings;
  for (int i = 0; i < samples; ++i) {
    const auto t0 = Clock::now();
    connection->call(rpc::Cmd::ping, rpc::Writer{});
    pings.push_back(seconds_since(t0));
  }
  w.ping = median(pings);
  return w;
}

// The same worker code over TLS 1.3 (a certificate made for the run) and
// over plain TCP, measured turn about: what TLS costs in throughput and in
// each round trip (docs/security.md "TLS" has the goals).
void compare_tls(const RpcBenchOptions& o, const std::string& plain_endpoint, const std::vector<uint8_t>& data) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("weft-bench-tls-" + std::to_string(::getpid()));
  auto cpu = make_cpu_device(o.n_threads);
  rpc::WorkerOptions wo;
  wo.log = false;
  wo.tls_cert = dir / "cert.pem";
  wo.tls_key = dir / "key.pem";
  rpc::make_self_signed_certificate(wo.tls_cert, wo.tls_key);
  rpc::Worker tls_worker({cpu.get()}, wo);
  tls_worker.start();
  fs::remove_all(dir);  // loaded already
  const std::string tls_endpoint =
      "tls://127.0.0.1:" + std::to_string(tls_worker.port()) + "#" + tls_worker.tls_fingerprint();
  const int samples = std::max(1, o.latency_samples);
  Wire plain, tls;
  for (int round = 0; round < 2; ++round) {  // turn about, best of both rounds
    const Wire p = measure_wire(plain_endpoint, data, samples), t = measure_wire(tls_endpoint, data, samples);
    plain.upload = std::max(plain.upload, p.upload);
    tls.upload = std::max(tls.upload, t.upload);
    plain.ping = round == 0 ? p.ping : std::min(plain.ping, p.ping);
    tls.ping = round == 0 ? t.ping : std::min(tls.ping, t.ping);
  }
  std::printf(
      "TLS 1.3 (AES-128-GCM): upload %.2f GB/s against plain %.2f GB/s, ratio %.3f; PING %.1f us against %.1f us, "
      "%+.1f us per round trip\n",
      tls.upload / 1e9, plain.upload / 1e9, tls.upload / plain.upload, tls.ping * 1e6, plain.ping * 1e6,
      (tls.ping - plain.ping) * 1e6);
  tls_worker.stop();
}

void run(const RpcBenchOptions& o) {
  std::unique_ptr<Device> worker_cpu;
  std::unique_ptr<rpc::Worker> worker;
  std::string endpoint = o.endpoint;
  if (endpoint.empty()) {
    worker_cpu = make_cpu_device(o.n_threads);
    rpc::WorkerOptions wo;
    wo.log = false;
    worker = std::make_unique<rpc::Worker>(std::vector<Device*>{worker_cpu.get()}, wo);
    worker->start();
    endpoint = "127.0.0.1:" + std::to_string(worker->port());
  }
  RpcOptions ro;
  ro.cache_min_bytes = SIZE_MAX;  // plain uploads: this measures the wire, not the tensor cache
  auto devices = make_rpc_devices(endpoint, ro);
  Device& remote = *devices[0];
  std::printf("worker %s%s: %s\n", endpoint.c_str(), worker ? " (in-process)" : "", remote.description().c_str());
  auto backend = remote.create_backend();  // holds the connection for the whole run

  // Upload throughput against raw loopback TCP: best of five each,
  // interleaved so that both see the same machine.
  const size_t bytes = o.upload_bytes / 4 * 4;
  Context ctx;
  Tensor* big = ctx.new_tensor(DType::i32, {static_cast<int64_t>(bytes / 4)});
  std::vector<Tensor*> bigs{big};
  auto big_buffer = allocate_tensors(remote.default_buffer_type(), bigs);
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 131);
  double upload = 0, tcp = 0;
  int32_t probe = 0;
  for (int i = 0; i < 5; ++i) {
    tcp = std::max(tcp, rpc::measure_loopback_tcp_bandwidth(bytes));
    const auto t0 = Clock::now();
    tensor_set(*big, data.data(), 0, bytes);
    tensor_get(*big, &probe, 0, sizeof probe);  // a reply: the worker has every byte
    upload = std::max(upload, static_cast<double>(bytes) / seconds_since(t0));
  }
  std::printf("upload %zu MiB: %.2f GB/s; raw loopback TCP %.2f GB/s; ratio %.3f\n", bytes >> 20, upload / 1e9,
              tcp / 1e9, upload / tcp);

  // Round trip of a small command against a raw TCP round trip.
  const int n = std::max(1, o.latency_samples);
  std::vector<double> gets, pings;
  auto connection = rpc::find_connection(endpoint);
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    tensor_get(*big, &probe, 0, sizeof probe);
    gets.push_back(seconds_since(t0));
    t0 = Clock::now();
    connection->call(rpc::Cmd::ping, rpc::Writer{});
    pings.push_back(seconds_since(t0));
  }
  const double raw = loopback_round_trip(n);
  std::printf(
      "round trip (median of %d): 4-byte GET_TENSOR %.1f us, PING %.1f us; raw loopback TCP %.1f us; "
      "ratio GET/raw %.2f\n",
      n, median(gets) * 1e6, median(pings) * 1e6, raw * 1e6, median(gets) / raw);
  big_buffer.reset();
  connection.reset();

  // A chain of small graphs per token, locally and through the worker.
  auto cpu = make_cpu_device(o.n_threads);
  auto local_backend = cpu->create_backend();
  Chain local(o.chain_graphs, 256), far(o.chain_graphs, 256);
  local.place(cpu->default_buffer_type());
  far.place(remote.default_buffer_type());
  std::vector<float> local_out, far_out;
  const double local_tps = tokens_per_second(local, *local_backend, o.tokens, &local_out);
  const uint64_t sent0 = rpc_stats(endpoint).bytes_sent;
  const double far_tps = tokens_per_second(far, *backend, o.tokens, &far_out);
  const double sent_per_token = static_cast<double>(rpc_stats(endpoint).bytes_sent - sent0) / (o.tokens + 1);
  double diff = 0;
  for (size_t i = 0; i < local_out.size(); ++i)
    diff = std::max(diff, static_cast<double>(std::fabs(local_out[i] - far_out[i])));
  std::printf(
      "chain of %d graphs ([256,256] mul_mat + silu each), one token: local CPU %.1f tok/s, remote %.1f "
      "tok/s; ratio %.3f (%.0f bytes sent per token; max |local - remote| %.2g)\n",
      o.chain_graphs, local_tps, far_tps, far_tps / local_tps, sent_per_token, diff);
  if (worker) compare_tls(o, endpoint, data);
}

}  // namespace

int run_rpc_bench(const RpcBenchOptions& options) {
  try {
    run(options);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench rpc: %s\n", e.what());
    return 1;
  }
}

}  // namespace weft::bench
