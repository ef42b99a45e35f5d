// Shared helpers for the backend interfaces.
#include <string>
#include <utility>
#include <vector>

#include "weft/backend/backend.h"
#include "weft/core/error.h"

namespace weft {

void Backend::set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) {
  tensor_set(t, data, offset, size);
}

void Backend::get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) {
  tensor_get(t, data, offset, size);
}

namespace {

size_t align_up(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

void check_range(const Tensor& t, size_t offset, size_t size, const char* what) {
  const size_t n = t.nbytes();
  if (offset > n || size > n - offset) {
    fail(ErrorKind::invalid_input, what,
         "bytes [" + std::to_string(offset) + ", +" + std::to_string(size) + ") are outside " + shape_string(t) +
             " '" + t.name + "' (" + std::to_string(n) + " bytes)");
  }
  if (t.buffer == nullptr) fail(ErrorKind::invalid_input, what, "tensor '" + t.name + "' has no buffer");
}

}  // namespace

void bind_tensor(Tensor& t, Buffer& buf, size_t offset) {
  const size_t need = buf.type().alloc_size(t);
  if (offset > buf.size() || need > buf.size() - offset) {
    fail(ErrorKind::invalid_input, "bind_tensor",
         shape_string(t) + " needs " + std::to_string(need) + " bytes at offset " + std::to_string(offset) +
             " in a buffer of " + std::to_string(buf.size()));
  }
  t.buffer = &buf;
  t.data = static_cast<uint8_t*>(buf.base()) + offset;
  buf.init_tensor(t);
}

void bind_view(Tensor& t) {
  Tensor* root = t.view_src;
  if (root == nullptr || root->buffer == nullptr) {
    fail(ErrorKind::invalid_input, "bind_view", "view '" + t.name + "' has no bound source");
  }
  t.buffer = root->buffer;
  t.data = static_cast<uint8_t*>(root->data) + t.view_offs;
  t.buffer->init_tensor(t);
}

std::unique_ptr<Buffer> allocate_tensors(BufferType& bt, std::span<Tensor* const> tensors) {
  const size_t alignment = bt.alignment();
  size_t total = 0;
  std::vector<std::pair<Tensor*, size_t>> placed;
  for (Tensor* t : tensors) {
    if (t->buffer != nullptr || t->view_src != nullptr) continue;
    placed.emplace_back(t, total);
    total += align_up(bt.alloc_size(*t), alignment);
  }
  std::unique_ptr<Buffer> buf;
  if (!placed.empty()) {
    buf = bt.allocate(total);
    for (auto& [t, offset] : placed) bind_tensor(*t, *buf, offset);
  }
  for (Tensor* t : tensors) {
    if (t->buffer == nullptr && t->view_src != nullptr) bind_view(*t);
  }
  return buf;
}

void tensor_set(Tensor& t, const void* data, size_t offset, size_t size) {
  check_range(t, offset, size, "tensor_set");
  t.buffer->set_tensor(t, data, offset, size);
}

void tensor_get(const Tensor& t, void* data, size_t offset, size_t size) {
  check_range(t, offset, size, "tensor_get");
  t.buffer->get_tensor(t, data, offset, size);
}

}  // namespace weft
