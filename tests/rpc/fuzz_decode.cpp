// libFuzzer target for the protocol decoders (docs/rpc-protocol.md sections
// 2 to 4). The first byte picks what to decode: the low byte of a command
// code (0x30 GRAPH_COMPUTE, 0xFF ERROR, 0x90 a GET_DEVICES reply, ...), any
// other value an entry by remainder; the rest is the payload. Graphs are
// decoded against two real 4 KiB CPU buffers (handles 1 and 2), and graphs
// that pass validation are also computed on the CPU (when their cost is
// small): a graph the worker accepts must be safe to run. weft::Error is the expected outcome of a bad
// input; anything else escaping, or any sanitizer report, is a bug.
//
//   cmake -S . -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DWEFT_FUZZ=ON
//   ninja -C build/fuzz weft_fuzz_rpc
//   mkdir -p build/fuzz/corpus
//   build/fuzz/tests/rpc/weft_fuzz_rpc -max_total_time=30 -timeout=10 -artifact_prefix=build/fuzz/ \
//       build/fuzz/corpus tests/rpc/fuzz_corpus
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "protocol/graph_codec.h"
#include "protocol/wire.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/core/graph_cost.h"

namespace {

using weft::rpc::Cmd;
using weft::rpc::Reader;

struct Fixture {
  std::unique_ptr<weft::Device> cpu = weft::make_cpu_device(1);
  std::unique_ptr<weft::Buffer> buffers[2] = {cpu->default_buffer_type().allocate(4096),
                                              cpu->default_buffer_type().allocate(4096)};
  std::unique_ptr<weft::Backend> backend = cpu->create_backend();
  bool compute = std::getenv("WEFT_FUZZ_DECODE_ONLY") == nullptr;
};

Fixture& fixture() {
  static Fixture f;
  static bool cleared = [] {
    for (auto& b : f.buffers) b->clear(0);
    return true;
  }();
  (void)cleared;
  return f;
}

// Graphs the decoder accepts are computed when they are as cheap as a
// worker with these limits would run quickly: a graph the worker accepts
// must be safe to run. (WEFT_FUZZ_DECODE_ONLY=1 turns computing off.)
constexpr uint64_t kMaxFuzzCost = uint64_t{1} << 24;     // multiply-adds + bytes
constexpr size_t kMaxFuzzScratch = size_t{64} << 20;

void decode_graph_compute(Reader& r) {
  Fixture& f = fixture();
  r.u32("device");
  r.u64("graph_id");
  if (r.u8("has_graph") == 0) {
    r.expect_end();
    return;
  }
  auto buffer_of = [&](uint64_t h) -> weft::Buffer* { return h == 1 || h == 2 ? f.buffers[h - 1].get() : nullptr; };
  auto supports = [&](const weft::Tensor& t) { return f.cpu->supports_op(t); };
  auto decoded = weft::rpc::decode_graph(r, buffer_of, supports);
  r.expect_end();
  if (f.compute && weft::graph_cost(decoded->graph).total() < kMaxFuzzCost &&
      f.backend->working_bytes(decoded->graph) < kMaxFuzzScratch) {
    f.backend->compute(decoded->graph);
    f.backend->synchronize();
  }
}

void decode_get_devices_reply(Reader& r) {
  const uint32_t n = r.u32("n");
  if (n > weft::rpc::kMaxDevices) weft::fail(weft::ErrorKind::invalid_input, "rpc fuzz", "too many devices");
  for (uint32_t i = 0; i < n; ++i) {
    r.str(weft::rpc::kMaxString, "name");
    r.str(weft::rpc::kMaxString, "description");
    r.u8("kind");
    r.u64("free");
    r.u64("total");
    r.str(weft::rpc::kMaxString, "buffer_type_name");
    r.u64("alignment");
    r.u64("max_size");
  }
}

// The request fields of section 3 (and two replies a client decodes).
void decode(uint8_t selector, Reader& r) {
  switch (selector) {
    case 0x01: r.bytes(4, "magic"); r.u16("major"); r.u16("minor"); r.u64("capabilities"); break;
    case 0x81:  // HELLO reply
      r.bytes(4, "magic"); r.u16("major"); r.u16("minor"); r.u64("capabilities"); r.u8("auth_required");
      r.bytes(weft::rpc::kChallengeBytes, "challenge");
      break;
    case 0x02: r.bytes(weft::rpc::kAuthMacBytes, "mac"); break;
    case 0x10: break;
    case 0x90: decode_get_devices_reply(r); break;
    case 0x11: r.u32("device"); r.u64("size"); break;
    case 0x12: r.u64("handle"); break;
    case 0x13: r.u64("handle"); r.u8("value"); break;
    case 0x20: {
      r.u64("handle");
      r.u64("offset");
      const uint64_t size = r.u64("size");
      r.bytes(size, "data");
      break;
    }
    case 0x21: r.u64("handle"); r.u64("offset"); r.u64("size"); r.bytes(weft::rpc::kHashBytes, "hash"); break;
    case 0x22: r.u64("handle"); r.u64("offset"); r.u64("size"); break;
    case 0x23:
      r.u64("src_handle"); r.u64("src_offset"); r.u64("dst_handle"); r.u64("dst_offset"); r.u64("size");
      break;
    case 0x24: r.u64("handle"); r.u64("offset"); r.u64("size"); r.u8("value"); break;
    case 0x30: decode_graph_compute(r); return;
    case 0x31: r.u32("device"); break;
    case 0x40:
    case 0x41: r.u32("device"); r.u64("event_id"); break;
    case 0x42: r.u64("event_id"); break;
    case 0x50: break;
    case 0xFF: r.u8("kind"); r.str(weft::rpc::kMaxString, "message"); break;
    default: {
      static constexpr uint8_t kAll[] = {0x01, 0x81, 0x02, 0x10, 0x90, 0x11, 0x12, 0x13, 0x20, 0x21, 0x22,
                                         0x23, 0x24, 0x30, 0x31, 0x40, 0x41, 0x42, 0x50, 0xFF};
      decode(kAll[selector % sizeof kAll], r);
      return;
    }
  }
  r.expect_end();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // Header codec and command table: pure functions, must not trip on anything.
  if (size > weft::rpc::kFrameHeaderBytes) {
    const weft::rpc::FrameHeader h = weft::rpc::decode_header(data + 1);
    uint8_t back[weft::rpc::kFrameHeaderBytes];
    weft::rpc::encode_header(h, back);
    if (__builtin_memcmp(back, data + 1, sizeof back) != 0) __builtin_trap();
    if (weft::rpc::is_known(h.command)) {
      (void)weft::rpc::payload_limit(static_cast<Cmd>(h.command));
      (void)weft::rpc::has_reply(static_cast<Cmd>(h.command));
    }
    (void)weft::rpc::cmd_name(h.command);
  }
  Reader r(std::span<const uint8_t>(data + 1, size - 1), "fuzz");
  try {
    decode(data[0], r);
  } catch (const weft::Error&) {
    // A refused input: expected.
  }
  return 0;
}
