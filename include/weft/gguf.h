// GGUF v3 files (the format is in FACTS.md, "GGUF v3"): a reader that maps a
// file read-only and checks every count, length and offset against the file
// size, and a writer that produces v3 files atomically.
//
//   auto f = weft::GgufFile::open("model.gguf");         // throws weft::Error
//   uint32_t n_layer = f->get_u32("llama.block_count").value_or(0);
//   for (const weft::GgufTensorInfo& t : f->tensors())
//     upload(t.name, t.dtype(), t.ne, f->tensor_data(t), t.nbytes);
//
//   weft::GgufWriter w;
//   w.set_string("general.architecture", "llama");
//   const int64_t ne[2] = {4096, 32000};
//   w.add_tensor("token_embd.weight", weft::DType::f16, ne, data);
//   w.write("out.gguf");                                   // data read here
//
// Caps on what the reader accepts (a file beyond them is refused as
// invalid_input): kGgufMaxTensors tensors, kGgufMaxKVs key/values, strings of
// kGgufMaxString bytes, arrays nested kGgufMaxDepth deep (an array of arrays,
// no deeper), and array counts no larger than the bytes left in the file
// allow. Errors name the file, the field and its byte position.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "weft/dtype.h"

namespace weft {

inline constexpr uint64_t kGgufMaxTensors = 1'000'000;
inline constexpr uint64_t kGgufMaxKVs = 1'000'000;
inline constexpr uint64_t kGgufMaxString = 1u << 20;  // bytes, keys and names included
inline constexpr int kGgufMaxDepth = 2;               // array nesting
inline constexpr uint32_t kGgufDefaultAlignment = 32;

enum class GgufType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
const char* gguf_type_name(GgufType t);

// One metadata value. Integers and bool live in u (unsigned) or i (signed),
// floats in f, strings in s; an array has elem_type and its elements in arr.
struct GgufValue {
  GgufType type = GgufType::u8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  GgufType elem_type = GgufType::u8;  // arrays only
  std::vector<GgufValue> arr;         // arrays only
};

struct GgufTensorInfo {
  std::string name;
  bool supported = false;  // ggml_type maps to a weft DType
  DType type = DType::f32;  // valid only if supported
  uint32_t ggml_type = 0;   // the GGUF dtype id as stored
  int n_dims = 0;           // 1..4
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t offset = 0;  // from the start of the data section
  size_t nbytes = 0;    // 0 for a dtype id whose layout the reader does not know
  // The weft dtype; throws Error(unsupported) "unsupported dtype id N".
  DType dtype() const;
};

// An open GGUF file. The mapping lives as long as the object; pointers from
// tensor_data() and references into tensors() die with it. Const methods are
// safe to call from several threads.
class GgufFile {
 public:
  static std::unique_ptr<GgufFile> open(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return 3; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file position of the data section

  // Metadata in file order. Typed getters return nullopt when the key is
  // absent and throw Error(invalid_input) naming the key when the stored type
  // does not fit (integers convert when the value is in range; f32 accepts
  // f64; array getters want an array of that kind).
  bool has(const std::string& key) const { return find(key) != nullptr; }
  std::vector<std::string> keys() const;
  const GgufValue* find(const std::string& key) const;
  std::optional<uint32_t> get_u32(const std::string& key) const;
  std::optional<int64_t> get_i64(const std::string& key) const;
  std::optional<float> get_f32(const std::string& key) const;
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<std::vector<std::string>> get_array_strings(const std::string& key) const;
  std::optional<std::vector<float>> get_array_f32(const std::string& key) const;
  std::optional<std::vector<int32_t>> get_array_i32(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // The tensor's bytes inside the mapping (nbytes long). Throws
  // Error(unsupported) for a dtype weft does not support.
  const void* tensor_data(const GgufTensorInfo& info) const;

 private:
  GgufFile() = default;
  friend class GgufParser;
  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kvs_;
  std::vector<GgufTensorInfo> tensors_;
};

// Builds a GGUF v3 file in memory order: metadata in the order first set
// (setting a key again replaces its value), tensors in the order added, each
// at the next multiple of the alignment (general.alignment if set as a u32,
// else 32), zero padding between. Not thread-safe.
class GgufWriter {
 public:
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_array(const std::string& key, const std::vector<std::string>& v);
  void set_array(const std::string& key, const std::vector<float>& v);
  void set_array(const std::string& key, const std::vector<int32_t>& v);
  void set_value(const std::string& key, GgufValue v);  // any type, e.g. nested arrays

  // ne has 1..4 dims, ne[0] fastest; ne[0] a multiple of 32 for q8_0/q4_0.
  // data (row-major, contiguous) is not copied: it must stay valid until
  // write() returns.
  void add_tensor(const std::string& name, DType type, std::span<const int64_t> ne, const void* data);

  // Writes to a temporary file beside path, then renames it over path.
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    const void* data;
    size_t nbytes;
  };
  std::vector<std::pair<std::string, GgufValue>> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace weft
