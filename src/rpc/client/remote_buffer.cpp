// Remote buffers: worker memory named by a handle, behind a client-side
// fake address range.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "client/remote.h"
#include "protocol/content_hash.h"
#include "weft/core/error.h"

namespace weft::rpc {
namespace {

// Fake addresses: every remote buffer reserves [base, base + size) of this
// process-wide range (never mapped, never dereferenced) so that tensor data
// pointers of different buffers never coincide.
std::atomic<uint64_t> g_next_address{uint64_t{1} << 44};
constexpr uint64_t kAddressLimit = uint64_t{1} << 62;

uintptr_t reserve_addresses(size_t size, size_t alignment) {
  const uint64_t span = std::max<uint64_t>(size, 1);
  uint64_t current = g_next_address.load();
  for (;;) {
    const uint64_t base = (current + alignment - 1) / alignment * alignment;
    if (base > kAddressLimit || span > kAddressLimit - base) {
      fail(ErrorKind::out_of_memory, "rpc buffer",
           "the client's address range for remote buffers is used up (" + std::to_string(size) + " bytes asked)");
    }
    if (g_next_address.compare_exchange_weak(current, base + span)) return static_cast<uintptr_t>(base);
  }
}

// SET_TENSOR payload: handle, offset, size, then the bytes.
constexpr size_t kUploadChunk = kMaxSetTensorPayload - SetTensorRequest::kHeadBytes;
// Rows shorter than this travel whole: listing each would cost too much.
constexpr uint64_t kMinSparseRowBytes = 64;

}  // namespace

Device& RemoteBufferType::device() {
  return device_;
}

std::unique_ptr<Buffer> RemoteBufferType::allocate(size_t size) {
  if (size > max_size_) {
    fail(ErrorKind::out_of_memory, "rpc buffer",
         std::to_string(size) + " bytes is over the maximum of " + std::to_string(max_size_) + " of " + name_);
  }
  const uintptr_t base = reserve_addresses(size, alignment_);
  std::shared_ptr<Connection> connection = device_.connect();
  const uint64_t handle = connection->call(AllocBufferRequest{device_.index(), size}).handle;
  if (handle == 0) {
    // 0 is never a handle: the peer is not following the protocol.
    fail(ErrorKind::internal, "rpc buffer", connection->endpoint() + " ALLOC_BUFFER: the worker answered handle 0");
  }
  return std::make_unique<RemoteBuffer>(*this, std::move(connection), handle, base, size);
}

RemoteBuffer::RemoteBuffer(RemoteBufferType& type, std::shared_ptr<Connection> connection, uint64_t handle,
                           uintptr_t base, size_t size)
    : type_(type),
      connection_(std::move(connection)),
      handle_(handle),
      base_(base),
      size_(size),
      cache_min_bytes_(type.remote_device().options().cache_min_bytes),
      hash_threads_(type.remote_device().options().hash_threads) {}

RemoteBuffer::~RemoteBuffer() {
  try {
    connection_->send(FreeBufferRequest{handle_});
  } catch (...) {
    // A dead worker already freed everything of this session.
  }
}

uint64_t RemoteBuffer::offset_of(const Tensor& t) const {
  const auto address = reinterpret_cast<uintptr_t>(t.data);
  if (t.buffer != this || address < base_ || address - base_ > size_) {
    fail(ErrorKind::invalid_input, "rpc buffer",
         "tensor '" + t.name + "' " + shape_string(t) + " does not lie in buffer " + std::to_string(handle_) + " of " +
             connection_->endpoint());
  }
  return address - base_;
}

uint64_t RemoteBuffer::range_of(const Tensor& t, size_t offset, size_t size, const char* what) const {
  const uint64_t start = offset_of(t);
  if (offset > size_ - start || size > size_ - start - offset) {
    fail(ErrorKind::invalid_input, what,
         "bytes [" + std::to_string(offset) + ", +" + std::to_string(size) + ") of tensor '" + t.name + "' " +
             shape_string(t) + " run past the end of its buffer (" + std::to_string(size_) + " bytes)");
  }
  return start + offset;
}

void RemoteBuffer::upload(uint64_t offset, const void* data, size_t size, bool try_cache, bool later) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (try_cache && size > 0 && size >= cache_min_bytes_ && connection_->has(kCapTensorCache)) {
    // The whole range is offered under its content hash (hashed on all
    // cores); on a miss the bytes follow in SET_TENSOR frames, which the
    // worker hashes again and stores.
    const ContentHash hash = content_hash(bytes, size, hash_threads_);
    if (connection_->call(SetTensorHashRequest{handle_, offset, size, hash}).found) return;
  }
  // Pipelined frames, each under the SET_TENSOR limit.
  while (size > 0) {
    const size_t n = std::min(size, kUploadChunk);
    Writer head;
    SetTensorRequest{handle_, offset, n, {}}.encode_head(head);  // the bytes go beside it, uncopied
    if (later) {
      connection_->send_later(Cmd::set_tensor, head, bytes, n);
    } else {
      connection_->send(Cmd::set_tensor, head, bytes, n);
    }
    bytes += n;
    offset += n;
    size -= n;
  }
}

uint64_t RemoteBuffer::sparse_row_bytes(const Tensor& t) const {
  if (!t.has_flag(kFlagSparseRows) || !type_.remote_device().options().sparse_rows ||
      connection_->peer_minor() < 7 || !t.is_contiguous() || t.nrows() == 0) {
    return 0;
  }
  const uint64_t row = t.nbytes() / static_cast<uint64_t>(t.nrows());
  return row >= kMinSparseRowBytes && row + 8 <= kMaxPayload ? row : 0;
}

void RemoteBuffer::upload_rows(uint64_t offset, const uint8_t* data, uint64_t row_bytes, uint64_t n_rows) {
  const uint64_t per_frame = (kMaxSetTensorPayload - SetTensorRowsRequest::kHeadBytes) / (row_bytes + 4);
  std::vector<uint8_t> listed;
  for (uint64_t first = 0; first < n_rows;) {
    const auto n = static_cast<uint32_t>(std::min(n_rows - first, per_frame));
    const uint8_t* piece = data + first * row_bytes;
    SetTensorRowsRequest req{handle_, offset + first * row_bytes, row_bytes, n, nonzero_rows(piece, row_bytes, n), {}};
    if (req.rows.size() == n) {
      upload(req.offset, piece, row_bytes * n, /*try_cache=*/false);  // no zero row: the plain frame is smaller
    } else {
      listed.resize(req.rows.size() * row_bytes);
      for (size_t i = 0; i < req.rows.size(); ++i)
        std::memcpy(listed.data() + i * row_bytes, piece + req.rows[i] * row_bytes, row_bytes);
      Writer head;
      req.encode_head(head);
      connection_->send(Cmd::set_tensor_rows, head, listed.data(), listed.size());
    }
    first += n;
  }
}

void RemoteBuffer::set_tensor(Tensor& t, const void* data, size_t offset, size_t size) {
  upload(range_of(t, offset, size, "rpc set_tensor"), data, size, /*try_cache=*/true);
}

void RemoteBuffer::get_tensor(const Tensor& t, void* data, size_t offset, size_t size) {
  const uint64_t start = range_of(t, offset, size, "rpc get_tensor");
  const uint64_t row = offset == 0 && size == t.nbytes() ? sparse_row_bytes(t) : 0;
  if (row != 0) {
    connection_->get_tensor_rows(handle_, start, row, size / row, data);
  } else {
    connection_->get_tensor(handle_, start, data, size);
  }
}

uint64_t RemoteBuffer::start_read(const Tensor& t) {
  // Sparse rows (routed_rows) read only their listed rows: not started ahead.
  if (t.nbytes() == 0 || sparse_row_bytes(t) != 0) return 0;
  return connection_->start_get_tensor(handle_, range_of(t, 0, t.nbytes(), "rpc start_read"), t.nbytes());
}

void RemoteBuffer::finish_read(uint64_t ticket, void* data) {
  connection_->finish_get_tensor(ticket, data);
}

void RemoteBuffer::drop_read(uint64_t ticket) noexcept {
  connection_->drop_get_tensor(ticket);
}

void RemoteBuffer::memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) {
  connection_->send(MemsetTensorRequest{handle_, range_of(t, offset, size, "rpc memset_tensor"), size, value});
}

bool RemoteBuffer::copy_tensor(const Tensor& src, Tensor& dst) {
  // A byte copy is only a tensor copy when both sides are packed alike.
  if (src.buffer == nullptr || src.type != dst.type || !same_shape(src, dst) || !src.is_contiguous() ||
      !dst.is_contiguous()) {
    return false;
  }
  const size_t n = src.nbytes();
  const uint64_t dst_offset = range_of(dst, 0, n, "rpc copy_tensor");
  auto* from = dynamic_cast<RemoteBuffer*>(src.buffer);
  if (from != nullptr && from->connection_ == connection_) {
    connection_->send(CopyTensorRequest{from->handle_, from->range_of(src, 0, n, "rpc copy_tensor"), handle_,
                                        dst_offset, n});
    return true;
  }
  if (from == nullptr && src.buffer->type().is_host() && src.data != nullptr) {
    if (const uint64_t row = sparse_row_bytes(src)) {
      upload_rows(dst_offset, static_cast<const uint8_t*>(src.data), row, n / row);
    } else {
      upload(dst_offset, src.data, n, /*try_cache=*/false);
    }
    return true;
  }
  return false;
}

void RemoteBuffer::clear(uint8_t value) {
  connection_->send(ClearBufferRequest{handle_, value});
}

}  // namespace weft::rpc
