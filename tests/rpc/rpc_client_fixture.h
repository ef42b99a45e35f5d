// What the RPC client tests share: an in-process worker on loopback and a
// small graph (y = silu(W x)) with its expected result.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "server/worker_testing.h"
#include "weft/backend/cpu.h"
#include "weft/core/context.h"
#include "weft/core/ops.h"
#include "weft/rpc/client.h"
#include "weft/rpc/worker.h"

namespace weft::rpc_test {

// A worker serving one CPU device (or the given device) on 127.0.0.1 at a
// free port.
struct LocalWorker {
  // refuse: ops the worker answers as unsupported (rpc::WorkerTestAccess::refuse_ops).
  explicit LocalWorker(rpc::WorkerOptions options = {}, int threads = 2, const std::vector<Op>& refuse = {})
      : LocalWorker(make_cpu_device(threads), options, refuse) {}
  explicit LocalWorker(std::unique_ptr<Device> device, rpc::WorkerOptions options = {},
                       const std::vector<Op>& refuse = {})
      : cpu(std::move(device)) {
    options.log = false;
    worker = std::make_unique<rpc::Worker>(std::vector<Device*>{cpu.get()}, options);
    rpc::WorkerTestAccess::refuse_ops(*worker, refuse);
    worker->start();
    endpoint = "127.0.0.1:" + std::to_string(worker->port());
  }
  ~LocalWorker() { worker->stop(); }

  std::unique_ptr<Device> cpu;
  std::unique_ptr<rpc::Worker> worker;
  std::string endpoint;
};

inline std::vector<float> pattern(size_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * scale + shift);
  return v;
}

// y = silu(W x): W f32 [k, m], x f32 [k, n]; y [m, n].
struct SiluMatmul {
  SiluMatmul(int64_t k, int64_t m, int64_t n, float seed = 0.0f)
      : k_(k),
        m_(m),
        n_(n),
        w_data(pattern(static_cast<size_t>(k * m), 0.37f, seed)),
        x_data(pattern(static_cast<size_t>(k * n), 0.11f, seed + 1.0f)) {
    w = ctx.new_tensor(DType::f32, {k, m});
    x = ctx.new_tensor(DType::f32, {k, n});
    w->name = "w";
    x->name = "x";
    y = ops::silu(ctx, ops::mul_mat(ctx, w, x));
    y->name = "y";
    g.expand(y);
  }
  // Every tensor in one new buffer of bt; then the inputs are uploaded.
  std::unique_ptr<Buffer> allocate(BufferType& bt) {
    std::vector<Tensor*> all(g.leafs().begin(), g.leafs().end());
    all.insert(all.end(), g.nodes().begin(), g.nodes().end());
    auto buf = allocate_tensors(bt, all);
    tensor_set(*w, w_data.data(), 0, w->nbytes());
    tensor_set(*x, x_data.data(), 0, x->nbytes());
    return buf;
  }
  std::vector<float> expected() const {
    std::vector<float> out(static_cast<size_t>(m_ * n_));
    for (int64_t j = 0; j < n_; ++j) {
      for (int64_t i = 0; i < m_; ++i) {
        double s = 0;
        for (int64_t l = 0; l < k_; ++l) {
          s += static_cast<double>(w_data[static_cast<size_t>(i * k_ + l)]) * x_data[static_cast<size_t>(j * k_ + l)];
        }
        out[static_cast<size_t>(j * m_ + i)] = static_cast<float>(s / (1.0 + std::exp(-s)));
      }
    }
    return out;
  }
  std::vector<float> result() const {
    std::vector<float> out(static_cast<size_t>(y->nelements()));
    tensor_get(*y, out.data(), 0, y->nbytes());
    return out;
  }
  // Whether result() matches expected() to float rounding.
  bool correct() const {
    const std::vector<float> got = result();
    const std::vector<float> want = expected();
    for (size_t i = 0; i < got.size(); ++i) {
      if (!(std::fabs(got[i] - want[i]) <= 1e-3f * (1.0f + std::fabs(want[i])))) return false;
    }
    return true;
  }

  int64_t k_, m_, n_;
  std::vector<float> w_data, x_data;
  Context ctx;
  Tensor* w;
  Tensor* x;
  Tensor* y;
  Graph g;
};

}  // namespace weft::rpc_test
