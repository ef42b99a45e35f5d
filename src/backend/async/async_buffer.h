// The async device's own host buffer type: host memory from an inner CPU
// buffer type, presented as belonging to the async device. Buffers are
// wrapped too, so that buffer.type().device() is the async device (the
// scheduler finds a tensor's backend from its buffer's type).
#pragma once

#include <memory>
#include <string>

#include "weft/backend/backend.h"

namespace weft::async {

// Holds references only: device and inner (the inner CPU device's buffer
// type) must outlive this type and every buffer it allocates. Thread-safe
// as far as inner is.
class HostBufferType final : public BufferType {
 public:
  // host_visible false makes the type claim not to be host memory (an
  // isolated device's memory, like a GPU's).
  HostBufferType(Device& device, BufferType& inner, std::string name, bool host_visible)
      : device_(device), inner_(inner), name_(std::move(name)), host_visible_(host_visible) {}
  HostBufferType(const HostBufferType&) = delete;
  HostBufferType& operator=(const HostBufferType&) = delete;

  std::string name() const override { return name_; }
  Device& device() override { return device_; }
  size_t alignment() const override { return inner_.alignment(); }
  size_t max_size() const override { return inner_.max_size(); }
  size_t alloc_size(const Tensor& t) const override { return inner_.alloc_size(t); }
  bool is_host() const override { return host_visible_; }
  // Throws Error(out_of_memory) as the inner type does.
  std::unique_ptr<Buffer> allocate(size_t size) override;

 private:
  Device& device_;
  BufferType& inner_;
  std::string name_;
  bool host_visible_;
};

}  // namespace weft::async
