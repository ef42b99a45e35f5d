// Frame headers and fields, little-endian byte by byte (docs/rpc-protocol.md
// sections 2 and 3). Every read checks its bounds before touching a byte.
#include "protocol/wire.h"

#include <bit>
#include <string>

#include "weft/core/error.h"

namespace weft::rpc {

bool is_known(uint16_t command) {
  switch (static_cast<Cmd>(command)) {
    case Cmd::hello:
    case Cmd::auth:
    case Cmd::get_devices:
    case Cmd::alloc_buffer:
    case Cmd::free_buffer:
    case Cmd::clear_buffer:
    case Cmd::supports_op:
    case Cmd::set_tensor:
    case Cmd::set_tensor_hash:
    case Cmd::get_tensor:
    case Cmd::copy_tensor:
    case Cmd::memset_tensor:
    case Cmd::set_tensor_rows:
    case Cmd::get_tensor_rows:
    case Cmd::graph_compute:
    case Cmd::synchronize:
    case Cmd::compute_stats:
    case Cmd::event_record:
    case Cmd::event_wait:
    case Cmd::event_sync:
    case Cmd::ping:
    case Cmd::peer_ticket:
    case Cmd::peer_connect:
    case Cmd::peer_attach:
    case Cmd::peer_push:
    case Cmd::push_to_peer:
    case Cmd::peer_wait:
    case Cmd::error:
      return true;
  }
  return false;
}

uint32_t payload_limit(Cmd c) {
  return c == Cmd::set_tensor || c == Cmd::set_tensor_rows || c == Cmd::peer_push ? kMaxSetTensorPayload
                                                                                    : kMaxPayload;
}

bool has_reply(Cmd c) {
  switch (c) {
    case Cmd::hello:
    case Cmd::auth:
    case Cmd::get_devices:
    case Cmd::alloc_buffer:
    case Cmd::supports_op:
    case Cmd::set_tensor_hash:
    case Cmd::get_tensor:
    case Cmd::get_tensor_rows:
    case Cmd::synchronize:
    case Cmd::compute_stats:
    case Cmd::event_sync:
    case Cmd::ping:
    case Cmd::peer_ticket:
    case Cmd::peer_connect:
    case Cmd::peer_attach:
      return true;
    default:
      return false;
  }
}

namespace {

const char* request_name(uint16_t command) {
  switch (static_cast<Cmd>(command)) {
    case Cmd::hello: return "HELLO";
    case Cmd::auth: return "AUTH";
    case Cmd::get_devices: return "GET_DEVICES";
    case Cmd::alloc_buffer: return "ALLOC_BUFFER";
    case Cmd::free_buffer: return "FREE_BUFFER";
    case Cmd::clear_buffer: return "CLEAR_BUFFER";
    case Cmd::supports_op: return "SUPPORTS_OP";
    case Cmd::set_tensor: return "SET_TENSOR";
    case Cmd::set_tensor_hash: return "SET_TENSOR_HASH";
    case Cmd::get_tensor: return "GET_TENSOR";
    case Cmd::copy_tensor: return "COPY_TENSOR";
    case Cmd::memset_tensor: return "MEMSET_TENSOR";
    case Cmd::set_tensor_rows: return "SET_TENSOR_ROWS";
    case Cmd::get_tensor_rows: return "GET_TENSOR_ROWS";
    case Cmd::graph_compute: return "GRAPH_COMPUTE";
    case Cmd::synchronize: return "SYNCHRONIZE";
    case Cmd::compute_stats: return "COMPUTE_STATS";
    case Cmd::event_record: return "EVENT_RECORD";
    case Cmd::event_wait: return "EVENT_WAIT";
    case Cmd::event_sync: return "EVENT_SYNC";
    case Cmd::ping: return "PING";
    case Cmd::peer_ticket: return "PEER_TICKET";
    case Cmd::peer_connect: return "PEER_CONNECT";
    case Cmd::peer_attach: return "PEER_ATTACH";
    case Cmd::peer_push: return "PEER_PUSH";
    case Cmd::push_to_peer: return "PUSH_TO_PEER";
    case Cmd::peer_wait: return "PEER_WAIT";
    case Cmd::error: return "ERROR";
  }
  return nullptr;
}

const char* reply_name(uint16_t command) {
  switch (static_cast<Cmd>(command)) {
    case Cmd::hello: return "HELLO reply";
    case Cmd::auth: return "AUTH reply";
    case Cmd::get_devices: return "GET_DEVICES reply";
    case Cmd::alloc_buffer: return "ALLOC_BUFFER reply";
    case Cmd::supports_op: return "SUPPORTS_OP reply";
    case Cmd::set_tensor_hash: return "SET_TENSOR_HASH reply";
    case Cmd::get_tensor: return "GET_TENSOR reply";
    case Cmd::get_tensor_rows: return "GET_TENSOR_ROWS reply";
    case Cmd::synchronize: return "SYNCHRONIZE reply";
    case Cmd::compute_stats: return "COMPUTE_STATS reply";
    case Cmd::event_sync: return "EVENT_SYNC reply";
    case Cmd::ping: return "PING reply";
    case Cmd::peer_ticket: return "PEER_TICKET reply";
    case Cmd::peer_connect: return "PEER_CONNECT reply";
    case Cmd::peer_attach: return "PEER_ATTACH reply";
    default: return nullptr;
  }
}

}  // namespace

const char* cmd_name(uint16_t command) {
  if (const char* name = request_name(command)) return name;
  if ((command & kReplyBit) != 0) {
    if (const char* name = reply_name(static_cast<uint16_t>(command & ~kReplyBit))) return name;
  }
  return "unknown";
}

void encode_header(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(h.length >> (8 * i));
  out[4] = static_cast<uint8_t>(h.command);
  out[5] = static_cast<uint8_t>(h.command >> 8);
  out[6] = static_cast<uint8_t>(h.flags);
  out[7] = static_cast<uint8_t>(h.flags >> 8);
}

FrameHeader decode_header(const uint8_t in[kFrameHeaderBytes]) {
  FrameHeader h;
  for (int i = 0; i < 4; ++i) h.length |= static_cast<uint32_t>(in[i]) << (8 * i);
  h.command = static_cast<uint16_t>(in[4] | (in[5] << 8));
  h.flags = static_cast<uint16_t>(in[6] | (in[7] << 8));
  return h;
}

// Writer

void Writer::f32(float v) { u32(std::bit_cast<uint32_t>(v)); }

void Writer::str(std::string_view s) {
  if (s.size() > kMaxString) {
    fail(ErrorKind::invalid_input, "rpc write",
         "string of " + std::to_string(s.size()) + " bytes is over the cap of " + std::to_string(kMaxString));
  }
  u32(static_cast<uint32_t>(s.size()));
  bytes(s.data(), s.size());
}

void Writer::bytes(const void* p, size_t n) {
  if (n == 0) return;
  const auto* b = static_cast<const uint8_t*>(p);
  data_.insert(data_.end(), b, b + n);
}

// Reader

const uint8_t* Reader::take(size_t n, const char* field) {
  // pos_ <= data_.size() always, so the subtraction cannot wrap.
  const size_t left = data_.size() - pos_;
  if (n > left) {
    fail(ErrorKind::invalid_input, "rpc " + what_,
         std::string("truncated: ") + field + " needs " + std::to_string(n) + " bytes at byte " +
             std::to_string(pos_) + " of " + std::to_string(data_.size()) + ", " + std::to_string(left) + " left");
  }
  const uint8_t* p = data_.data() + pos_;
  pos_ += n;
  return p;
}

uint8_t Reader::u8(const char* field) { return *take(1, field ? field : "u8"); }

uint16_t Reader::u16(const char* field) {
  const uint8_t* p = take(2, field ? field : "u16");
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

uint32_t Reader::u32(const char* field) {
  const uint8_t* p = take(4, field ? field : "u32");
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

uint64_t Reader::u64(const char* field) {
  const uint8_t* p = take(8, field ? field : "u64");
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

float Reader::f32(const char* field) { return std::bit_cast<float>(u32(field ? field : "f32")); }

std::string Reader::str(uint32_t max_length, const char* field) {
  const char* name = field ? field : "str";
  const uint32_t n = u32(name);
  if (n > max_length) {
    fail(ErrorKind::invalid_input, "rpc " + what_,
         std::string(name) + " length " + std::to_string(n) + " is over the cap of " + std::to_string(max_length));
  }
  const uint8_t* p = take(n, name);
  return std::string(reinterpret_cast<const char*>(p), n);
}

std::span<const uint8_t> Reader::bytes(size_t n, const char* field) {
  const uint8_t* p = take(n, field ? field : "bytes");
  return {p, n};
}

void Reader::expect_end() const {
  if (pos_ != data_.size()) {
    fail(ErrorKind::invalid_input, "rpc " + what_,
         std::to_string(data_.size() - pos_) + " unexpected bytes after the last field (payload of " +
             std::to_string(data_.size()) + " bytes)");
  }
}

}  // namespace weft::rpc
