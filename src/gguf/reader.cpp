// The GGUF v3 reader: maps the file read-only and walks it with a cursor that
// checks every read against the file size before it happens.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <unordered_set>

#include "gguf_impl.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace weft {

namespace {

std::string basename_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Smallest encoded size of one value of type t (for capping array counts).
uint64_t min_encoded_size(GgufType t) {
  if (size_t n = detail::fixed_size(t)) return n;
  return t == GgufType::string ? 8 : 12;
}

std::string indexed(const std::string& field, uint64_t i) { return field + "[" + std::to_string(i) + "]"; }

// Heap bytes of s beyond the object itself (none when stored inline).
size_t heap_of(const std::string& s) {
  std::less<const void*> before;
  const void* p = s.data();
  bool inline_ = !before(p, &s) && before(p, &s + 1);
  return inline_ ? 0 : s.capacity() + 1;
}

}  // namespace

// Walks the mapping; every error names the file, the field and the byte.
class GgufParser {
 public:
  GgufParser(GgufFile& f, uint64_t max_metadata_bytes)
      : f_(f), name_(basename_of(f.path_)), max_metadata_(max_metadata_bytes) {}

  [[noreturn]] void bad(const std::string& field, uint64_t at, const std::string& what) const {
    fail(ErrorKind::invalid_input, "gguf",
         name_ + ": " + field + " at byte " + std::to_string(at) + ": " + what);
  }

  void need(const std::string& field, uint64_t n) const {
    if (n > f_.size_ - pos_)
      bad(field, pos_, "needs " + std::to_string(n) + " bytes but the file ends at " + std::to_string(f_.size_) +
                           " (truncated?)");
  }

  template <typename T>
  T read(const std::string& field) {
    need(field, sizeof(T));
    T v;
    std::memcpy(&v, f_.map_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& field) {
    uint64_t at = pos_;
    uint64_t n = read<uint64_t>(field + " length");
    if (n > kGgufMaxString)
      bad(field, at, "string length " + std::to_string(n) + " exceeds the cap of " + std::to_string(kGgufMaxString));
    need(field, n);
    std::string s(reinterpret_cast<const char*>(f_.map_ + pos_), n);
    pos_ += n;
    return s;
  }

  GgufType read_type(const std::string& field) {
    uint64_t at = pos_;
    uint32_t t = read<uint32_t>(field);
    if (t > static_cast<uint32_t>(GgufType::f64)) bad(field, at, "unknown value type " + std::to_string(t));
    return static_cast<GgufType>(t);
  }

  GgufValue read_value(GgufType type, const std::string& field) {
    GgufValue v;
    v.type = type;
    if (type == GgufType::string) {
      v.s = read_string(field);
    } else if (type == GgufType::array) {
      v.arr = read_array(field, 0);
    } else {
      uint64_t at = pos_;
      need(field, detail::fixed_size(type));
      v = detail::decode_fixed(type, f_.map_ + pos_);
      if (type == GgufType::boolean && v.u > 1) bad(field, at, "bool value " + std::to_string(v.u) + " is neither 0 nor 1");
      pos_ += detail::fixed_size(type);
    }
    return v;
  }

  // Checks an array (its element type onwards) and returns a view of its
  // bytes in the mapping, with the element offsets for string and array
  // elements. Labels are built only for an error.
  GgufArray read_array(const std::string& field, int depth) {
    uint64_t at = pos_;
    if (depth >= kGgufMaxDepth) bad(field, at, "arrays nested deeper than " + std::to_string(kGgufMaxDepth));
    GgufArray a;
    a.elem_type_ = read_type(field + " element type");
    uint64_t count_at = pos_;
    uint64_t count = read<uint64_t>(field + " count");
    uint64_t min_size = min_encoded_size(a.elem_type_);
    if (count > (f_.size_ - pos_) / min_size)
      bad(field + " count", count_at,
          "array of " + std::to_string(count) + " " + gguf_type_name(a.elem_type_) + " runs past the end of the file (size " +
              std::to_string(f_.size_) + ")");
    within_cap(field, count_at, pos_ + count * min_size);
    a.count_ = count;
    a.view_ = f_.map_ + pos_;
    const uint64_t start = pos_;
    if (a.elem_type_ == GgufType::boolean) {
      for (uint64_t i = 0; i < count; ++i)
        if (f_.map_[pos_ + i] > 1)
          bad(indexed(field, i), pos_ + i, "bool value " + std::to_string(f_.map_[pos_ + i]) + " is neither 0 nor 1");
    }
    if (detail::fixed_size(a.elem_type_)) {
      pos_ += count * min_size;
    } else {
      a.offsets_.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        a.offsets_.push_back(pos_ - start);
        if (a.elem_type_ == GgufType::string) {
          skip_string(field, i);
        } else {
          read_array(indexed(field, i), depth + 1);
        }
        within_cap(field, at, pos_);
      }
    }
    a.nbytes_ = pos_ - start;
    return a;
  }

  // Checks the string element field[i] and steps over it.
  void skip_string(const std::string& field, uint64_t i) {
    uint64_t at = pos_;
    if (f_.size_ - pos_ < 8) need(indexed(field, i) + " length", 8);
    uint64_t n;
    std::memcpy(&n, f_.map_ + pos_, sizeof n);
    pos_ += 8;
    if (n > kGgufMaxString)
      bad(indexed(field, i), at, "string length " + std::to_string(n) + " exceeds the cap of " + std::to_string(kGgufMaxString));
    if (n > f_.size_ - pos_) need(indexed(field, i), n);
    pos_ += n;
  }

  // Refuses metadata that would reach byte `end` past the cap.
  void within_cap(const std::string& field, uint64_t at, uint64_t end) const {
    if (end - kMetadataStart > max_metadata_)
      bad(field, at, "the key/value section reaches at least " + std::to_string(end - kMetadataStart) +
                         " bytes, over the cap of " + std::to_string(max_metadata_) + " bytes");
  }

  void parse() {
    need("header", 4);
    if (std::memcmp(f_.map_, "GGUF", 4) != 0) bad("magic", 0, "not a GGUF file (the first bytes are not \"GGUF\")");
    pos_ = 4;
    uint32_t version = read<uint32_t>("version");
    if (version != 3) bad("version", 4, "GGUF version " + std::to_string(version) + " is not supported (only 3)");
    uint64_t n_tensors = read<uint64_t>("tensor_count");
    if (n_tensors > kGgufMaxTensors)
      bad("tensor_count", 8, std::to_string(n_tensors) + " exceeds the cap of " + std::to_string(kGgufMaxTensors));
    uint64_t n_kv = read<uint64_t>("kv_count");
    if (n_kv > kGgufMaxKVs) bad("kv_count", 16, std::to_string(n_kv) + " exceeds the cap of " + std::to_string(kGgufMaxKVs));

    std::unordered_set<std::string> seen;
    for (uint64_t k = 0; k < n_kv; ++k) {
      std::string label = "kv " + std::to_string(k);
      uint64_t at = pos_;
      std::string key = read_string(label + " key");
      label += " '" + key + "'";
      if (!seen.insert(key).second) bad(label, at, "duplicate key");
      GgufType type = read_type(label + " value type");
      f_.kvs_.emplace_back(std::move(key), read_value(type, label));
      within_cap(label, at, pos_);
    }
    f_.kvs_.shrink_to_fit();
    read_alignment();

    seen.clear();
    f_.tensors_.reserve(n_tensors);
    for (uint64_t t = 0; t < n_tensors; ++t) f_.tensors_.push_back(read_tensor_info(t, seen));

    uint64_t data_start = pos_ + (f_.alignment_ - pos_ % f_.alignment_) % f_.alignment_;
    if (data_start > f_.size_) {
      // Only a file whose tensors are all empty may end before the padding.
      data_start = f_.size_;
    }
    f_.data_offset_ = data_start;
    uint64_t data_size = f_.size_ - data_start;
    for (size_t t = 0; t < f_.tensors_.size(); ++t) {
      const GgufTensorInfo& info = f_.tensors_[t];
      if (info.offset > data_size || info.nbytes > data_size - info.offset)
        fail(ErrorKind::invalid_input, "gguf",
             name_ + ": tensor " + std::to_string(t) + " '" + info.name + "' data [" +
                 std::to_string(data_start + info.offset) + ", " + std::to_string(data_start + info.offset) + "+" +
                 std::to_string(info.nbytes) + ") runs past the end of the file (size " + std::to_string(f_.size_) + ")");
    }
  }

 private:
  void read_alignment() {
    const GgufValue* v = f_.find("general.alignment");
    if (!v) return;
    if (v->type != GgufType::u32)
      fail(ErrorKind::invalid_input, "gguf",
           name_ + ": general.alignment has type " + gguf_type_name(v->type) + ", expected u32");
    if (v->u == 0 || (v->u & (v->u - 1)) != 0)
      fail(ErrorKind::invalid_input, "gguf",
           name_ + ": general.alignment " + std::to_string(v->u) + " is not a power of two");
    f_.alignment_ = static_cast<uint32_t>(v->u);
  }

  GgufTensorInfo read_tensor_info(uint64_t t, std::unordered_set<std::string>& seen) {
    GgufTensorInfo info;
    std::string label = "tensor " + std::to_string(t);
    uint64_t at = pos_;
    info.name = read_string(label + " name");
    label += " '" + info.name + "'";
    if (!seen.insert(info.name).second) bad(label, at, "duplicate tensor name");
    at = pos_;
    uint32_t n_dims = read<uint32_t>(label + " n_dims");
    if (n_dims < 1 || n_dims > 4) bad(label + " n_dims", at, std::to_string(n_dims) + " is not in 1..4");
    info.n_dims = static_cast<int>(n_dims);
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      std::string field = label + " dims[" + std::to_string(d) + "]";
      at = pos_;
      uint64_t n = read<uint64_t>(field);
      if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) bad(field, at, std::to_string(n) + " is negative as int64");
      if (n != 0 && elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / n)
        bad(field, at, "the element count overflows int64");
      elements *= n;
      info.ne[d] = static_cast<int64_t>(n);
    }
    at = pos_;
    info.ggml_type = read<uint32_t>(label + " dtype");
    if (std::optional<DType> dt = detail::dtype_from_ggml(info.ggml_type)) {
      info.supported = true;
      info.type = *dt;
    }
    int64_t block = 0;
    size_t block_bytes = 0;
    if (detail::ggml_layout(info.ggml_type, &block, &block_bytes)) {
      if (info.ne[0] % block != 0)
        bad(label + " dims[0]", at, std::to_string(info.ne[0]) + " is not a multiple of the dtype's block of " +
                                        std::to_string(block));
      uint64_t blocks = elements / static_cast<uint64_t>(block);
      if (blocks > std::numeric_limits<uint64_t>::max() / block_bytes) bad(label, at, "the byte size overflows");
      info.nbytes = blocks * block_bytes;
    }
    at = pos_;
    info.offset = read<uint64_t>(label + " offset");
    if (info.offset % f_.alignment_ != 0)
      bad(label + " offset", at, std::to_string(info.offset) + " is not a multiple of the alignment " +
                                     std::to_string(f_.alignment_));
    return info;
  }

  static constexpr uint64_t kMetadataStart = 24;  // after magic, version and the two counts

  GgufFile& f_;
  std::string name_;
  uint64_t max_metadata_;
  uint64_t pos_ = 0;
};

std::unique_ptr<GgufFile> GgufFile::open_part(const std::string& path, uint64_t max_metadata_bytes) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorKind::invalid_input, "gguf", path + ": cannot open: " + std::strerror(errno));
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorKind::invalid_input, "gguf", path + ": not a regular file");
  }
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* m = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail(ErrorKind::invalid_input, "gguf", path + ": cannot map: " + std::strerror(err));
    }
    f->map_ = static_cast<const uint8_t*>(m);
    const size_t n = f->size_;
    f->mapping_ = std::shared_ptr<const void>(m, [n](const void* p) { munmap(const_cast<void*>(p), n); });
  }
  ::close(fd);
  GgufParser(*f, max_metadata_bytes).parse();  // on a throw, the mapping goes with f
  f->parts_.push_back(GgufPart{path, f->size_, f->data_offset_, f->alignment_, f->tensors_.size()});
  return f;
}

GgufFile::~GgufFile() = default;

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  out.reserve(kvs_.size());
  for (const auto& kv : kvs_) out.push_back(kv.first);
  return out;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& kv : kvs_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

size_t GgufFile::metadata_heap_bytes() const {
  size_t n = kvs_.capacity() * sizeof(kvs_[0]);
  for (const auto& [key, v] : kvs_) n += heap_of(key) + heap_of(v.s) + v.arr.heap_bytes();
  for (const auto& part : others_) n += part->metadata_heap_bytes();
  return n;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  for (const GgufTensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const void* GgufFile::tensor_data(const GgufTensorInfo& info) const {
  info.dtype();  // throws for an unsupported dtype
  // Part 0 is this object; part i > 0 is others_[i - 1], read by the same parser.
  if (info.part > others_.size())
    fail(ErrorKind::invalid_input, "gguf", path_ + ": tensor '" + info.name + "' names part " +
                                               std::to_string(info.part) + " of " + std::to_string(parts_.size()));
  const GgufFile& p = info.part == 0 ? *this : *others_[info.part - 1];
  if (info.offset > p.size_ - p.data_offset_ || info.nbytes > p.size_ - p.data_offset_ - info.offset)
    fail(ErrorKind::invalid_input, "gguf", p.path_ + ": tensor '" + info.name + "' is not in this file");
  return p.map_ + p.data_offset_ + info.offset;
}

}  // namespace weft
