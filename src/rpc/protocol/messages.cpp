// The messages of docs/rpc-protocol.md section 3, field by field in the
// order of the spec's table. Field names given to the Reader are what a
// truncation error names.
#include "protocol/messages.h"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace weft::rpc {
namespace {

template <size_t N>
void read_array(Reader& r, std::array<uint8_t, N>& out, const char* field) {
  const auto b = r.bytes(N, field);
  std::copy(b.begin(), b.end(), out.begin());
}

std::string_view capped(const std::string& s) {
  return std::string_view(s).substr(0, std::min<size_t>(s.size(), kMaxString));
}

}  // namespace

// --- handshake ---

void HelloRequest::encode(Writer& w) const {
  w.bytes(magic.data(), magic.size());
  w.u16(major);
  w.u16(minor);
  w.u64(capabilities);
}

HelloRequest HelloRequest::decode(Reader& r) {
  HelloRequest m;
  read_array(r, m.magic, "magic");
  m.major = r.u16("major");
  m.minor = r.u16("minor");
  m.capabilities = r.u64("caps");
  return m;
}

void HelloReply::encode(Writer& w) const {
  w.bytes(magic.data(), magic.size());
  w.u16(major);
  w.u16(minor);
  w.u64(capabilities);
  w.u8(auth_required ? 1 : 0);
  w.bytes(challenge.data(), challenge.size());
}

HelloReply HelloReply::decode(Reader& r) {
  HelloReply m;
  read_array(r, m.magic, "magic");
  m.major = r.u16("major");
  m.minor = r.u16("minor");
  m.capabilities = r.u64("capabilities");
  m.auth_required = r.u8("auth_required") != 0;
  read_array(r, m.challenge, "challenge");
  return m;
}

void AuthRequest::encode(Writer& w) const { w.bytes(mac.data(), mac.size()); }

AuthRequest AuthRequest::decode(Reader& r) {
  AuthRequest m;
  read_array(r, m.mac, "mac");
  return m;
}

// --- devices and buffers ---

void GetDevicesReply::encode(Writer& w) const {
  w.u32(static_cast<uint32_t>(devices.size()));
  for (const DeviceInfo& d : devices) {
    w.str(capped(d.name));
    w.str(capped(d.description));
    w.u8(d.kind);
    w.u64(d.free);
    w.u64(d.total);
    w.str(capped(d.buffer_type_name));
    w.u64(d.alignment);
    w.u64(d.max_size);
  }
}

GetDevicesReply GetDevicesReply::decode(Reader& r) {
  const uint32_t n = r.u32("n");
  if (n > kMaxDevices) {
    fail(ErrorKind::invalid_input, "rpc " + r.what(),
         std::to_string(n) + " devices, over the cap of " + std::to_string(kMaxDevices));
  }
  GetDevicesReply m;
  m.devices.resize(n);
  for (DeviceInfo& d : m.devices) {
    d.name = r.str(kMaxString, "name");
    d.description = r.str(kMaxString, "description");
    d.kind = r.u8("kind");
    d.free = r.u64("free");
    d.total = r.u64("total");
    d.buffer_type_name = r.str(kMaxString, "buffer_type_name");
    d.alignment = r.u64("alignment");
    d.max_size = r.u64("max_size");
    if (d.alignment == 0 || (d.alignment & (d.alignment - 1)) != 0 || d.alignment > (uint64_t{1} << 30)) {
      fail(ErrorKind::invalid_input, "rpc " + r.what(),
           "device '" + d.name + "' alignment " + std::to_string(d.alignment) + " (want a power of two up to 2^30)");
    }
  }
  return m;
}

void AllocBufferReply::encode(Writer& w) const { w.u64(handle); }

AllocBufferReply AllocBufferReply::decode(Reader& r) { return {r.u64("handle")}; }

void AllocBufferRequest::encode(Writer& w) const {
  w.u32(device);
  w.u64(size);
}

AllocBufferRequest AllocBufferRequest::decode(Reader& r) {
  AllocBufferRequest m;
  m.device = r.u32("device");
  m.size = r.u64("size");
  return m;
}

void FreeBufferRequest::encode(Writer& w) const { w.u64(handle); }

FreeBufferRequest FreeBufferRequest::decode(Reader& r) { return {r.u64("handle")}; }

void ClearBufferRequest::encode(Writer& w) const {
  w.u64(handle);
  w.u8(value);
}

ClearBufferRequest ClearBufferRequest::decode(Reader& r) {
  ClearBufferRequest m;
  m.handle = r.u64("handle");
  m.value = r.u8("value");
  return m;
}

// --- tensor data ---

void SetTensorRequest::encode_head(Writer& w) const {
  w.u64(handle);
  w.u64(offset);
  w.u64(size);
}

void SetTensorRequest::encode(Writer& w) const {
  encode_head(w);
  w.bytes(data.data(), data.size());
}

SetTensorRequest SetTensorRequest::decode_head(Reader& r) {
  SetTensorRequest m;
  m.handle = r.u64("handle");
  m.offset = r.u64("offset");
  m.size = r.u64("size");
  return m;
}

SetTensorRequest SetTensorRequest::decode(Reader& r) {
  SetTensorRequest m = decode_head(r);
  m.data = r.bytes(m.size, "data");
  return m;
}

void SetTensorHashReply::encode(Writer& w) const { w.u8(found ? 1 : 0); }

SetTensorHashReply SetTensorHashReply::decode(Reader& r) { return {r.u8("found") != 0}; }

void SetTensorHashRequest::encode(Writer& w) const {
  w.u64(handle);
  w.u64(offset);
  w.u64(size);
  w.bytes(hash.data(), hash.size());
}

SetTensorHashRequest SetTensorHashRequest::decode(Reader& r) {
  SetTensorHashRequest m;
  m.handle = r.u64("handle");
  m.offset = r.u64("offset");
  m.size = r.u64("size");
  read_array(r, m.hash, "hash");
  return m;
}

void GetTensorReply::encode(Writer& w) const { w.bytes(data.data(), data.size()); }

GetTensorReply GetTensorReply::decode(Reader& r) { return {r.bytes(r.remaining(), "data")}; }

void GetTensorRequest::encode(Writer& w) const {
  w.u64(handle);
  w.u64(offset);
  w.u64(size);
}

GetTensorRequest GetTensorRequest::decode(Reader& r) {
  GetTensorRequest m;
  m.handle = r.u64("handle");
  m.offset = r.u64("offset");
  m.size = r.u64("size");
  return m;
}

namespace {

// count u32, then that many strictly ascending row numbers below n_rows.
std::vector<uint32_t> decode_row_list(Reader& r, uint32_t n_rows) {
  const uint32_t count = r.u32("count");
  if (count > n_rows || uint64_t{count} * 4 > r.remaining()) {
    fail(ErrorKind::invalid_input, r.what(),
         "count " + std::to_string(count) + " rows of " + std::to_string(n_rows) + " in " +
             std::to_string(r.remaining()) + " bytes");
  }
  std::vector<uint32_t> rows(count);
  for (uint32_t i = 0; i < count; ++i) {
    rows[i] = r.u32("row");
    if (rows[i] >= n_rows || (i > 0 && rows[i] <= rows[i - 1])) {
      fail(ErrorKind::invalid_input, r.what(),
           "row " + std::to_string(rows[i]) + " (entry " + std::to_string(i) + " of " + std::to_string(count) +
               ") is not ascending and below n_rows " + std::to_string(n_rows));
    }
  }
  return rows;
}

// The listed rows' bytes: exactly row_bytes each, and nothing after them.
std::span<const uint8_t> decode_row_data(Reader& r, uint64_t row_bytes, size_t count) {
  if (count > 0 && row_bytes > r.remaining() / count) {
    fail(ErrorKind::invalid_input, r.what(),
         std::to_string(count) + " rows of " + std::to_string(row_bytes) + " bytes do not fit the " +
             std::to_string(r.remaining()) + " bytes left");
  }
  std::span<const uint8_t> data = r.bytes(static_cast<size_t>(row_bytes) * count, "data");
  r.expect_end();
  return data;
}

}  // namespace

void SetTensorRowsRequest::encode_head(Writer& w) const {
  w.u64(handle);
  w.u64(offset);
  w.u64(row_bytes);
  w.u32(n_rows);
  w.u32(static_cast<uint32_t>(rows.size()));
  for (uint32_t row : rows) w.u32(row);
}

void SetTensorRowsRequest::encode(Writer& w) const {
  encode_head(w);
  w.bytes(data.data(), data.size());
}

SetTensorRowsRequest SetTensorRowsRequest::decode(Reader& r) {
  SetTensorRowsRequest m;
  m.handle = r.u64("handle");
  m.offset = r.u64("offset");
  m.row_bytes = r.u64("row_bytes");
  m.n_rows = r.u32("n_rows");
  m.rows = decode_row_list(r, m.n_rows);
  m.data = decode_row_data(r, m.row_bytes, m.rows.size());
  return m;
}

void GetTensorRowsReply::encode(Writer& w) const {
  w.u32(static_cast<uint32_t>(rows.size()));
  for (uint32_t row : rows) w.u32(row);
  w.bytes(data.data(), data.size());
}

GetTensorRowsReply GetTensorRowsReply::decode(Reader& r, uint64_t row_bytes, uint32_t n_rows) {
  GetTensorRowsReply m;
  m.rows = decode_row_list(r, n_rows);
  m.data = decode_row_data(r, row_bytes, m.rows.size());
  return m;
}

void GetTensorRowsRequest::encode(Writer& w) const {
  w.u64(handle);
  w.u64(offset);
  w.u64(row_bytes);
  w.u32(n_rows);
}

GetTensorRowsRequest GetTensorRowsRequest::decode(Reader& r) {
  GetTensorRowsRequest m;
  m.handle = r.u64("handle");
  m.offset = r.u64("offset");
  m.row_bytes = r.u64("row_bytes");
  m.n_rows = r.u32("n_rows");
  return m;
}

std::vector<uint32_t> nonzero_rows(const uint8_t* data, uint64_t row_bytes, uint32_t n_rows) {
  std::vector<uint32_t> rows;
  for (uint32_t i = 0; i < n_rows; ++i) {
    const uint8_t* row = data + row_bytes * i;
    // Eight bytes at a time where the row allows; memcpy keeps it aligned-agnostic.
    uint64_t any = 0, at = 0;
    for (; at + 8 <= row_bytes && any == 0; at += 8) {
      uint64_t word;
      std::memcpy(&word, row + at, 8);
      any |= word;
    }
    for (; at < row_bytes && any == 0; ++at) any |= row[at];
    if (any != 0) rows.push_back(i);
  }
  return rows;
}

uint64_t rows_reply_bound(uint64_t row_bytes, uint64_t n_rows) {
  const uint64_t per_row = row_bytes > UINT64_MAX - 4 ? UINT64_MAX : row_bytes + 4;
  if (n_rows != 0 && per_row > (UINT64_MAX - 4) / n_rows) return UINT64_MAX;
  return 4 + per_row * n_rows;
}

void CopyTensorRequest::encode(Writer& w) const {
  w.u64(src_handle);
  w.u64(src_offset);
  w.u64(dst_handle);
  w.u64(dst_offset);
  w.u64(size);
}

CopyTensorRequest CopyTensorRequest::decode(Reader& r) {
  CopyTensorRequest m;
  m.src_handle = r.u64("src_handle");
  m.src_offset = r.u64("src_offset");
  m.dst_handle = r.u64("dst_handle");
  m.dst_offset = r.u64("dst_offset");
  m.size = r.u64("size");
  return m;
}

void MemsetTensorRequest::encode(Writer& w) const {
  w.u64(handle);
  w.u64(offset);
  w.u64(size);
  w.u8(value);
}

MemsetTensorRequest MemsetTensorRequest::decode(Reader& r) {
  MemsetTensorRequest m;
  m.handle = r.u64("handle");
  m.offset = r.u64("offset");
  m.size = r.u64("size");
  m.value = r.u8("value");
  return m;
}

// --- compute and ordering ---

void GraphComputeRequest::encode_head(Writer& w) const {
  w.u32(device);
  w.u64(graph_id);
  w.u8(has_graph ? 1 : 0);
}

void GraphComputeRequest::encode(Writer& w) const {
  encode_head(w);
  w.bytes(graph.data(), graph.size());
}

GraphComputeRequest GraphComputeRequest::decode(Reader& r) {
  GraphComputeRequest m;
  m.device = r.u32("device");
  m.graph_id = r.u64("graph_id");
  const uint8_t has_graph = r.u8("has_graph");
  if (has_graph > 1) {
    fail(ErrorKind::invalid_input, "GRAPH_COMPUTE", "has_graph is " + std::to_string(has_graph) + " (must be 0 or 1)");
  }
  m.has_graph = has_graph == 1;
  if (m.has_graph) m.graph = r.bytes(r.remaining(), "graph");
  return m;
}

void SynchronizeRequest::encode(Writer& w) const { w.u32(device); }

SynchronizeRequest SynchronizeRequest::decode(Reader& r) { return {r.u32("device")}; }

void ComputeStatsRequest::encode(Writer& w) const { w.u32(device); }

ComputeStatsRequest ComputeStatsRequest::decode(Reader& r) { return {r.u32("device")}; }

void ComputeStatsReply::encode(Writer& w) const {
  w.u64(graphs);
  w.u64(compute_ns);
}

ComputeStatsReply ComputeStatsReply::decode(Reader& r) {
  ComputeStatsReply m;
  m.graphs = r.u64("graphs");
  m.compute_ns = r.u64("compute_ns");
  return m;
}

void EventSyncRequest::encode(Writer& w) const { w.u64(event_id); }

EventSyncRequest EventSyncRequest::decode(Reader& r) { return {r.u64("id")}; }

// --- peer links ---

void PeerTicketReply::encode(Writer& w) const { w.bytes(ticket.data(), ticket.size()); }

PeerTicketReply PeerTicketReply::decode(Reader& r) {
  PeerTicketReply m;
  const auto b = r.bytes(kTicketBytes, "ticket");
  std::copy(b.begin(), b.end(), m.ticket.begin());
  return m;
}

void PeerConnectRequest::encode(Writer& w) const {
  w.u32(link);
  w.u32(source);
  w.str(endpoint);
  w.bytes(ticket.data(), ticket.size());
  w.str(label);
}

PeerConnectRequest PeerConnectRequest::decode(Reader& r) {
  PeerConnectRequest m;
  m.link = r.u32("link");
  m.source = r.u32("source");
  m.endpoint = r.str(kMaxString, "endpoint");
  const auto b = r.bytes(kTicketBytes, "ticket");
  std::copy(b.begin(), b.end(), m.ticket.begin());
  m.label = r.str(kMaxString, "label");
  return m;
}

void PeerAttachRequest::encode(Writer& w) const {
  w.bytes(ticket.data(), ticket.size());
  w.u32(source);
  w.str(label);
}

PeerAttachRequest PeerAttachRequest::decode(Reader& r) {
  PeerAttachRequest m;
  const auto b = r.bytes(kTicketBytes, "ticket");
  std::copy(b.begin(), b.end(), m.ticket.begin());
  m.source = r.u32("source");
  m.label = r.str(kMaxString, "label");
  return m;
}

void PeerPushRequest::encode_head(Writer& w) const {
  w.u64(event_id);
  w.u64(dst_handle);
  w.u64(dst_offset);
  w.u64(size);
  w.u8(flags);
}

PeerPushRequest PeerPushRequest::decode(Reader& r) {
  PeerPushRequest m;
  m.event_id = r.u64("event_id");
  m.dst_handle = r.u64("dst_handle");
  m.dst_offset = r.u64("dst_offset");
  m.size = r.u64("size");
  m.flags = r.u8("flags");
  if ((m.flags & ~(kPushLast | kPushFailed)) != 0) {
    fail(ErrorKind::invalid_input, "rpc " + r.what(), "flags " + std::to_string(m.flags) + " (only bits 0 and 1 exist)");
  }
  if (m.size != r.remaining()) {
    fail(ErrorKind::invalid_input, "rpc " + r.what(),
         "size " + std::to_string(m.size) + " but " + std::to_string(r.remaining()) + " bytes follow");
  }
  if ((m.flags & kPushFailed) != 0 && m.size > kMaxString) {  // a failure's bytes are its message: text
    fail(ErrorKind::invalid_input, "rpc " + r.what(),
         "size " + std::to_string(m.size) + " of a failed push's message (at most " + std::to_string(kMaxString) + ")");
  }
  m.data = r.bytes(static_cast<size_t>(m.size), "data");
  return m;
}

void PushToPeerRequest::encode(Writer& w) const {
  w.u32(link);
  w.u64(src_handle);
  w.u64(src_offset);
  w.u64(size);
  w.u64(dst_handle);
  w.u64(dst_offset);
  w.u64(event_id);
}

PushToPeerRequest PushToPeerRequest::decode(Reader& r) {
  PushToPeerRequest m;
  m.link = r.u32("link");
  m.src_handle = r.u64("src_handle");
  m.src_offset = r.u64("src_offset");
  m.size = r.u64("size");
  m.dst_handle = r.u64("dst_handle");
  m.dst_offset = r.u64("dst_offset");
  m.event_id = r.u64("event_id");
  return m;
}

void PeerWaitRequest::encode(Writer& w) const {
  w.u32(source);
  w.u64(event_id);
}

PeerWaitRequest PeerWaitRequest::decode(Reader& r) {
  PeerWaitRequest m;
  m.source = r.u32("source");
  m.event_id = r.u64("event_id");
  return m;
}

// --- op support ---

TensorLayout TensorLayout::of(const Tensor& t) {
  TensorLayout l;
  l.dtype = static_cast<uint8_t>(t.type);
  for (int d = 0; d < kMaxDims; ++d) {
    l.ne[d] = t.ne[d];
    l.nb[d] = t.nb[d];
  }
  return l;
}

void TensorLayout::encode(Writer& w) const {
  w.u8(dtype);
  for (int64_t n : ne) w.i64(n);
  for (uint64_t n : nb) w.u64(n);
}

TensorLayout TensorLayout::decode(Reader& r) {
  TensorLayout l;
  l.dtype = r.u8("dtype");
  for (int64_t& n : l.ne) n = r.i64("ne");
  for (uint64_t& n : l.nb) n = r.u64("nb");
  return l;
}

void SupportsOpReply::encode(Writer& w) const { w.u8(supported ? 1 : 0); }

SupportsOpReply SupportsOpReply::decode(Reader& r) {
  const uint8_t v = r.u8("supported");
  if (v > 1) {
    fail(ErrorKind::invalid_input, "rpc " + r.what(), "supported is " + std::to_string(v) + " (must be 0 or 1)");
  }
  return {v == 1};
}

SupportsOpRequest SupportsOpRequest::of(uint32_t device, const Tensor& t) {
  SupportsOpRequest m;
  m.device = device;
  m.op = static_cast<uint8_t>(t.op);
  m.node = TensorLayout::of(t);
  std::copy(std::begin(t.op_params), std::end(t.op_params), std::begin(m.op_params));
  for (int k = 0; k < kWireSrc; ++k) {
    if (t.src[k] != nullptr) m.src[k] = TensorLayout::of(*t.src[k]);
  }
  for (int k = kWireSrc; k < kMaxSrc; ++k) {
    if (t.src[k] != nullptr)
      fail(ErrorKind::internal, "rpc supports_op",
           std::string(op_name(t.op)) + " has src[" + std::to_string(k) + "], which the wire does not carry");
  }
  return m;
}

void SupportsOpRequest::encode(Writer& w) const {
  w.u32(device);
  w.u8(op);
  node.encode(w);
  for (int32_t p : op_params) w.i32(p);
  uint8_t mask = 0;
  for (int k = 0; k < kWireSrc; ++k) mask |= src[k] ? static_cast<uint8_t>(1u << k) : 0;
  w.u8(mask);
  for (const auto& s : src) {
    if (s) s->encode(w);
  }
}

SupportsOpRequest SupportsOpRequest::decode(Reader& r) {
  SupportsOpRequest m;
  m.device = r.u32("device");
  m.op = r.u8("op");
  m.node = TensorLayout::decode(r);
  for (int32_t& p : m.op_params) p = r.i32("op_params");
  const uint8_t mask = r.u8("src_mask");
  if ((mask >> kWireSrc) != 0) {
    fail(ErrorKind::invalid_input, "rpc " + r.what(),
         "src_mask " + std::to_string(mask) + " has bits above the " + std::to_string(kWireSrc) + " sources");
  }
  for (int k = 0; k < kWireSrc; ++k) {
    if ((mask >> k) & 1) m.src[k] = TensorLayout::decode(r);
  }
  return m;
}

// --- errors ---

uint8_t error_kind_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_input: return 0;
    case ErrorKind::unsupported: return 1;
    case ErrorKind::out_of_memory: return 2;
    case ErrorKind::disconnected: return 3;
    case ErrorKind::internal: return 4;
  }
  return 4;
}

ErrorKind error_kind_from_code(uint8_t code) {
  switch (code) {
    case 0: return ErrorKind::invalid_input;
    case 1: return ErrorKind::unsupported;
    case 2: return ErrorKind::out_of_memory;
    case 3: return ErrorKind::disconnected;
    default: return ErrorKind::internal;
  }
}

void ErrorReply::encode(Writer& w) const {
  w.u8(error_kind_code(kind));
  w.str(capped(message));
}

ErrorReply ErrorReply::decode(Reader& r) {
  ErrorReply m;
  m.kind = error_kind_from_code(r.u8("kind"));
  m.message = r.str(kMaxString, "message");
  return m;
}

uint16_t dtype_minor(DType t) { return t == DType::mxfp4 ? 9 : 0; }

uint16_t minor_needed(const Tensor& t) {
  uint16_t minor = 0;
  while (minor < kMinor && static_cast<int>(t.op) >= ops_known_at_minor(minor)) ++minor;
  if (t.op == Op::flash_attn) {
    for (const Tensor* kv : {t.src[1], t.src[2]})
      if (kv != nullptr && traits(kv->type).quantized) minor = std::max<uint16_t>(minor, 4);
  }
  if (t.op == Op::mul_mat_id && t.op_params[0] != 0) minor = std::max<uint16_t>(minor, 6);
  if (t.op == Op::soft_max && t.src[2] != nullptr) minor = std::max<uint16_t>(minor, 9);
  minor = std::max(minor, dtype_minor(t.type));
  for (const Tensor* s : t.src)
    if (s != nullptr) minor = std::max(minor, dtype_minor(s->type));
  for (int k = kWireSrc; k < kMaxSrc; ++k)
    if (t.src[k] != nullptr) return kNoMinor;
  return minor;
}

}  // namespace weft::rpc
