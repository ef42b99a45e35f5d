// Host memory buffers for the CPU device.
#pragma once

#include <memory>

#include "weft/backend/backend.h"

namespace weft::cpu {

inline constexpr size_t kCpuAlignment = 64;

class CpuBufferType final : public BufferType {
 public:
  explicit CpuBufferType(Device& device) : device_(device) {}
  std::string name() const override { return "CPU"; }
  Device& device() override { return device_; }
  size_t alignment() const override { return kCpuAlignment; }
  bool is_host() const override { return true; }
  std::unique_ptr<Buffer> allocate(size_t size) override;

 private:
  Device& device_;
};

}  // namespace weft::cpu
