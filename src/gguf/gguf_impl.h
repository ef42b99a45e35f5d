// What the GGUF reader and writer share: the dtype id table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "weft/dtype.h"

namespace weft::detail {

// GGUF dtype id <-> weft DType for the six weft supports.
std::optional<DType> dtype_from_ggml(uint32_t id);
uint32_t ggml_from_dtype(DType t);

// Storage layout of a GGUF dtype id: block elements and bytes per block.
// False for an id whose layout is not known here.
bool ggml_layout(uint32_t id, int64_t* block, size_t* block_bytes);

}  // namespace weft::detail
