// weft_fuzz_worker's racing sessions (fuzz_structured.h lists the parts):
// two to five sessions on threads of their own at once, mostly doing real
// work that must succeed (valid graphs, bytes read back), beside sessions
// that drop mid-frame, mid-compute or mid-handshake, and now and then one
// that stalls mid-frame until the worker's io_timeout ends it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_structured.h"
#include "protocol/wire.h"
#include "weft/core/ops.h"
#include "worker_wire.h"

namespace weft::rpc::fuzz {

using namespace wtest;

namespace {

// A graph big enough that a close during it lands mid-compute.
void heavy_compute(Conn& c, Rng& rng) {
  Placed p;
  const int64_t k = 32 * pick(rng, 4, 16), m = pick(rng, 64, 256), n = pick(rng, 16, 64);
  Tensor* a = p.b.input(DType::f32, {k, m, 1, 1});
  Tensor* x = p.b.input(DType::f32, {k, n, 1, 1});
  p.b.output(ops::silu(p.ctx, ops::mul_mat(p.ctx, a, x)), 0.0);
  p.finish();
  const uint64_t h = c.alloc(0, p.bytes);
  const Bytes g = p.encode(h);
  c.compute(0, 1, &g);
  c.compute(0, 1, nullptr);
}

// One racing session. Kind 0 does real work and must succeed; the others
// misbehave (their own errors are expected and ignored).
void race(int kind, uint64_t seed) {
  Rng rng(seed);
  try {
    switch (kind) {
      case 0: {
        Conn c(env->worker->port());
        c.handshake();
        for (int i = static_cast<int>(pick(rng, 2, 5)); i > 0; --i) {
          if (chance(rng, 0.6)) {
            std::string d = "racing: ";
            run_valid(c, rng, true, d);
          } else {
            const uint64_t size = static_cast<uint64_t>(pick(rng, 1, 1 << 16));
            const uint64_t h = c.alloc(static_cast<uint32_t>(pick(rng, 0, 1)), size);
            const Bytes b = random_bytes(rng, size);
            c.set(h, 0, b.data(), b.size());
            EXPECT_EQ(c.get(h, 0, size), b) << "racing session read back other bytes";
            c.free_buffer(h);
          }
        }
        c.ping();
        break;
      }
      case 1: {  // half a frame, then gone
        Conn c(env->worker->port());
        c.handshake();
        const uint64_t h = c.alloc(0, 4096);
        const Bytes first = random_bytes(rng, 1000);
        Bytes half = encoded(SetTensorRequest{h, 0, 4096, first}).data();  // 1000 of the 4096 bytes it announces
        half.resize(static_cast<size_t>(pick(rng, 0, static_cast<int64_t>(half.size()))));
        c.send(static_cast<uint16_t>(Cmd::set_tensor), half, 0, SetTensorRequest::kHeadBytes + 4096);
        c.close();
        break;
      }
      case 2: {  // gone mid-compute
        Conn c(env->worker->port());
        c.handshake();
        heavy_compute(c, rng);
        std::this_thread::sleep_for(std::chrono::milliseconds(pick(rng, 0, 20)));
        c.close();
        break;
      }
      case 3: {  // gone mid-handshake: part of HELLO, then closed
        Conn c(env->worker->port());
        Bytes hello = hello_payload();
        const auto full = static_cast<uint32_t>(hello.size());
        hello.resize(static_cast<size_t>(pick(rng, 0, full - 1)));
        c.send(static_cast<uint16_t>(Cmd::hello), hello, 0, full);
        c.close();
        break;
      }
      default: {  // stalls mid-frame: the worker must end the session by itself
        Conn c(env->worker->port());
        c.handshake();
        c.send(static_cast<uint16_t>(Cmd::get_tensor), Bytes(10, 0), 0, 24);
        EXPECT_TRUE(c.closed_by_peer()) << "a session stalled mid-frame was kept";
      }
    }
  } catch (const Error& e) {
    if (kind == 0 || kind == 4) ADD_FAILURE() << "racing session (kind " << kind << "): " << e.what();
  }
}

}  // namespace

void run_racing(Rng& rng, std::string& desc) {
  const int n = static_cast<int>(pick(rng, 2, 5));
  std::vector<std::thread> threads;
  desc += "sessions:";
  for (int i = 0; i < n; ++i) {
    // Mostly real work; a stall costs the worker's io_timeout (3 s): rare.
    const int r = static_cast<int>(pick(rng, 0, 19));
    const int kind = r < 10 ? 0 : r < 13 ? 1 : r < 16 ? 2 : r < 19 ? 3 : chance(rng, 0.3) ? 4 : 0;
    desc += ' ';
    desc += std::to_string(kind);
    threads.emplace_back(race, kind, rng());
  }
  set_case_line(desc);
  for (std::thread& t : threads) t.join();
}

}  // namespace weft::rpc::fuzz
