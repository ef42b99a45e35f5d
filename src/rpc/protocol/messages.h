// Every message of docs/rpc-protocol.md section 3, declared once: one struct
// per request and per reply payload, its fields in wire order, with a
// field-by-field encode and decode over protocol/wire.h's Writer and Reader
// (never a memcpy of a struct). The client (src/rpc/client), the worker
// (src/rpc/server) and the test helpers (tests/rpc) all use these, so a field
// is added, moved or renamed in one place.
//
//   Writer w;
//   AllocBufferRequest{device, size}.encode(w);                   // client
//   auto req = parse<AllocBufferRequest>(payload);                // worker: every field, nothing after
//   AllocBufferReply{handle}.encode(reply);
//   auto got = parse<AllocBufferReply>(reply_payload).handle;     // client
//
// decode(Reader&) reads exactly the message's fields and checks what the
// format alone decides (a count under its cap, a flag that is 0 or 1, a
// string under kMaxString); a short payload or a bad value throws
// Error(invalid_input) naming the message and the field. parse<M>() also
// refuses trailing bytes. What needs a session (a handle is live, a range
// lies inside its buffer, a device index is in range) is the worker's to
// check after decoding; the SUPPORTS_OP node is checked by op_query.h.
//
// Bulk bytes (SET_TENSOR's data, GET_TENSOR's reply, GRAPH_COMPUTE's graph)
// are spans into a payload that must outlive the message. The client sends
// them beside the fields by a gather write and the worker reads SET_TENSOR's
// bytes straight into the buffer, so those two use encode_head/decode_head
// (kHeadBytes of fields) and move the bulk bytes themselves.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "protocol/wire.h"
#include "weft/core/error.h"
#include "weft/core/tensor.h"

namespace weft::rpc {

constexpr uint16_t request_code(Cmd c) { return static_cast<uint16_t>(c); }
constexpr uint16_t reply_code(Cmd c) { return static_cast<uint16_t>(static_cast<uint16_t>(c) | kReplyBit); }

// Decodes a whole payload as M: its fields, then nothing after them. The
// Reader is named after M's frame ("ALLOC_BUFFER", "ALLOC_BUFFER reply").
template <class M>
M parse(std::span<const uint8_t> payload) {
  Reader r(payload, cmd_name(M::kCode));
  M m = M::decode(r);
  r.expect_end();
  return m;
}

// A message's fields in a fresh Writer.
template <class M>
Writer encoded(const M& m) {
  Writer w;
  m.encode(w);
  return w;
}

// A payload with no fields (AUTH reply, GET_DEVICES and PING requests, ...).
template <uint16_t Code>
struct EmptyMessage {
  static constexpr uint16_t kCode = Code;
  void encode(Writer&) const {}
  static EmptyMessage decode(Reader&) { return {}; }
};

// --- handshake (section 1) ---

using Magic = std::array<uint8_t, 4>;
inline constexpr Magic kMagicBytes = {'W', 'E', 'F', 'T'};

struct HelloReply;
struct HelloRequest {
  static constexpr uint16_t kCode = request_code(Cmd::hello);
  using Reply = HelloReply;
  Magic magic = kMagicBytes;  // checked by the worker, which names the bytes it got
  uint16_t major = kMajor;
  uint16_t minor = kMinor;
  uint64_t capabilities = 0;  // bits the client understands
  void encode(Writer& w) const;
  static HelloRequest decode(Reader& r);
};

struct HelloReply {
  static constexpr uint16_t kCode = reply_code(Cmd::hello);
  Magic magic = kMagicBytes;
  uint16_t major = kMajor;
  uint16_t minor = kMinor;
  uint64_t capabilities = 0;  // the bits both sides understand
  bool auth_required = false;  // u8, any non-zero value is true
  std::array<uint8_t, kChallengeBytes> challenge{};  // zeros without auth
  void encode(Writer& w) const;
  static HelloReply decode(Reader& r);
};

using AuthReply = EmptyMessage<reply_code(Cmd::auth)>;
struct AuthRequest {
  static constexpr uint16_t kCode = request_code(Cmd::auth);
  using Reply = AuthReply;
  std::array<uint8_t, kAuthMacBytes> mac{};
  void encode(Writer& w) const;
  static AuthRequest decode(Reader& r);
};

// --- devices and buffers ---

// One device as GET_DEVICES describes it.
struct DeviceInfo {
  std::string name;
  std::string description;
  uint8_t kind = 0;  // 0 cpu, 1 gpu
  uint64_t free = 0;
  uint64_t total = 0;
  std::string buffer_type_name;
  uint64_t alignment = 1;  // a power of two up to 2^30 (decode checks)
  uint64_t max_size = 0;
};

struct GetDevicesReply {
  static constexpr uint16_t kCode = reply_code(Cmd::get_devices);
  std::vector<DeviceInfo> devices;  // at most kMaxDevices (decode checks)
  // Strings longer than kMaxString are cut to it (a device's name is text).
  void encode(Writer& w) const;
  static GetDevicesReply decode(Reader& r);
};
struct GetDevicesRequest : EmptyMessage<request_code(Cmd::get_devices)> {
  using Reply = GetDevicesReply;
  static GetDevicesRequest decode(Reader&) { return {}; }
};

struct AllocBufferReply {
  static constexpr uint16_t kCode = reply_code(Cmd::alloc_buffer);
  uint64_t handle = 0;
  void encode(Writer& w) const;
  static AllocBufferReply decode(Reader& r);
};
struct AllocBufferRequest {
  static constexpr uint16_t kCode = request_code(Cmd::alloc_buffer);
  using Reply = AllocBufferReply;
  uint32_t device = 0;
  uint64_t size = 0;
  void encode(Writer& w) const;
  static AllocBufferRequest decode(Reader& r);
};

struct FreeBufferRequest {
  static constexpr uint16_t kCode = request_code(Cmd::free_buffer);
  uint64_t handle = 0;
  void encode(Writer& w) const;
  static FreeBufferRequest decode(Reader& r);
};

struct ClearBufferRequest {
  static constexpr uint16_t kCode = request_code(Cmd::clear_buffer);
  uint64_t handle = 0;
  uint8_t value = 0;
  void encode(Writer& w) const;
  static ClearBufferRequest decode(Reader& r);
};

// --- tensor data ---

// handle, offset, size, then bytes[size]. size is a field of its own (a
// hostile test may make it disagree with data); encode writes both as given.
struct SetTensorRequest {
  static constexpr uint16_t kCode = request_code(Cmd::set_tensor);
  static constexpr uint32_t kHeadBytes = 24;
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  std::span<const uint8_t> data;  // decode: a view into the payload
  void encode_head(Writer& w) const;
  void encode(Writer& w) const;  // head, then data
  static SetTensorRequest decode_head(Reader& r);
  static SetTensorRequest decode(Reader& r);  // head, then size bytes
};

struct SetTensorHashReply {
  static constexpr uint16_t kCode = reply_code(Cmd::set_tensor_hash);
  bool found = false;  // u8, any non-zero value is true
  void encode(Writer& w) const;
  static SetTensorHashReply decode(Reader& r);
};
struct SetTensorHashRequest {
  static constexpr uint16_t kCode = request_code(Cmd::set_tensor_hash);
  using Reply = SetTensorHashReply;
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  std::array<uint8_t, kHashBytes> hash{};
  void encode(Writer& w) const;
  static SetTensorHashRequest decode(Reader& r);
};

// The bytes asked for; the client reads them straight into the caller's
// memory, so only tests and the fuzzer decode this.
struct GetTensorReply {
  static constexpr uint16_t kCode = reply_code(Cmd::get_tensor);
  std::span<const uint8_t> data;
  void encode(Writer& w) const;
  static GetTensorReply decode(Reader& r);  // every remaining byte
};
struct GetTensorRequest {
  static constexpr uint16_t kCode = request_code(Cmd::get_tensor);
  using Reply = GetTensorReply;
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  void encode(Writer& w) const;
  static GetTensorRequest decode(Reader& r);
};

// 1.7. Writes the range [offset, offset + row_bytes * n_rows) of a buffer
// as zeros except the rows listed, which get the bytes that follow: a tensor
// most of whose rows are zero (kFlagSparseRows) sent without them. rows:
// strictly ascending, each < n_rows; data: row_bytes bytes per listed row.
// The counts are fields of their own; decode checks that the payload holds
// exactly what they say.
struct SetTensorRowsRequest {
  static constexpr uint16_t kCode = request_code(Cmd::set_tensor_rows);
  static constexpr uint32_t kHeadBytes = 32;  // handle, offset, row_bytes, n_rows, count
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint64_t row_bytes = 0;
  uint32_t n_rows = 0;
  std::vector<uint32_t> rows;
  std::span<const uint8_t> data;  // decode: a view into the payload
  void encode_head(Writer& w) const;  // the fields and the row list
  void encode(Writer& w) const;       // head, then data
  static SetTensorRowsRequest decode(Reader& r);
};

// 1.7. Reads the range [offset, offset + row_bytes * n_rows) of a buffer as
// the rows that are not all zero bytes: the reply lists them (count, then
// the ascending row numbers) and carries their bytes; every row not listed is
// zeros. The worker refuses a range whose reply could exceed one frame.
struct GetTensorRowsReply {
  static constexpr uint16_t kCode = reply_code(Cmd::get_tensor_rows);
  std::vector<uint32_t> rows;
  std::span<const uint8_t> data;
  void encode(Writer& w) const;
  // row_bytes and n_rows from the request: the row list must be ascending,
  // below n_rows, and the data exactly row_bytes per row.
  static GetTensorRowsReply decode(Reader& r, uint64_t row_bytes, uint32_t n_rows);
};
struct GetTensorRowsRequest {
  static constexpr uint16_t kCode = request_code(Cmd::get_tensor_rows);
  using Reply = GetTensorRowsReply;
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint64_t row_bytes = 0;
  uint32_t n_rows = 0;
  void encode(Writer& w) const;
  static GetTensorRowsRequest decode(Reader& r);
};
// The rows of data (n_rows rows of row_bytes) that are not all zero bytes,
// ascending: what SET_TENSOR_ROWS and GET_TENSOR_ROWS carry.
std::vector<uint32_t> nonzero_rows(const uint8_t* data, uint64_t row_bytes, uint32_t n_rows);
// The most bytes a GET_TENSOR_ROWS reply for n_rows rows of row_bytes may
// take (every row listed); saturates.
uint64_t rows_reply_bound(uint64_t row_bytes, uint64_t n_rows);

struct CopyTensorRequest {
  static constexpr uint16_t kCode = request_code(Cmd::copy_tensor);
  uint64_t src_handle = 0;
  uint64_t src_offset = 0;
  uint64_t dst_handle = 0;
  uint64_t dst_offset = 0;
  uint64_t size = 0;
  void encode(Writer& w) const;
  static CopyTensorRequest decode(Reader& r);
};

struct MemsetTensorRequest {
  static constexpr uint16_t kCode = request_code(Cmd::memset_tensor);
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint8_t value = 0;
  void encode(Writer& w) const;
  static MemsetTensorRequest decode(Reader& r);
};

// --- compute and ordering ---

// device, graph_id, has_graph (0 or 1, decode checks), then with has_graph
// the graph of section 4, every remaining byte (graph_codec.h decodes it).
struct GraphComputeRequest {
  static constexpr uint16_t kCode = request_code(Cmd::graph_compute);
  static constexpr uint32_t kHeadBytes = 4 + 8 + 1;
  uint32_t device = 0;
  uint64_t graph_id = 0;
  bool has_graph = false;
  std::span<const uint8_t> graph;  // empty unless has_graph
  void encode_head(Writer& w) const;
  void encode(Writer& w) const;  // head, then graph
  static GraphComputeRequest decode(Reader& r);
};

using SynchronizeReply = EmptyMessage<reply_code(Cmd::synchronize)>;
struct SynchronizeRequest {
  static constexpr uint16_t kCode = request_code(Cmd::synchronize);
  using Reply = SynchronizeReply;
  uint32_t device = 0;
  void encode(Writer& w) const;
  static SynchronizeRequest decode(Reader& r);
};

// What a device did for this session (protocol 1.6): the GRAPH_COMPUTEs it
// ran and the time spent in its compute calls (for a CPU device, the
// compute itself), so a host can show each stage's measured time.
struct ComputeStatsReply {
  static constexpr uint16_t kCode = reply_code(Cmd::compute_stats);
  uint64_t graphs = 0;
  uint64_t compute_ns = 0;
  void encode(Writer& w) const;
  static ComputeStatsReply decode(Reader& r);
};
struct ComputeStatsRequest {
  static constexpr uint16_t kCode = request_code(Cmd::compute_stats);
  using Reply = ComputeStatsReply;
  uint32_t device = 0;
  void encode(Writer& w) const;
  static ComputeStatsRequest decode(Reader& r);
};

// EVENT_RECORD and EVENT_WAIT carry the same fields.
template <Cmd C>
struct DeviceEventRequest {
  static constexpr uint16_t kCode = request_code(C);
  uint32_t device = 0;
  uint64_t event_id = 0;
  void encode(Writer& w) const {
    w.u32(device);
    w.u64(event_id);
  }
  static DeviceEventRequest decode(Reader& r) {
    DeviceEventRequest m;
    m.device = r.u32("device");
    m.event_id = r.u64("id");
    return m;
  }
};
using EventRecordRequest = DeviceEventRequest<Cmd::event_record>;
using EventWaitRequest = DeviceEventRequest<Cmd::event_wait>;

using EventSyncReply = EmptyMessage<reply_code(Cmd::event_sync)>;
struct EventSyncRequest {
  static constexpr uint16_t kCode = request_code(Cmd::event_sync);
  using Reply = EventSyncReply;
  uint64_t event_id = 0;
  void encode(Writer& w) const;
  static EventSyncRequest decode(Reader& r);
};

using PingReply = EmptyMessage<reply_code(Cmd::ping)>;
struct PingRequest : EmptyMessage<request_code(Cmd::ping)> {
  using Reply = PingReply;
  static PingRequest decode(Reader&) { return {}; }
};

// --- peer links (protocol 1.5, capability kCapPeerLinks; section 8) ---

using Ticket = std::array<uint8_t, kTicketBytes>;

struct PeerTicketReply {
  static constexpr uint16_t kCode = reply_code(Cmd::peer_ticket);
  Ticket ticket{};
  void encode(Writer& w) const;
  static PeerTicketReply decode(Reader& r);
};
struct PeerTicketRequest : EmptyMessage<request_code(Cmd::peer_ticket)> {
  using Reply = PeerTicketReply;
  static PeerTicketRequest decode(Reader&) { return {}; }
};

// Host -> worker A: open link `link` to worker B at `endpoint`, attaching
// to the session `ticket` names there as B's source `source`.
using PeerConnectReply = EmptyMessage<reply_code(Cmd::peer_connect)>;
struct PeerConnectRequest {
  static constexpr uint16_t kCode = request_code(Cmd::peer_connect);
  using Reply = PeerConnectReply;
  uint32_t link = 0;
  uint32_t source = 0;
  std::string endpoint;  // "host:port" as A dials it
  Ticket ticket{};
  std::string label;  // the host's name for A, for B's messages
  void encode(Writer& w) const;
  static PeerConnectRequest decode(Reader& r);
};

// Worker A -> worker B, first on a link: binds the connection to the session
// the ticket names, as its source `source`.
using PeerAttachReply = EmptyMessage<reply_code(Cmd::peer_attach)>;
struct PeerAttachRequest {
  static constexpr uint16_t kCode = request_code(Cmd::peer_attach);
  using Reply = PeerAttachReply;
  Ticket ticket{};
  uint32_t source = 0;
  std::string label;
  void encode(Writer& w) const;
  static PeerAttachRequest decode(Reader& r);
};

// Worker A -> worker B on a link: bytes for [dst_offset, + size) of buffer
// dst_handle of the attached session, part of event `event_id`; flags bit 0:
// the event's last part; bit 1: A failed, the bytes are its message.
inline constexpr uint8_t kPushLast = 1;
inline constexpr uint8_t kPushFailed = 2;
struct PeerPushRequest {
  static constexpr uint16_t kCode = request_code(Cmd::peer_push);
  static constexpr uint32_t kHeadBytes = 8 + 8 + 8 + 8 + 1;
  uint64_t event_id = 0;
  uint64_t dst_handle = 0;
  uint64_t dst_offset = 0;
  uint64_t size = 0;
  uint8_t flags = 0;  // decode refuses bits other than kPushLast | kPushFailed
  std::span<const uint8_t> data;  // size bytes
  void encode_head(Writer& w) const;
  static PeerPushRequest decode(Reader& r);
};
// The most bytes one PEER_PUSH carries: a larger push goes in parts.
inline constexpr uint64_t kMaxPushBytes = kMaxSetTensorPayload - PeerPushRequest::kHeadBytes;

// Host -> worker A: push [src_offset, + size) of A's buffer src_handle over
// link `link` into B's buffer dst_handle at dst_offset, as event event_id.
struct PushToPeerRequest {
  static constexpr uint16_t kCode = request_code(Cmd::push_to_peer);
  uint32_t link = 0;
  uint64_t src_handle = 0;
  uint64_t src_offset = 0;
  uint64_t size = 0;
  uint64_t dst_handle = 0;
  uint64_t dst_offset = 0;
  uint64_t event_id = 0;
  void encode(Writer& w) const;
  static PushToPeerRequest decode(Reader& r);
};

// Host -> worker B: the session's stream waits for event event_id from
// source `source`, and writes its bytes, before its next command.
struct PeerWaitRequest {
  static constexpr uint16_t kCode = request_code(Cmd::peer_wait);
  uint32_t source = 0;
  uint64_t event_id = 0;
  void encode(Writer& w) const;
  static PeerWaitRequest decode(Reader& r);
};

// --- op support (protocol 1.1, capability kCapOpSupport) ---

// A tensor's layout as SUPPORTS_OP sends it: the dtype, ne and nb fields of
// a section 4 tensor record, in the same order and encoding.
struct TensorLayout {
  uint8_t dtype = 0;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};
  uint64_t nb[kMaxDims] = {};
  static TensorLayout of(const Tensor& t);
  void encode(Writer& w) const;
  static TensorLayout decode(Reader& r);
};

struct SupportsOpReply {
  static constexpr uint16_t kCode = reply_code(Cmd::supports_op);
  bool supported = false;  // u8 0 or 1 (decode refuses anything else)
  void encode(Writer& w) const;
  static SupportsOpReply decode(Reader& r);
};

// How many Op values (0 .. n-1) a peer speaking minor version `minor` of
// major 1 knows (docs/rpc-protocol.md, "Op numbers"): the op registry's rows
// up to that minor (weft/core/op_registry.h). A peer refuses a larger op
// number as a malformed message and ends the session, so a client never
// sends one, not even in SUPPORTS_OP. A minor newer than ours knows every op
// we do.
static_assert(kOpRegistry.back().minor <= kMinor,
              "an op row names a protocol minor newer than wire.h's kMinor: raise kMinor");
constexpr int ops_known_at_minor(uint16_t minor) { return ops_known_at(minor); }

// The minor version a peer must speak to take node t: its op's
// (ops_known_at_minor), or later where a later minor widened what the op's
// constructor accepts (1.4: flash_attn with q8_0 k or v; 1.6: mul_mat_id
// with an id_base, which an older peer would ignore; 1.9: soft_max with
// sinks), or where the node or a source has a dtype a later minor added
// (1.9: mxfp4, which an older peer refuses as unknown). An older peer's
// constructor refuses the node, which ends the session, so a client never
// sends it one, not even in SUPPORTS_OP. A node no minor carries (a source
// past kWireSrc: flash_attn with sinks) gives kNoMinor.
inline constexpr uint16_t kNoMinor = UINT16_MAX;
uint16_t minor_needed(const Tensor& t);
// The minor version that added dtype t (0 for those 1.0 had).
uint16_t dtype_minor(DType t);

// Would device compute this node? device, op, the node's layout, its 16
// op_params, u8 src_mask (bit k: src[k] follows; bits 4-7 must be 0), then
// the layout of each present source in slot order. op_query.h rebuilds and
// validates the node.
struct SupportsOpRequest {
  static constexpr uint16_t kCode = request_code(Cmd::supports_op);
  using Reply = SupportsOpReply;
  uint32_t device = 0;
  uint8_t op = 0;
  TensorLayout node;
  int32_t op_params[kMaxOpParams] = {};
  std::optional<TensorLayout> src[kWireSrc];
  // The question for node t (its sources' layouts, not their data).
  static SupportsOpRequest of(uint32_t device, const Tensor& t);
  void encode(Writer& w) const;
  static SupportsOpRequest decode(Reader& r);
};

// --- errors ---

// ERROR (0xFFFF, worker to client): u8 kind, str message.
struct ErrorReply {
  static constexpr uint16_t kCode = static_cast<uint16_t>(Cmd::error);
  ErrorKind kind = ErrorKind::internal;
  std::string message;  // encode cuts it to kMaxString bytes
  void encode(Writer& w) const;
  static ErrorReply decode(Reader& r);  // an unknown kind code decodes as internal
};
uint8_t error_kind_code(ErrorKind kind);
ErrorKind error_kind_from_code(uint8_t code);

}  // namespace weft::rpc
