// libFuzzer target for the protocol decoders (docs/rpc-protocol.md sections
// 2 to 4). The first byte picks what to decode: the low byte of a command
// code (0x30 GRAPH_COMPUTE, 0x14 SUPPORTS_OP, 0xFF ERROR, 0x90 a GET_DEVICES
// reply, ...; protocol/messages.h decodes each), any
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
#include "protocol/messages.h"
#include "protocol/op_query.h"
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
  const auto req = weft::rpc::GraphComputeRequest::decode(r);
  r.expect_end();
  if (!req.has_graph) return;
  Reader g(req.graph, "GRAPH_COMPUTE");
  auto buffer_of = [&](uint64_t h) -> weft::Buffer* { return h == 1 || h == 2 ? f.buffers[h - 1].get() : nullptr; };
  auto supports = [&](const weft::Tensor& t) { return f.cpu->supports_op(t); };
  auto decoded = weft::rpc::decode_graph(g, buffer_of, supports);
  g.expect_end();
  if (f.compute && weft::graph_cost(decoded->graph).total() < kMaxFuzzCost &&
      f.backend->working_bytes(decoded->graph) < kMaxFuzzScratch) {
    f.backend->compute(decoded->graph);
    f.backend->synchronize();
  }
}

// SUPPORTS_OP as the worker answers it: the node rebuilt and validated,
// then the CPU's rule asked about it.
void decode_supports_op(Reader& r) {
  const auto req = weft::rpc::SupportsOpRequest::decode(r);
  r.expect_end();
  const auto q = weft::rpc::rebuild_queried_node(req);
  (void)fixture().cpu->supports_op(*q->node);
}

template <class M>
void decode_as(Reader& r) {
  (void)M::decode(r);
  r.expect_end();
}

// A GET_TENSOR_ROWS reply is read against its request's row_bytes and
// n_rows: the first 12 bytes give them.
void decode_rows_reply(Reader& r) {
  const uint64_t row_bytes = r.u64("row_bytes");
  const uint32_t n_rows = r.u32("n_rows");
  (void)weft::rpc::GetTensorRowsReply::decode(r, row_bytes, n_rows);
}

// The messages of section 3 (protocol/messages.h), requests and replies.
void decode(uint8_t selector, Reader& r) {
  using namespace weft::rpc;
  switch (selector) {
    case 0x01: return decode_as<HelloRequest>(r);
    case 0x81: return decode_as<HelloReply>(r);
    case 0x02: return decode_as<AuthRequest>(r);
    case 0x10: return decode_as<GetDevicesRequest>(r);
    case 0x90: return decode_as<GetDevicesReply>(r);
    case 0x11: return decode_as<AllocBufferRequest>(r);
    case 0x91: return decode_as<AllocBufferReply>(r);
    case 0x12: return decode_as<FreeBufferRequest>(r);
    case 0x13: return decode_as<ClearBufferRequest>(r);
    case 0x14: return decode_supports_op(r);
    case 0x94: return decode_as<SupportsOpReply>(r);
    case 0x20: return decode_as<SetTensorRequest>(r);
    case 0x21: return decode_as<SetTensorHashRequest>(r);
    case 0xA1: return decode_as<SetTensorHashReply>(r);
    case 0x22: return decode_as<GetTensorRequest>(r);
    case 0x23: return decode_as<CopyTensorRequest>(r);
    case 0x24: return decode_as<MemsetTensorRequest>(r);
    case 0x25: return decode_as<SetTensorRowsRequest>(r);
    case 0x26: return decode_as<GetTensorRowsRequest>(r);
    case 0xA6: return decode_rows_reply(r);
    case 0x30: return decode_graph_compute(r);
    case 0x31: return decode_as<SynchronizeRequest>(r);
    case 0x32: return decode_as<ComputeStatsRequest>(r);
    case 0xB2: return decode_as<ComputeStatsReply>(r);
    case 0x40: return decode_as<EventRecordRequest>(r);
    case 0x41: return decode_as<EventWaitRequest>(r);
    case 0x42: return decode_as<EventSyncRequest>(r);
    case 0x50: return decode_as<PingRequest>(r);
    case 0x60: return decode_as<PeerTicketRequest>(r);
    case 0xE0: return decode_as<PeerTicketReply>(r);
    case 0x61: return decode_as<PeerConnectRequest>(r);
    case 0x62: return decode_as<PeerAttachRequest>(r);
    case 0x63: return decode_as<PeerPushRequest>(r);
    case 0x64: return decode_as<PushToPeerRequest>(r);
    case 0x65: return decode_as<PeerWaitRequest>(r);
    case 0xFF: return decode_as<ErrorReply>(r);
    default: {
      static constexpr uint8_t kAll[] = {0x01, 0x81, 0x02, 0x10, 0x90, 0x11, 0x91, 0x12, 0x13, 0x14, 0x94, 0x20,
                                         0x21, 0xA1, 0x22, 0x23, 0x24, 0x25, 0x26, 0xA6, 0x30, 0x31, 0x32, 0xB2,
                                         0x40, 0x41, 0x42, 0x50, 0x60, 0xE0, 0x61, 0x62, 0x63, 0x64, 0x65, 0xFF};
      return decode(kAll[selector % sizeof kAll], r);
    }
  }
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
