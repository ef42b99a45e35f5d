// The wire format of docs/rpc-protocol.md: constants, frame headers, and a
// little-endian field writer and bounds-checked reader. No I/O here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft::rpc {

inline constexpr char kMagic[4] = {'W', 'E', 'F', 'T'};
inline constexpr uint16_t kMajor = 1;
// 1.1: SUPPORTS_OP; 1.2: ops gelu_erf sigmoid softcap rope_ext; 1.3: flash_attn;
// 1.4: flash_attn takes q8_0 k and v; 1.5: peer links (worker-to-worker pushes);
// 1.6: mul_mat_id's id_base (a slice of experts), nonzero op_params an op
// does not read refused, COMPUTE_STATS; 1.7: op routed_rows,
// SET_TENSOR_ROWS and GET_TENSOR_ROWS (tensors most of whose rows are zero);
// 1.8: tls:// peer endpoints; 1.9: op swiglu_oai, soft_max's sinks (src[2]),
// the mxfp4 dtype (a client sends none of these to an older worker);
// 1.10: HEARTBEAT frames (capability bit 4) from a busy worker.
inline constexpr uint16_t kMinor = 10;

// Sources a tensor record carries (graph_codec.h, SUPPORTS_OP's src_mask).
// weft::kMaxSrc may be larger: a node using a source past these (flash_attn's
// sinks) is never sent (minor_needed says no minor carries it).
inline constexpr int kWireSrc = 4;

enum Capability : uint64_t {
  kCapTensorCache = 1u << 0,
  kCapEvents = 1u << 1,
  kCapOpSupport = 1u << 2,  // 1.1: the worker answers SUPPORTS_OP
  kCapPeerLinks = 1u << 3,  // 1.5: PEER_TICKET, PEER_CONNECT, PUSH_TO_PEER, PEER_WAIT (section 8)
  kCapHeartbeat = 1u << 4,  // 1.10: the worker sends HEARTBEAT frames while busy (section 2a)
};

enum class Cmd : uint16_t {
  hello = 0x0001,
  auth = 0x0002,
  get_devices = 0x0010,
  alloc_buffer = 0x0011,
  free_buffer = 0x0012,
  clear_buffer = 0x0013,
  supports_op = 0x0014,
  set_tensor = 0x0020,
  set_tensor_hash = 0x0021,
  get_tensor = 0x0022,
  copy_tensor = 0x0023,
  memset_tensor = 0x0024,
  set_tensor_rows = 0x0025,  // 1.7
  get_tensor_rows = 0x0026,  // 1.7
  graph_compute = 0x0030,
  synchronize = 0x0031,
  compute_stats = 0x0032,  // 1.6
  event_record = 0x0040,
  event_wait = 0x0041,
  event_sync = 0x0042,
  ping = 0x0050,
  peer_ticket = 0x0060,
  peer_connect = 0x0061,
  peer_attach = 0x0062,
  peer_push = 0x0063,
  push_to_peer = 0x0064,
  peer_wait = 0x0065,
  error = 0xFFFF,
};
inline constexpr uint16_t kReplyBit = 0x8000;
// HEARTBEAT (section 2a): an empty frame a worker sends unasked, with
// capability bit 4 echoed, while it is busy with this session's commands
// and has sent nothing for kHeartbeatEvery; the client skips it wherever it
// reads a reply. Its code has the reply bit, so no worker takes it as a
// request.
inline constexpr uint16_t kHeartbeatFrame = 0x8051;
inline constexpr uint32_t kHeartbeatEveryMs = 250;

// The limits of section 2.
inline constexpr uint32_t kMaxSetTensorPayload = 64u << 20;
inline constexpr uint32_t kMaxPayload = 16u << 20;
inline constexpr uint32_t kMaxString = 4096;
inline constexpr uint32_t kMaxDevices = 64;
inline constexpr uint32_t kMaxBuffersPerSession = 65536;
inline constexpr uint32_t kMaxGraphTensors = 262144;
inline constexpr uint32_t kMaxGraphsPerSession = 64;
inline constexpr uint32_t kMaxEventsPerSession = 4096;
inline constexpr uint32_t kMaxPeerLinksPerSession = 64;  // PEER_CONNECT links a session opens
inline constexpr uint32_t kMaxPeerSources = 64;          // peer links attached to one session
inline constexpr size_t kTicketBytes = 32;
inline constexpr size_t kFrameHeaderBytes = 8;
inline constexpr size_t kAuthMacBytes = 32;
inline constexpr size_t kChallengeBytes = 32;
inline constexpr size_t kHashBytes = 16;

// Whether a known command (a request code of section 3 or ERROR; reply
// codes, with kReplyBit, are not); what it may carry; whether it has a reply.
// cmd_name gives the spec's name ("GRAPH_COMPUTE"; "GRAPH_COMPUTE reply" with
// kReplyBit; "unknown" otherwise).
bool is_known(uint16_t command);
uint32_t payload_limit(Cmd c);
bool has_reply(Cmd c);
const char* cmd_name(uint16_t command);

struct FrameHeader {
  uint32_t length = 0;  // payload bytes after the header
  uint16_t command = 0;
  uint16_t flags = 0;
};
void encode_header(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]);
FrameHeader decode_header(const uint8_t in[kFrameHeaderBytes]);

// Appends fields, little-endian.
class Writer {
 public:
  void u8(uint8_t v) { data_.push_back(v); }
  // Little-endian; inline, as a graph's encoding is thousands of them per
  // token.
  void u16(uint16_t v) { put(v); }
  void u32(uint32_t v) { put(v); }
  void u64(uint64_t v) { put(v); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f32(float v);
  // u32 length + bytes. Throws Error(invalid_input) for more than kMaxString
  // bytes (the peer would refuse it): shorten long messages first.
  void str(std::string_view s);
  void bytes(const void* p, size_t n);
  std::vector<uint8_t>& data() { return data_; }
  const std::vector<uint8_t>& data() const { return data_; }

 private:
  // Grows by resize and writes in place: GCC 12 misreads a range insert at
  // end() here as a possible overlap (-Wrestrict, -Wstringop-overflow).
  template <class T>
  void put(T v) {
    const size_t at = data_.size();
    data_.resize(at + sizeof(T));
    for (size_t i = 0; i < sizeof(T); ++i) data_[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }

  std::vector<uint8_t> data_;
};

// Reads fields from a payload. Every read is bounds-checked: reading past
// the end throws Error(invalid_input, "[rpc <what>] truncated: ...") naming
// the field (field, when given, else its type), where it starts and how many
// bytes were left. The bytes behind data must outlive the Reader.
//
//   Reader r(payload, "ALLOC_BUFFER");
//   uint32_t device = r.u32("device");
//   uint64_t size = r.u64("size");
//   r.expect_end();
class Reader {
 public:
  Reader(std::span<const uint8_t> data, std::string what) : data_(data), what_(std::move(what)) {}
  uint8_t u8(const char* field = nullptr);
  uint16_t u16(const char* field = nullptr);
  uint32_t u32(const char* field = nullptr);
  uint64_t u64(const char* field = nullptr);
  int32_t i32(const char* field = nullptr) { return static_cast<int32_t>(u32(field ? field : "i32")); }
  int64_t i64(const char* field = nullptr) { return static_cast<int64_t>(u64(field ? field : "i64")); }
  float f32(const char* field = nullptr);
  // A string of at most max_length bytes (a longer one throws).
  std::string str(uint32_t max_length = kMaxString, const char* field = nullptr);
  // A view into the payload, valid as long as the payload.
  std::span<const uint8_t> bytes(size_t n, const char* field = nullptr);
  size_t position() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  // Throws unless every byte was read (no trailing garbage).
  void expect_end() const;
  const std::string& what() const { return what_; }

 private:
  const uint8_t* take(size_t n, const char* field);
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace weft::rpc
