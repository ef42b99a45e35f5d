// Helpers shared by the op constructors (internal to weft_core).
#pragma once

#include <initializer_list>
#include <string>

#include "weft/core/context.h"
#include "weft/core/error.h"

namespace weft::detail {

[[noreturn]] inline void op_fail(Op op, const std::string& what) {
  fail(ErrorKind::invalid_input, op_name(op), what);
}

inline void require(bool ok, Op op, const std::string& what) {
  if (!ok) op_fail(op, what);
}

inline void require_operand(const Tensor* t, Op op, const char* which) {
  if (t == nullptr) op_fail(op, std::string("missing operand ") + which);
}

// Checks t's dtype is one of allowed.
void require_dtype(const Tensor& t, Op op, const char* which, std::initializer_list<DType> allowed);

// Checks t holds stored values: any dtype but i32 (f32, f16, bf16 or any
// quantized type), or any dtype at all when allow_i32.
void require_storage_dtype(const Tensor& t, Op op, const char* which, bool allow_i32 = false);

// A new packed result tensor with the given op and sources.
Tensor* new_result(Context& ctx, Op op, DType type, const int64_t (&ne)[kMaxDims],
                   std::initializer_list<Tensor*> srcs);

// A new result that aliases base's memory with base's shape and strides
// (for ops that write into an existing tensor: set_rows, cpy).
Tensor* new_alias(Context& ctx, Op op, Tensor* base, std::initializer_list<Tensor*> srcs);

inline std::string shapes(const Tensor& a, const Tensor& b) {
  return shape_string(a) + " and " + shape_string(b);
}

}  // namespace weft::detail
