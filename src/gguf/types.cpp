#include "gguf_impl.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace weft {

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::u8: return "u8";
    case GgufType::i8: return "i8";
    case GgufType::u16: return "u16";
    case GgufType::i16: return "i16";
    case GgufType::u32: return "u32";
    case GgufType::i32: return "i32";
    case GgufType::f32: return "f32";
    case GgufType::boolean: return "bool";
    case GgufType::string: return "string";
    case GgufType::array: return "array";
    case GgufType::u64: return "u64";
    case GgufType::i64: return "i64";
    case GgufType::f64: return "f64";
  }
  return "?";
}

DType GgufTensorInfo::dtype() const {
  if (!supported)
    fail(ErrorKind::unsupported, "gguf", "tensor '" + name + "': unsupported dtype id " + std::to_string(ggml_type));
  return type;
}

namespace detail {

std::optional<DType> dtype_from_ggml(uint32_t id) { return dtype_from_gguf_id(id); }

uint32_t ggml_from_dtype(DType t) { return traits(t).gguf_id; }

bool ggml_layout(uint32_t id, int64_t* block, size_t* block_bytes) {
  // {id, block elements, bytes per block} for the ggml layouts whose sizes
  // are fixed; unsupported ones are only bounds-checked with these.
  static constexpr struct { uint32_t id; int64_t block; size_t bytes; } kTable[] = {
      {0, 1, 4},      {1, 1, 2},      {2, 32, 18},    {3, 32, 20},    {6, 32, 22},    {7, 32, 24},
      {8, 32, 34},    {9, 32, 36},    {10, 256, 84},  {11, 256, 110}, {12, 256, 144}, {13, 256, 176},
      {14, 256, 210}, {15, 256, 292}, {16, 256, 66},  {20, 32, 18},   {23, 256, 136}, {24, 1, 1},
      {25, 1, 2},     {26, 1, 4},     {27, 1, 8},     {28, 1, 8},     {30, 1, 2},     {39, 32, 17},
  };
  for (const auto& e : kTable) {
    if (e.id == id) {
      *block = e.block;
      *block_bytes = e.bytes;
      return true;
    }
  }
  return false;
}

}  // namespace detail
}  // namespace weft
