// The commands on devices, buffers and tensor data (docs/rpc-protocol.md
// section 3), including the tensor cache's SET_TENSOR_HASH.
#include <algorithm>
#include <cstring>

#include "protocol/op_query.h"
#include "server/session.h"
#include "server/tensor_cache.h"

namespace weft::rpc {
namespace {

constexpr uint32_t kSetTensorFields = SetTensorRequest::kHeadBytes;  // handle, offset, size
constexpr size_t kCopyChunk = size_t{16} << 20;  // staging for copies between non-host buffers
constexpr size_t kMaxPendingUploads = 64;
constexpr size_t kBufferOverheadBytes = 256;  // the Buffer object and its entry in buffers_, charged with the bytes

}  // namespace

void Session::on_get_devices() {
  parse<GetDevicesRequest>(payload_);
  if (answer_deferred()) return;
  GetDevicesReply out;  // strings over kMaxString are cut by encode
  for (Device* d : shared_.devices) {
    MemoryInfo m = d->memory();
    if (shared_.memory_budget != SIZE_MAX) {  // what this worker will actually hand out
      const size_t in_use = std::min(shared_.memory_in_use.load(), shared_.memory_budget);
      m.free = std::min(m.free, shared_.memory_budget - in_use);
      m.total = std::min(m.total, shared_.memory_budget);
    }
    BufferType& bt = d->default_buffer_type();
    DeviceInfo info;
    info.name = d->name();
    info.description = d->description();
    info.kind = d->kind() == DeviceKind::cpu ? 0 : 1;  // the protocol knows cpu and gpu; anything else is not host
    info.free = m.free;
    info.total = m.total;
    info.buffer_type_name = bt.name();
    info.alignment = bt.alignment();
    info.max_size = bt.max_size();
    out.devices.push_back(std::move(info));
  }
  reply(out);
}

// SUPPORTS_OP: the node is rebuilt and validated as a graph's node would be
// (a bad one is invalid_input and ends the session), then the device's own
// rule answers, less WorkerTestAccess::refuse_ops. The few tensors it builds are
// part of a session's fixed allowance, not charged.
void Session::on_supports_op() {
  const auto req = parse<SupportsOpRequest>(payload_);
  check_device(req.device);
  const std::unique_ptr<QueriedNode> q = rebuild_queried_node(req);
  if (answer_deferred()) return;
  reply(SupportsOpReply{shared_.computes(*shared_.devices[req.device], *q->node)});
}

void Session::on_alloc_buffer() {
  const auto [device, size] = parse<AllocBufferRequest>(payload_);
  check_device(device);
  if (buffers_.size() >= kMaxBuffersPerSession) {
    fail(ErrorKind::invalid_input, "ALLOC_BUFFER",
         "the session already holds " + std::to_string(buffers_.size()) + " live buffers (the cap)");
  }
  if (answer_deferred()) return;
  BufferType& bt = shared_.devices[device]->default_buffer_type();
  if (size > bt.max_size() || size > SIZE_MAX / 2) {
    fail(ErrorKind::out_of_memory, "ALLOC_BUFFER",
         std::to_string(size) + " bytes is over device " + std::to_string(device) + "'s maximum buffer size " +
             std::to_string(bt.max_size()));
  }
  // The bytes, plus the buffer object and its table entry; a size over the
  // cap cannot overflow the sum (max_size is far below SIZE_MAX).
  const size_t reserved = size + kBufferOverheadBytes;
  charge(reserved, "a buffer of " + std::to_string(size) + " bytes");
  std::unique_ptr<Buffer> buffer;
  try {
    buffer = bt.allocate(size);
    if (buffer == nullptr) fail(ErrorKind::out_of_memory, "ALLOC_BUFFER", "cannot allocate " + std::to_string(size));
  } catch (...) {
    refund(reserved);
    throw;
  }
  const uint64_t handle = shared_.next_handle.fetch_add(1, std::memory_order_relaxed);
  buffers_.emplace(handle, Owned{std::move(buffer), reserved});
  reply(AllocBufferReply{handle});
}

void Session::on_free_buffer() {
  const uint64_t handle = parse<FreeBufferRequest>(payload_).handle;
  live_buffer(handle);
  sync_all();  // nothing may still run on it
  drop_graphs_using(handle);
  std::erase_if(uploads_, [&](const PendingUpload& u) { return u.handle == handle; });
  auto it = buffers_.find(handle);
  const size_t reserved = it->second.reserved;
  buffers_.erase(it);
  refund(reserved);
}

void Session::on_clear_buffer() {
  const auto [handle, value] = parse<ClearBufferRequest>(payload_);
  Buffer& b = live_buffer(handle);
  sync_all();
  b.clear(value);
}

// --- tensor data ---

void Session::on_set_tensor(uint32_t length) {
  // Only the fields go through payload_; the bytes go straight into the buffer.
  read_payload(std::min(length, kSetTensorFields));
  Reader r(payload_, "SET_TENSOR");
  const SetTensorRequest head = SetTensorRequest::decode_head(r);
  const uint64_t handle = head.handle, offset = head.offset, size = head.size;
  if (size != length - kSetTensorFields) {
    fail(ErrorKind::invalid_input, "SET_TENSOR",
         "size field says " + std::to_string(size) + " bytes but the frame carries " +
             std::to_string(length - kSetTensorFields));
  }
  Buffer& b = live_buffer(handle);
  check_range(b, handle, offset, size);
  sync_all();
  if (b.type().is_host()) {
    if (size > 0) stream_.read_exact(static_cast<uint8_t*>(b.base()) + offset, size);
  } else {
    read_payload(static_cast<uint32_t>(size));
    frame_read_ = true;
    write_bytes(b, offset, payload_.data(), size);
  }
  frame_read_ = true;
  advance_upload(handle, offset, size);
}

void Session::on_set_tensor_hash() {
  const auto req = parse<SetTensorHashRequest>(payload_);
  const uint64_t handle = req.handle, offset = req.offset, size = req.size;
  const ContentHash hash = req.hash;
  Buffer& b = live_buffer(handle);
  check_range(b, handle, offset, size);
  sync_all();
  if (answer_deferred()) return;
  bool found = false;
  // Without a cache directory every lookup misses: found = 0 is always a correct answer.
  if (shared_.cache != nullptr) {
    if (b.type().is_host()) {
      found = shared_.cache->lookup(hash, size, static_cast<uint8_t*>(b.base()) + offset);
    } else {
      std::vector<uint8_t> staging(size);
      found = shared_.cache->lookup(hash, size, staging.data());
      if (found) write_bytes(b, offset, staging.data(), size);
    }
    if (!found) {
      std::erase_if(uploads_, [&](const PendingUpload& u) { return u.handle == handle && u.offset == offset; });
      uploads_.push_back(PendingUpload{hash, handle, offset, size, 0});
      if (uploads_.size() > kMaxPendingUploads) uploads_.pop_front();
    }
  }
  reply(SetTensorHashReply{found});
}

// The bytes announced by a SET_TENSOR_HASH miss may come in several
// SET_TENSOR frames, in order. Once all arrived, what the buffer holds is
// offered to the cache, which hashes it itself: bytes that do not match the
// announced hash (a lying client, or writes in between) are not stored.
void Session::advance_upload(uint64_t handle, uint64_t offset, uint64_t size) {
  if (shared_.cache == nullptr) return;
  for (auto it = uploads_.begin(); it != uploads_.end(); ++it) {
    if (it->handle != handle || offset != it->offset + it->received || size > it->size - it->received) continue;
    it->received += size;
    if (it->received < it->size) return;
    const PendingUpload done = *it;
    uploads_.erase(it);
    try {
      Buffer& b = *buffers_.at(handle).buffer;
      if (b.type().is_host()) {
        shared_.cache->store(done.hash, static_cast<uint8_t*>(b.base()) + done.offset, done.size);
      } else {
        std::vector<uint8_t> staging(done.size);
        read_bytes(b, done.offset, staging.data(), done.size);
        shared_.cache->store(done.hash, staging.data(), done.size);
      }
    } catch (...) {
      // The cache is an optimization: failing to fill it is not the client's error.
    }
    return;
  }
}

void Session::on_get_tensor() {
  const auto [handle, offset, size] = parse<GetTensorRequest>(payload_);
  Buffer& b = live_buffer(handle);
  check_range(b, handle, offset, size);
  if (size > UINT32_MAX) {
    fail(ErrorKind::invalid_input, "GET_TENSOR",
         "size " + std::to_string(size) + " does not fit one reply frame (split the read)");
  }
  sync_all();
  if (answer_deferred()) return;
  FrameHeader fh;
  fh.length = static_cast<uint32_t>(size);
  fh.command = static_cast<uint16_t>(Cmd::get_tensor) | kReplyBit;
  uint8_t raw[kFrameHeaderBytes];
  encode_header(fh, raw);
  if (b.type().is_host()) {
    write_frame(raw, static_cast<uint8_t*>(b.base()) + offset, size);
  } else {
    std::vector<uint8_t> staging(size);
    read_bytes(b, offset, staging.data(), size);
    write_frame(raw, staging.data(), size);
  }
}

// The range a SET_TENSOR_ROWS or GET_TENSOR_ROWS names: row_bytes * n_rows
// bytes at offset, inside buffer handle.
uint64_t Session::rows_range(Buffer& b, uint64_t handle, uint64_t offset, uint64_t row_bytes, uint32_t n_rows) {
  if (row_bytes == 0 || (n_rows != 0 && row_bytes > UINT64_MAX / n_rows)) {
    fail(ErrorKind::invalid_input, cmd_name(static_cast<uint16_t>(current_)),
         std::to_string(n_rows) + " rows of " + std::to_string(row_bytes) + " bytes is not a range");
  }
  const uint64_t size = row_bytes * n_rows;
  check_range(b, handle, offset, size);
  return size;
}

void Session::on_set_tensor_rows() {
  const auto req = parse<SetTensorRowsRequest>(payload_);
  Buffer& b = live_buffer(req.handle);
  const uint64_t size = rows_range(b, req.handle, req.offset, req.row_bytes, req.n_rows);
  sync_all();
  // Zeros between the listed rows, each listed row's bytes, zeros after the last.
  uint64_t at = 0;
  for (size_t i = 0; i < req.rows.size(); ++i) {
    const uint64_t row_at = req.rows[i] * req.row_bytes;
    fill_bytes(b, req.offset + at, 0, row_at - at);
    write_bytes(b, req.offset + row_at, req.data.data() + i * req.row_bytes, req.row_bytes);
    at = row_at + req.row_bytes;
  }
  fill_bytes(b, req.offset + at, 0, size - at);
}

void Session::on_get_tensor_rows() {
  const auto [handle, offset, row_bytes, n_rows] = parse<GetTensorRowsRequest>(payload_);
  Buffer& b = live_buffer(handle);
  const uint64_t size = rows_range(b, handle, offset, row_bytes, n_rows);
  if (rows_reply_bound(row_bytes, n_rows) > kMaxPayload) {
    fail(ErrorKind::invalid_input, "GET_TENSOR_ROWS",
         std::to_string(n_rows) + " rows of " + std::to_string(row_bytes) + " bytes could need a reply over " +
             std::to_string(kMaxPayload) + " bytes (split the read)");
  }
  sync_all();
  if (answer_deferred()) return;
  std::vector<uint8_t> staging;
  const uint8_t* range = nullptr;
  if (b.type().is_host()) {
    range = static_cast<const uint8_t*>(b.base()) + offset;
  } else {
    staging.resize(size);
    read_bytes(b, offset, staging.data(), size);
    range = staging.data();
  }
  GetTensorRowsReply out;
  out.rows = nonzero_rows(range, row_bytes, n_rows);
  std::vector<uint8_t> data(out.rows.size() * row_bytes);
  for (size_t i = 0; i < out.rows.size(); ++i)
    std::memcpy(data.data() + i * row_bytes, range + out.rows[i] * row_bytes, row_bytes);
  out.data = data;
  reply(out);
}

void Session::on_copy_tensor() {
  const auto [src_handle, src_offset, dst_handle, dst_offset, size] = parse<CopyTensorRequest>(payload_);
  Buffer& src = live_buffer(src_handle);
  Buffer& dst = live_buffer(dst_handle);
  check_range(src, src_handle, src_offset, size);
  check_range(dst, dst_handle, dst_offset, size);
  sync_all();
  if (size == 0) return;
  if (src.type().is_host() && dst.type().is_host()) {
    std::memmove(static_cast<uint8_t*>(dst.base()) + dst_offset, static_cast<uint8_t*>(src.base()) + src_offset, size);
    return;
  }
  // Through host memory, chunk by chunk; backwards when an overlap needs it (as memmove).
  std::vector<uint8_t> staging(std::min<uint64_t>(size, kCopyChunk));
  const bool backwards = &src == &dst && dst_offset > src_offset;
  for (uint64_t done = 0; done < size;) {
    const uint64_t n = std::min<uint64_t>(staging.size(), size - done);
    const uint64_t at = backwards ? size - done - n : done;
    read_bytes(src, src_offset + at, staging.data(), n);
    write_bytes(dst, dst_offset + at, staging.data(), n);
    done += n;
  }
}

void Session::on_memset_tensor() {
  const auto [handle, offset, size, value] = parse<MemsetTensorRequest>(payload_);
  Buffer& b = live_buffer(handle);
  check_range(b, handle, offset, size);
  sync_all();
  fill_bytes(b, offset, value, size);
}

}  // namespace weft::rpc
