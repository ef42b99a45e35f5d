// A tensor's f32 values, read back from wherever its memory lives
// (tensor_get): what the scheduler and kernel tests compare.
#pragma once

#include <vector>

#include "weft/backend/backend.h"
#include "weft/core/tensor.h"

namespace weft::test {

inline std::vector<float> read(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.nelements()));
  tensor_get(t, v.data(), 0, t.nbytes());
  return v;
}

}  // namespace weft::test
