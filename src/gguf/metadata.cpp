// GgufFile's typed metadata getters.
#include <limits>

#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace weft {

namespace {

bool is_unsigned(GgufType t) {
  return t == GgufType::u8 || t == GgufType::u16 || t == GgufType::u32 || t == GgufType::u64;
}
bool is_signed(GgufType t) {
  return t == GgufType::i8 || t == GgufType::i16 || t == GgufType::i32 || t == GgufType::i64;
}

[[noreturn]] void mismatch(const std::string& path, const std::string& key, const GgufValue& v, const char* want) {
  std::string have = gguf_type_name(v.type);
  if (v.type == GgufType::array) have += std::string(" of ") + gguf_type_name(v.arr.elem_type());
  fail(ErrorKind::invalid_input, "gguf", path + ": key '" + key + "' has type " + have + ", expected " + want);
}

// An integer value if it lies in [lo, hi].
template <typename T>
std::optional<T> int_in_range(const GgufValue& v) {
  if (is_unsigned(v.type)) {
    if (v.u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(v.u);
  }
  if (is_signed(v.type)) {
    if (v.i < static_cast<int64_t>(std::numeric_limits<T>::min())) return std::nullopt;
    if (v.i >= 0 && static_cast<uint64_t>(v.i) > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(v.i);
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint32_t> GgufFile::get_u32(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  std::optional<uint32_t> r = int_in_range<uint32_t>(*v);
  if (!r) mismatch(path_, key, *v, "an integer in u32 range");
  return r;
}

std::optional<int64_t> GgufFile::get_i64(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  std::optional<int64_t> r = int_in_range<int64_t>(*v);
  if (!r) mismatch(path_, key, *v, "an integer in i64 range");
  return r;
}

std::optional<float> GgufFile::get_f32(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::f32 && v->type != GgufType::f64) mismatch(path_, key, *v, "f32");
  return static_cast<float>(v->f);
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::boolean) mismatch(path_, key, *v, "bool");
  return v->u != 0;
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::string) mismatch(path_, key, *v, "string");
  return v->s;
}

std::optional<std::vector<std::string>> GgufFile::get_array_strings(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::array || v->arr.elem_type() != GgufType::string) mismatch(path_, key, *v, "array of string");
  std::vector<std::string> out;
  out.reserve(v->arr.size());
  for (size_t i = 0; i < v->arr.size(); ++i) out.emplace_back(v->arr.string(i));
  return out;
}

std::optional<std::vector<float>> GgufFile::get_array_f32(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::array || (v->arr.elem_type() != GgufType::f32 && v->arr.elem_type() != GgufType::f64))
    mismatch(path_, key, *v, "array of f32");
  std::vector<float> out;
  out.reserve(v->arr.size());
  for (size_t i = 0; i < v->arr.size(); ++i) out.push_back(static_cast<float>(v->arr.element(i).f));
  return out;
}

std::optional<std::vector<int32_t>> GgufFile::get_array_i32(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::array || !(is_signed(v->arr.elem_type()) || is_unsigned(v->arr.elem_type())))
    mismatch(path_, key, *v, "array of i32");
  std::vector<int32_t> out;
  out.reserve(v->arr.size());
  for (size_t i = 0; i < v->arr.size(); ++i) {
    GgufValue e = v->arr.element(i);
    std::optional<int32_t> r = int_in_range<int32_t>(e);
    if (!r) mismatch(path_, key + "[" + std::to_string(i) + "]", e, "an integer in i32 range");
    out.push_back(*r);
  }
  return out;
}

}  // namespace weft
