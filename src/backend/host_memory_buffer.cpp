// wrap_host_memory (weft/backend/backend.h): a read-only buffer over host
// memory that something else owns, the bytes of a mapped model file.
#include <cstring>
#include <string>
#include <utility>

#include "weft/backend/backend.h"
#include "weft/core/error.h"

namespace weft {
namespace {

class HostMemoryBuffer final : public Buffer {
 public:
  HostMemoryBuffer(BufferType& type, std::shared_ptr<const void> keep_alive, const void* base, size_t size)
      : type_(type), keep_alive_(std::move(keep_alive)), base_(base), size_(size) {}

  BufferType& type() override { return type_; }
  // Mutable in the interface only: every write below refuses.
  void* base() override { return const_cast<void*>(base_); }
  size_t size() const override { return size_; }

  void set_tensor(Tensor& t, const void*, size_t, size_t) override { refuse("set_tensor", t); }
  void memset_tensor(Tensor& t, uint8_t, size_t, size_t) override { refuse("memset_tensor", t); }
  void clear(uint8_t) override {
    fail(ErrorKind::invalid_input, "host memory buffer", "clear: the buffer is read-only (mapped weights)");
  }
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override {
    std::memcpy(data, static_cast<const uint8_t*>(t.data) + offset, size);
  }

 private:
  [[noreturn]] static void refuse(const char* what, const Tensor& t) {
    fail(ErrorKind::invalid_input, "host memory buffer",
         std::string(what) + " on '" + t.name + "': the buffer is read-only (mapped weights)");
  }

  BufferType& type_;
  std::shared_ptr<const void> keep_alive_;
  const void* base_;
  size_t size_;
};

}  // namespace

std::unique_ptr<Buffer> wrap_host_memory(BufferType& type, std::shared_ptr<const void> keep_alive, const void* base,
                                         size_t size) {
  if (!type.is_host())
    fail(ErrorKind::invalid_input, "wrap_host_memory", "buffer type '" + type.name() + "' is not host memory");
  if (base == nullptr && size > 0) fail(ErrorKind::invalid_input, "wrap_host_memory", "null memory");
  return std::make_unique<HostMemoryBuffer>(type, std::move(keep_alive), base, size);
}

}  // namespace weft
