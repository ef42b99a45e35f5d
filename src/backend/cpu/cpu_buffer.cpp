#include "cpu_buffer.h"

#include <cstring>
#include <new>
#include <string>

#include "weft/core/error.h"

namespace weft::cpu {
namespace {

class CpuBuffer final : public Buffer {
 public:
  CpuBuffer(BufferType& type, size_t size) : type_(type), size_(size) {
    // At least one aligned unit, so that base() is valid even for size 0.
    const size_t bytes = (size + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment + kCpuAlignment;
    data_ = static_cast<uint8_t*>(::operator new(bytes, std::align_val_t(kCpuAlignment), std::nothrow));
    if (data_ == nullptr) {
      fail(ErrorKind::out_of_memory, "cpu buffer", "cannot allocate " + std::to_string(size) + " bytes");
    }
  }
  ~CpuBuffer() override { ::operator delete(data_, std::align_val_t(kCpuAlignment)); }
  CpuBuffer(const CpuBuffer&) = delete;
  CpuBuffer& operator=(const CpuBuffer&) = delete;

  BufferType& type() override { return type_; }
  void* base() override { return data_; }
  size_t size() const override { return size_; }

  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override {
    std::memcpy(static_cast<uint8_t*>(t.data) + offset, data, size);
  }
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override {
    std::memcpy(data, static_cast<const uint8_t*>(t.data) + offset, size);
  }
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override {
    std::memset(static_cast<uint8_t*>(t.data) + offset, value, size);
  }
  bool copy_tensor(const Tensor& src, Tensor& dst) override {
    // A byte copy is only a tensor copy when both sides are packed alike.
    if (src.buffer == nullptr || !src.buffer->type().is_host() || src.type != dst.type || !same_shape(src, dst) ||
        !src.is_contiguous() || !dst.is_contiguous()) {
      return false;
    }
    std::memcpy(dst.data, src.data, src.nbytes());
    return true;
  }
  void clear(uint8_t value) override { std::memset(data_, value, size_); }

 private:
  BufferType& type_;
  size_t size_;
  uint8_t* data_;
};

}  // namespace

std::unique_ptr<Buffer> CpuBufferType::allocate(size_t size) {
  if (size > (size_t{1} << 52)) {
    fail(ErrorKind::out_of_memory, "cpu buffer", "cannot allocate " + std::to_string(size) + " bytes");
  }
  return std::make_unique<CpuBuffer>(*this, size);
}

}  // namespace weft::cpu
