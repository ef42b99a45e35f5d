// What the GGUF reader, writer and arrays share: the dtype id table and the
// encoding of fixed-size values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "weft/core/dtype.h"
#include "weft/gguf/gguf.h"

namespace weft::detail {

// GGUF dtype id <-> weft DType for the six weft supports.
std::optional<DType> dtype_from_ggml(uint32_t id);
uint32_t ggml_from_dtype(DType t);

// Storage layout of a GGUF dtype id: block elements and bytes per block.
// False for an id whose layout is not known here.
bool ggml_layout(uint32_t id, int64_t* block, size_t* block_bytes);

// Encoded bytes of one value of type t: 1..8, or 0 for string and array.
size_t fixed_size(GgufType t);
// A fixed-size value's bytes (fixed_size(v.type) of them) into out[8].
void encode_fixed(const GgufValue& v, uint8_t* out);
// The fixed-size value of type t at p (trusted bytes).
GgufValue decode_fixed(GgufType t, const uint8_t* p);

}  // namespace weft::detail

namespace weft {

// A file written beside its target under a temporary name and renamed over
// it by commit(); destroyed uncommitted, the temporary file is removed.
class GgufWriter::Output {
 public:
  explicit Output(const std::string& path);
  ~Output();
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;
  void write(const void* data, size_t n);
  void flush();   // fsync and close; commit() flushes when not yet done
  void commit();  // renames the temporary file over the target

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace weft
