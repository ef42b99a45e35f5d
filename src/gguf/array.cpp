// GgufArray: metadata array elements kept encoded, decoded on access.
#include <cstring>
#include <functional>

#include "gguf_impl.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace weft {

namespace detail {

size_t fixed_size(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::boolean: return 1;
    case GgufType::u16: case GgufType::i16: return 2;
    case GgufType::u32: case GgufType::i32: case GgufType::f32: return 4;
    case GgufType::u64: case GgufType::i64: case GgufType::f64: return 8;
    case GgufType::string: case GgufType::array: return 0;
  }
  return 0;
}

namespace {
template <typename T>
void store(uint8_t* out, T v) {
  std::memcpy(out, &v, sizeof v);
}
template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
}  // namespace

void encode_fixed(const GgufValue& v, uint8_t* out) {
  switch (v.type) {
    case GgufType::u8: store<uint8_t>(out, static_cast<uint8_t>(v.u)); break;
    case GgufType::i8: store<int8_t>(out, static_cast<int8_t>(v.i)); break;
    case GgufType::u16: store<uint16_t>(out, static_cast<uint16_t>(v.u)); break;
    case GgufType::i16: store<int16_t>(out, static_cast<int16_t>(v.i)); break;
    case GgufType::u32: store<uint32_t>(out, static_cast<uint32_t>(v.u)); break;
    case GgufType::i32: store<int32_t>(out, static_cast<int32_t>(v.i)); break;
    case GgufType::u64: store<uint64_t>(out, v.u); break;
    case GgufType::i64: store<int64_t>(out, v.i); break;
    case GgufType::f32: store<float>(out, static_cast<float>(v.f)); break;
    case GgufType::f64: store<double>(out, v.f); break;
    case GgufType::boolean: store<uint8_t>(out, v.u ? 1 : 0); break;
    case GgufType::string: case GgufType::array:
      fail(ErrorKind::internal, "gguf", std::string("encode_fixed of a ") + gguf_type_name(v.type));
  }
}

GgufValue decode_fixed(GgufType t, const uint8_t* p) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufType::u8: case GgufType::boolean: v.u = load<uint8_t>(p); break;
    case GgufType::i8: v.i = load<int8_t>(p); break;
    case GgufType::u16: v.u = load<uint16_t>(p); break;
    case GgufType::i16: v.i = load<int16_t>(p); break;
    case GgufType::u32: v.u = load<uint32_t>(p); break;
    case GgufType::i32: v.i = load<int32_t>(p); break;
    case GgufType::u64: v.u = load<uint64_t>(p); break;
    case GgufType::i64: v.i = load<int64_t>(p); break;
    case GgufType::f32: v.f = load<float>(p); break;
    case GgufType::f64: v.f = load<double>(p); break;
    case GgufType::string: case GgufType::array:
      fail(ErrorKind::internal, "gguf", std::string("decode_fixed of a ") + gguf_type_name(t));
  }
  return v;
}

}  // namespace detail

namespace {

[[noreturn]] void misuse(GgufType elem_type, const std::string& what) {
  fail(ErrorKind::invalid_input, "gguf", std::string("array<") + gguf_type_name(elem_type) + ">: " + what);
}

uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

GgufArray GgufArray::packed(GgufType elem_type, const void* data, size_t count) {
  size_t size = detail::fixed_size(elem_type);
  if (size == 0) misuse(elem_type, "packed() takes fixed-size elements only");
  GgufArray a(elem_type);
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (elem_type == GgufType::boolean)
    for (size_t i = 0; i < count; ++i)
      if (p[i] > 1) misuse(elem_type, "element " + std::to_string(i) + " is neither 0 nor 1");
  a.append(p, count * size);
  a.count_ = count;
  return a;
}

uint64_t GgufArray::offset_of(size_t i) const {
  if (i >= count_) misuse(elem_type_, "index " + std::to_string(i) + " is past its " + std::to_string(count_) + " elements");
  size_t size = detail::fixed_size(elem_type_);
  return size ? i * size : offsets_[i];
}

std::string_view GgufArray::string(size_t i) const {
  if (elem_type_ != GgufType::string) misuse(elem_type_, "string() of a non-string element");
  const uint8_t* p = data() + offset_of(i);
  return {reinterpret_cast<const char*>(p + 8), static_cast<size_t>(load_u64(p))};
}

GgufValue GgufArray::element(size_t i) const {
  const uint8_t* p = data() + offset_of(i);
  if (elem_type_ == GgufType::string) {
    GgufValue v;
    v.type = GgufType::string;
    v.s = string(i);
    return v;
  }
  if (elem_type_ != GgufType::array) return detail::decode_fixed(elem_type_, p);
  // A nested array: a view of its bytes, with offsets for string elements.
  GgufValue v;
  v.type = GgufType::array;
  GgufArray& a = v.arr;
  uint32_t type;
  std::memcpy(&type, p, sizeof type);
  a.elem_type_ = static_cast<GgufType>(type);
  a.count_ = load_u64(p + 4);
  a.view_ = p + 12;
  if (size_t size = detail::fixed_size(a.elem_type_)) {
    a.nbytes_ = a.count_ * size;
  } else {  // strings: the parser and push() admit no deeper nesting
    a.offsets_.reserve(a.count_);
    for (uint64_t k = 0; k < a.count_; ++k) {
      a.offsets_.push_back(a.nbytes_);
      a.nbytes_ += 8 + load_u64(a.view_ + a.nbytes_);
    }
  }
  return v;
}

void GgufArray::own() {
  if (!view_) return;
  owned_.assign(view_, view_ + nbytes_);
  view_ = nullptr;
}

void GgufArray::append(const void* p, size_t n) {
  own();
  const uint8_t* b = static_cast<const uint8_t*>(p);
  std::less<const uint8_t*> before;
  if (!owned_.empty() && !before(b, owned_.data()) && before(b, owned_.data() + owned_.size())) {
    std::vector<uint8_t> copy(b, b + n);  // b is inside owned_, which may move
    owned_.insert(owned_.end(), copy.begin(), copy.end());
  } else {
    owned_.insert(owned_.end(), b, b + n);
  }
  nbytes_ += n;
}

void GgufArray::push(std::string_view s) {
  if (elem_type_ != GgufType::string) misuse(elem_type_, "cannot append a string");
  offsets_.push_back(nbytes_);
  uint64_t n = s.size();
  append(&n, sizeof n);
  append(s.data(), s.size());
  ++count_;
}

void GgufArray::push(const GgufValue& v) {
  if (v.type != elem_type_) misuse(elem_type_, std::string("cannot append a ") + gguf_type_name(v.type));
  if (v.type == GgufType::string) return push(std::string_view(v.s));
  if (v.type == GgufType::array) {
    if (v.arr.elem_type_ == GgufType::array)
      misuse(elem_type_, "arrays nest at most " + std::to_string(kGgufMaxDepth) + " deep");
    offsets_.push_back(nbytes_);
    uint32_t type = static_cast<uint32_t>(v.arr.elem_type_);
    append(&type, sizeof type);
    append(&v.arr.count_, sizeof v.arr.count_);
    append(v.arr.data(), v.arr.nbytes_);
  } else {
    uint8_t buf[8];
    detail::encode_fixed(v, buf);
    append(buf, detail::fixed_size(v.type));
  }
  ++count_;
}

}  // namespace weft
