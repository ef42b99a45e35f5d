// Tensor metadata. A Tensor describes data; it owns none. Tensors live in a
// Context (the arena that built them); graphs and buffers refer to them by
// plain pointer. Shapes use ggml's convention: ne[0] is the fastest-varying
// dimension, nb[i] is the byte stride of dimension i.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "weft/core/dtype.h"
#include "weft/core/op_registry.h"

namespace weft {

class Buffer;

inline constexpr int kMaxDims = 4;
// Five: flash_attn's attention sinks are its fifth source. The RPC wire
// carries four (rpc/protocol/wire.h kWireSrc); a node using the fifth stays
// on local devices.
inline constexpr int kMaxSrc = 5;
inline constexpr int kMaxOpParams = 16;  // 32-bit words
static_assert([] {
  for (const OpInfo& r : kOpRegistry)
    if (r.max_src > kMaxSrc) return false;
  return true;
}(), "an op row takes more sources than a Tensor holds");


enum TensorFlag : uint32_t {
  kFlagInput = 1u << 0,   // set from outside before compute
  kFlagOutput = 1u << 1,  // read after compute; never reused by the allocator
  kFlagWeight = 1u << 2,  // lives in a weights buffer
  // A hint to whoever moves the tensor between devices: many of its rows are
  // expected to be all zero bytes, so a transfer may carry only the others
  // (the receiver's copy is still equal, byte for byte). Never sent to a
  // worker; set by routed_rows and by the model on an expert slice's sum.
  kFlagSparseRows = 1u << 3,
};

enum class SortOrder : int32_t { ascending = 0, descending = 1 };
enum class RopeMode : int32_t { normal = 0, neox = 1 };

struct Tensor {
  DType type = DType::f32;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};
  size_t nb[kMaxDims] = {0, 0, 0, 0};

  Op op = Op::none;
  int32_t op_params[kMaxOpParams] = {};
  Tensor* src[kMaxSrc] = {};

  Tensor* view_src = nullptr;  // the tensor whose memory this one aliases
  size_t view_offs = 0;        // byte offset into view_src's data

  uint32_t flags = 0;
  Buffer* buffer = nullptr;  // set when placed in memory
  void* data = nullptr;      // buffer->base() + offset; meaningful to that buffer only

  std::string name;

  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
  // Bytes spanned from data to one past the last element (strides may leave gaps).
  size_t nbytes() const;
  bool is_contiguous() const;   // packed in ne order with no gaps
  bool rows_contiguous() const; // each row packed (nb[0] is the unit size)
  bool is_view() const { return view_src != nullptr; }
  // The tensor whose memory this one is: itself, or what it views.
  const Tensor* view_root() const { return view_src != nullptr ? view_src : this; }
  bool has_flag(TensorFlag f) const { return (flags & f) != 0; }

  int32_t param_i32(int i) const { return op_params[i]; }
  float param_f32(int i) const {
    float f;
    std::memcpy(&f, &op_params[i], sizeof f);
    return f;
  }
  void set_param_i32(int i, int32_t v) { op_params[i] = v; }
  void set_param_f32(int i, float v) { std::memcpy(&op_params[i], &v, sizeof v); }
};

// Fills nb[] for a packed layout of t->type and t->ne.
void set_packed_strides(Tensor& t);
bool same_shape(const Tensor& a, const Tensor& b);
// "f32[4,3,1,1]" for error messages and test names.
std::string shape_string(const Tensor& t);

}  // namespace weft
