// GGUF v3 files (the format as ggml-org/ggml's docs/gguf.md
// specifies it; split files: docs/models.md): a reader that maps a
// file read-only and checks every count, length and offset against the file
// size, and a writer that produces v3 files atomically.
//
//   auto f = weft::GgufFile::open("model.gguf");         // throws weft::Error
//   uint32_t n_layer = f->get_u32("llama.block_count").value_or(0);
//   for (const weft::GgufTensorInfo& t : f->tensors())
//     upload(t.name, t.dtype(), t.ne, f->tensor_data(t), t.nbytes);
//
//   auto big = weft::GgufFile::open("m-00001-of-00003.gguf");  // all three parts
//
//   weft::GgufWriter w;
//   w.set_string("general.architecture", "llama");
//   const int64_t ne[2] = {4096, 32000};
//   w.add_tensor("token_embd.weight", weft::DType::f16, ne, data);
//   w.write("out.gguf");                                   // data read here
//   w.write_split("out", {.max_bytes = 2ull << 30});       // out-00001-of-0000N.gguf ...
//
// Caps on what the reader accepts (a file beyond them is refused as
// invalid_input): kGgufMaxTensors tensors (in all parts of a split model),
// kGgufMaxKVs key/values, strings of kGgufMaxString bytes, arrays nested
// kGgufMaxDepth deep (an array of arrays, no deeper), array counts no larger
// than the bytes left in the file allow, and kGgufMaxMetadataBytes bytes of
// key/value section (keys, types, strings and array payloads as stored).
// Errors name the file, the field and its byte position.
//
// Split models (docs/models.md, "Split GGUF files"): a file whose split.count
// is over 1 is the first of a set written by llama-gguf-split,
// PREFIX-00001-of-0000N.gguf; open() then reads every part with the same
// reader, checks that they belong together, and presents one file whose
// metadata is the first part's and whose tensors are all the parts'
// (GgufTensorInfo::part says which). A set that does not hold together is
// refused naming the offending file.
//
// Memory: metadata arrays are not expanded per element. A reader's array is a
// view of its bytes in the mapping plus, for string and array elements, one
// 8-byte offset per element (an element is at least 8 bytes in the file), so
// the heap a GgufFile holds for metadata is at most about the size of the
// key/value section plus a fixed cost per key (metadata_heap_bytes()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/dtype.h"

namespace weft {

inline constexpr uint64_t kGgufMaxTensors = 1'000'000;
inline constexpr uint64_t kGgufMaxKVs = 1'000'000;
inline constexpr uint64_t kGgufMaxString = 1u << 20;  // bytes, keys and names included
inline constexpr int kGgufMaxDepth = 2;               // array nesting
// Key/value section bytes; a 256k-token vocabulary with its merges is ~10-20 MB.
inline constexpr uint64_t kGgufMaxMetadataBytes = 256ull << 20;
inline constexpr uint32_t kGgufDefaultAlignment = 32;

enum class GgufType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
const char* gguf_type_name(GgufType t);

struct GgufValue;

// The elements of a metadata array, kept as GGUF encodes them (after the
// element type and count): fixed-size elements packed little-endian, strings
// as u64 length + bytes, arrays as u32 type + u64 count + their elements. An
// array from GgufFile views the mapped file and is valid as long as the
// GgufFile; an array built here owns its bytes. Copies are cheap for views
// and deep for owned arrays.
class GgufArray {
 public:
  GgufArray() = default;  // an empty array of u8
  explicit GgufArray(GgufType elem_type) : elem_type_(elem_type) {}
  // count elements of a fixed-size type (not string or array) copied from
  // data, laid out as in memory (little-endian); bool bytes must be 0 or 1.
  static GgufArray packed(GgufType elem_type, const void* data, size_t count);

  GgufType elem_type() const { return elem_type_; }
  size_t size() const { return static_cast<size_t>(count_); }
  bool empty() const { return count_ == 0; }
  // Element i decoded into a value (integers and bool in u or i, floats in
  // f, a string in s). A nested array's element views this array's bytes and
  // is valid while this array lives unchanged. Throws Error(invalid_input)
  // for i >= size().
  GgufValue element(size_t i) const;
  // Element i of an array of strings, a view of this array's bytes; throws
  // as element() does, or for another element type.
  std::string_view string(size_t i) const;
  // The encoded elements.
  std::span<const uint8_t> bytes() const { return {data(), static_cast<size_t>(nbytes_)}; }

  // Appends v, whose type must be elem_type() (a nested array's elements
  // must not be arrays); a viewed array first copies its bytes. Throws
  // Error(invalid_input) on a type mismatch.
  void push(const GgufValue& v);
  void push(std::string_view s);  // for an array of strings
  // Heap bytes held: the owned bytes and the element offsets (capacities).
  size_t heap_bytes() const { return owned_.capacity() + offsets_.capacity() * sizeof(uint64_t); }

 private:
  friend class GgufParser;
  friend class GgufWriter;
  const uint8_t* data() const { return view_ ? view_ : owned_.data(); }
  uint64_t offset_of(size_t i) const;  // byte offset of element i in bytes()
  void own();                          // copies a view's bytes into owned_
  void append(const void* p, size_t n);

  GgufType elem_type_ = GgufType::u8;
  uint64_t count_ = 0;
  uint64_t nbytes_ = 0;
  const uint8_t* view_ = nullptr;  // the bytes in a mapping, or null when owned
  std::vector<uint8_t> owned_;
  std::vector<uint64_t> offsets_;  // each element's byte offset; string and array elements only
};

// One metadata value. Integers and bool live in u (unsigned) or i (signed),
// floats in f, strings in s; an array's elements are in arr.
struct GgufValue {
  GgufType type = GgufType::u8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  GgufArray arr;  // arrays only
};

struct GgufTensorInfo {
  std::string name;
  bool supported = false;  // ggml_type maps to a weft DType
  DType type = DType::f32;  // valid only if supported
  uint32_t ggml_type = 0;   // the GGUF dtype id as stored
  int n_dims = 0;           // 1..4
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t offset = 0;  // from the start of its part's data section
  size_t nbytes = 0;    // 0 for a dtype id whose layout the reader does not know
  uint32_t part = 0;    // index into GgufFile::parts(): the file holding the bytes
  // The weft dtype; throws Error(unsupported) "unsupported dtype id N".
  DType dtype() const;
};

// One file of a GgufFile: the file itself, or one part of a split model.
struct GgufPart {
  std::string path;
  uint64_t size = 0;         // bytes
  uint64_t data_offset = 0;  // file position of its data section
  uint32_t alignment = kGgufDefaultAlignment;
  size_t n_tensors = 0;      // tensors whose bytes are in this part
};

// The keys llama-gguf-split writes into every part of a split model, with the
// types it gives them.
inline constexpr const char* kGgufSplitNo = "split.no";                    // u16, 0-based part index
inline constexpr const char* kGgufSplitCount = "split.count";              // u16, number of parts
inline constexpr const char* kGgufSplitTensorsCount = "split.tensors.count";  // i32, tensors in all parts
// The standard name of part `no` (0-based) of `count`: PREFIX-%05d-of-%05d.gguf
// with no + 1, as llama_split_path builds it.
std::string gguf_split_path(const std::string& prefix, uint32_t no, uint32_t count);
// The prefix of a path named as part `no` of `count`, or nullopt when the
// name does not end that way (llama_split_prefix).
std::optional<std::string> gguf_split_prefix(const std::string& path, uint32_t no, uint32_t count);

// An open GGUF file. The mapping lives as long as the object; pointers from
// tensor_data() and references into tensors() die with it. Const methods are
// safe to call from several threads.
class GgufFile {
 public:
  // max_metadata_bytes caps the key/value section (tests lower it); each
  // part of a split model is held to it separately. The first part of a
  // split model opens the whole set; any other part is refused, naming the
  // first part's file.
  static std::unique_ptr<GgufFile> open(const std::string& path,
                                        uint64_t max_metadata_bytes = kGgufMaxMetadataBytes);
  // One file as it stands, a split model's part without its siblings (to
  // inspect a part's own keys); its split.* keys are not checked.
  static std::unique_ptr<GgufFile> open_part(const std::string& path,
                                             uint64_t max_metadata_bytes = kGgufMaxMetadataBytes);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }  // the first part's, for a split model
  uint32_t version() const { return 3; }
  uint32_t alignment() const { return alignment_; }     // the first part's
  uint64_t data_offset() const { return data_offset_; }  // the first part's data section position
  // The files read: one for a single file; for a split model every part in
  // order (parts()[0] is path()).
  const std::vector<GgufPart>& parts() const { return parts_; }

  // Metadata in file order. Typed getters return nullopt when the key is
  // absent and throw Error(invalid_input) naming the key when the stored type
  // does not fit (integers convert when the value is in range; f32 accepts
  // f64; array getters want an array of that kind).
  bool has(const std::string& key) const { return find(key) != nullptr; }
  std::vector<std::string> keys() const;
  const GgufValue* find(const std::string& key) const;  // valid as long as this file
  std::optional<uint32_t> get_u32(const std::string& key) const;
  std::optional<int64_t> get_i64(const std::string& key) const;
  std::optional<float> get_f32(const std::string& key) const;
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<std::vector<std::string>> get_array_strings(const std::string& key) const;
  std::optional<std::vector<float>> get_array_f32(const std::string& key) const;
  std::optional<std::vector<int32_t>> get_array_i32(const std::string& key) const;

  // Heap bytes held for metadata (keys, values, element offsets; every
  // part's), from the containers' capacities; the file's own bytes stay in
  // the mapping.
  size_t metadata_heap_bytes() const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // The tensor's bytes inside its part's mapping (nbytes long). Throws
  // Error(unsupported) for a dtype weft does not support.
  const void* tensor_data(const GgufTensorInfo& info) const;
  // Shares the mappings of every part: they stay (read-only, tensor_data()
  // pointers valid) while a copy of this pointer lives, after the GgufFile
  // is gone. For weights used in place (LlamaModel's mapped weights). Parts
  // are separate mappings: a range of bytes is contiguous only within one
  // part. Null for an empty single file.
  std::shared_ptr<const void> mapping() const { return mapping_; }

 private:
  GgufFile() = default;
  friend class GgufParser;
  // Reads the siblings of a first part whose split.count is over 1 (split_reader.cpp).
  void join_split_parts(uint64_t max_metadata_bytes);
  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> mapping_;  // owns map_: unmaps when the last holder lets go
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kvs_;
  std::vector<GgufTensorInfo> tensors_;
  std::vector<GgufPart> parts_;
  std::vector<std::unique_ptr<GgufFile>> others_;  // parts 1.. of a split model (their tensors moved here)
};

// Limits for GgufWriter::write_split (0: no limit). As llama-gguf-split
// counts, max_bytes bounds a part's tensor bytes (each padded to the
// alignment), not its metadata; a tensor larger than max_bytes gets a part of
// its own.
struct GgufSplitLimits {
  uint64_t max_bytes = 0;
  uint64_t max_tensors = 0;
};

// Builds a GGUF v3 file in memory order: metadata in the order first set
// (setting a key again replaces its value), tensors in the order added, each
// at the next multiple of the alignment (general.alignment if set as a u32,
// else 32), zero padding between. Not thread-safe.
class GgufWriter {
 public:
  void set_u16(const std::string& key, uint16_t v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_array(const std::string& key, const std::vector<std::string>& v);
  void set_array(const std::string& key, const std::vector<float>& v);
  void set_array(const std::string& key, const std::vector<int32_t>& v);
  // Any type, e.g. nested arrays; an array viewing a GgufFile is copied, so
  // the file may close before write().
  void set_value(const std::string& key, GgufValue v);

  // ne has 1..4 dims, ne[0] fastest; ne[0] a multiple of 32 for q8_0/q4_0.
  // data (row-major, contiguous) is not copied: it must stay valid until
  // write() returns.
  void add_tensor(const std::string& name, DType type, std::span<const int64_t> ne, const void* data);

  // A tensor whose bytes are produced while write() writes it, for outputs
  // too large to hold in memory: write() calls produce(sink) when it reaches
  // the tensor, and produce passes the tensor's bytes to sink in order, in
  // any number of pieces. Fewer or more bytes than the tensor holds fail with
  // Error(internal); an exception from produce ends write() (the temporary
  // file is removed, path untouched).
  using TensorSink = std::function<void(const void* data, size_t n)>;
  using TensorProducer = std::function<void(const TensorSink& sink)>;
  void add_tensor(const std::string& name, DType type, std::span<const int64_t> ne, TensorProducer produce);

  // Writes to a temporary file beside path, then renames it over path. The
  // file gets the mode open(2) with 0666 would give it (0666 & ~umask).
  void write(const std::string& path) const;
  // Writes a split model as llama-gguf-split does: tensors in order, a new
  // part whenever the next tensor would pass a limit, part i named
  // gguf_split_path(prefix, i, n); all metadata (less any split.* keys) in
  // the first part, then split.no (u16), split.count (u16) and
  // split.tensors.count (i32) in every part. Every part goes to a temporary
  // file first; they are renamed into place only once all are written, so an
  // error or a producer's exception leaves no part behind. Returns the paths.
  std::vector<std::string> write_split(const std::string& prefix, const GgufSplitLimits& limits) const;

 private:
  class Output;
  // The file holding kvs and tensors [first, last), left in a temporary file.
  std::unique_ptr<Output> write_file(const std::string& path, const std::vector<std::pair<std::string, GgufValue>>& kvs,
                                     size_t first, size_t last) const;
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    const void* data;
    size_t nbytes;
    TensorProducer produce;  // set instead of data by the producer overload
  };
  void add(const std::string& name, DType type, std::span<const int64_t> ne, const void* data, TensorProducer produce);
  std::vector<std::pair<std::string, GgufValue>> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace weft
