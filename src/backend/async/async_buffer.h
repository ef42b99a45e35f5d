// The async device's own host buffer type: host memory from an inner CPU
// buffer type, presented as belonging to the async device. Buffers are
// wrapped too, so that buffer.type().device() is the async device (the
// scheduler finds a tensor's backend from its buffer's type).
#pragma once

#include <memory>
#include <string>

#include "weft/backend.h"

namespace weft::async {

// Holds references only: device and inner (the inner CPU device's buffer
// type) must outlive this type and every buffer it allocates. Thread-safe
// as far as inner is.
class HostBufferType final : public BufferType {
 public:
  HostBufferType(Device& device, BufferType& inner, std::string name)
      : device_(device), inner_(inner), name_(std::move(name)) {}
  HostBufferType(const HostBufferType&) = delete;
  HostBufferType& operator=(const HostBufferType&) = delete;

  std::string name() const override { return name_; }
  Device& device() override { return device_; }
  size_t alignment() const override { return inner_.alignment(); }
  size_t max_size() const override { return inner_.max_size(); }
  size_t alloc_size(const Tensor& t) const override { return inner_.alloc_size(t); }
  bool is_host() const override { return true; }
  // Throws Error(out_of_memory) as the inner type does.
  std::unique_ptr<Buffer> allocate(size_t size) override;

 private:
  Device& device_;
  BufferType& inner_;
  std::string name_;
};

}  // namespace weft::async
