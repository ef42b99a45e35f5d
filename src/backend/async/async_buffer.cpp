#include "async_buffer.h"

#include <utility>

namespace weft::async {
namespace {

// Owns the inner (CPU) buffer and forwards every call to it; only type()
// differs. Synchronous calls act on memory at once, like the CPU's: ordering
// them against queued work is the caller's job.
class HostBuffer final : public Buffer {
 public:
  HostBuffer(BufferType& type, std::unique_ptr<Buffer> inner) : type_(type), inner_(std::move(inner)) {}
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  BufferType& type() override { return type_; }
  void* base() override { return inner_->base(); }
  size_t size() const override { return inner_->size(); }
  void set_usage(BufferUsage usage) override { inner_->set_usage(usage); }
  void init_tensor(Tensor& t) override { inner_->init_tensor(t); }
  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override {
    inner_->set_tensor(t, data, offset, size);
  }
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override {
    inner_->get_tensor(t, data, offset, size);
  }
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override {
    inner_->memset_tensor(t, value, offset, size);
  }
  bool copy_tensor(const Tensor& src, Tensor& dst) override { return inner_->copy_tensor(src, dst); }
  void clear(uint8_t value) override { inner_->clear(value); }

 private:
  BufferType& type_;
  std::unique_ptr<Buffer> inner_;
};

}  // namespace

std::unique_ptr<Buffer> HostBufferType::allocate(size_t size) {
  return std::make_unique<HostBuffer>(*this, inner_.allocate(size));
}

}  // namespace weft::async
