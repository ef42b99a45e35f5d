// Split models: GgufFile::open reads the first part, and when its split.count
// is over 1, every sibling with the same reader (open_part), checks that the
// set holds together and joins the parts' tensors into one list. Every error
// names the file at fault and, where it helps, the file it disagrees with.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace weft {

namespace {

[[noreturn]] void bad(const std::string& what) { fail(ErrorKind::invalid_input, "gguf", what); }

// A split key of the type llama-gguf-split gives it.
const GgufValue& split_key(const GgufFile& f, const char* key, GgufType want) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) bad(f.path() + ": " + key + " is missing (every part of a split model has it)");
  if (v->type != want)
    bad(f.path() + ": " + key + " has type " + gguf_type_name(v->type) + ", expected " + gguf_type_name(want) +
        " (as llama-gguf-split writes it)");
  return *v;
}

struct SplitKeys {
  uint32_t no = 0;
  uint32_t count = 0;
  uint64_t tensors = 0;
};

SplitKeys split_keys(const GgufFile& f) {
  SplitKeys k;
  k.count = static_cast<uint32_t>(split_key(f, kGgufSplitCount, GgufType::u16).u);
  k.no = static_cast<uint32_t>(split_key(f, kGgufSplitNo, GgufType::u16).u);
  const int64_t tensors = split_key(f, kGgufSplitTensorsCount, GgufType::i32).i;
  if (k.count == 0) bad(f.path() + ": split.count is 0");
  if (k.no >= k.count)
    bad(f.path() + ": split.no " + std::to_string(k.no) + " is not below split.count " + std::to_string(k.count));
  if (tensors < 0 || static_cast<uint64_t>(tensors) > kGgufMaxTensors)
    bad(f.path() + ": split.tensors.count " + std::to_string(tensors) + " is not in 0.." +
        std::to_string(kGgufMaxTensors));
  k.tensors = static_cast<uint64_t>(tensors);
  return k;
}

std::string part_of(uint32_t no, uint32_t count) {
  return "part " + std::to_string(no + 1) + " of " + std::to_string(count);
}

// Names are unique within a part (the parser checks); across parts here.
// tensors must not grow meanwhile: the map holds views of their names.
void check_names_unique_across_parts(const std::vector<GgufTensorInfo>& tensors, const std::vector<GgufPart>& parts) {
  std::unordered_map<std::string_view, uint32_t> first_part;
  first_part.reserve(tensors.size());
  for (const GgufTensorInfo& t : tensors) {
    auto [it, fresh] = first_part.emplace(t.name, t.part);
    if (!fresh)
      bad(parts[t.part].path + ": tensor '" + t.name + "' is also in " + parts[it->second].path +
          " (a tensor belongs to one part)");
  }
}

}  // namespace

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path, uint64_t max_metadata_bytes) {
  std::unique_ptr<GgufFile> f = open_part(path, max_metadata_bytes);
  if (f->has(kGgufSplitCount)) f->join_split_parts(max_metadata_bytes);
  return f;
}

void GgufFile::join_split_parts(uint64_t max_metadata_bytes) {
  const SplitKeys k = split_keys(*this);
  if (k.no != 0) {
    const std::optional<std::string> prefix = gguf_split_prefix(path_, k.no, k.count);
    bad(path_ + ": " + part_of(k.no, k.count) + " of a split model; open " +
        (prefix ? gguf_split_path(*prefix, 0, k.count) : std::string("its first part (split.no 0)")) + " instead");
  }
  uint64_t n_tensors = tensors_.size();
  if (n_tensors > k.tensors)
    bad(path_ + ": holds " + std::to_string(n_tensors) + " tensors, more than split.tensors.count " +
        std::to_string(k.tensors));
  if (k.count == 1) {
    if (n_tensors != k.tensors)
      bad(path_ + ": holds " + std::to_string(n_tensors) + " tensors but split.tensors.count is " +
          std::to_string(k.tensors));
    return;  // a set of one part: this file is the model
  }
  const std::optional<std::string> prefix = gguf_split_prefix(path_, 0, k.count);
  if (!prefix)
    bad(path_ + ": first part of a split model of " + std::to_string(k.count) + " parts, but its name does not end in " +
        gguf_split_path("", 0, k.count) + ", so the other parts cannot be found");

  for (uint32_t i = 1; i < k.count; ++i) {
    const std::string path = gguf_split_path(*prefix, i, k.count);
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0)
      bad(path + ": " + part_of(i, k.count) + " of " + path_ + " is missing (" + std::strerror(errno) + ")");
    if (!S_ISREG(st.st_mode))  // a FIFO in a part's place would block open()
      bad(path + ": " + part_of(i, k.count) + " of " + path_ + " is not a regular file");
    std::unique_ptr<GgufFile> part = open_part(path, max_metadata_bytes);
    if (!part->has(kGgufSplitCount))
      bad(path + ": has no split.count; it is not " + part_of(i, k.count) + " of " + path_);
    const SplitKeys pk = split_keys(*part);
    if (pk.count != k.count)
      bad(path + ": split.count " + std::to_string(pk.count) + " differs from " + std::to_string(k.count) + " in " +
          path_ + " (a part of another model?)");
    if (pk.no != i)
      bad(path + ": split.no " + std::to_string(pk.no) + ", but its name makes it " + part_of(i, k.count) +
          " (split.no " + std::to_string(i) + ")");
    if (pk.tensors != k.tensors)
      bad(path + ": split.tensors.count " + std::to_string(pk.tensors) + " differs from " + std::to_string(k.tensors) +
          " in " + path_ + " (a part of another model?)");
    // n_tensors <= k.tensors holds here, so the subtraction does not wrap.
    if (part->tensors_.size() > k.tensors - n_tensors)
      bad(path + ": its " + std::to_string(part->tensors_.size()) + " tensors bring the set past split.tensors.count " +
          std::to_string(k.tensors) + " (a part of another model?)");
    n_tensors += part->tensors_.size();
    others_.push_back(std::move(part));
  }
  if (n_tensors != k.tensors)
    bad(path_ + ": the " + std::to_string(k.count) + " parts hold " + std::to_string(n_tensors) +
        " tensors but split.tensors.count is " + std::to_string(k.tensors) + " (a part of another model?)");

  tensors_.reserve(n_tensors);
  for (size_t i = 0; i < others_.size(); ++i) {
    GgufFile& part = *others_[i];
    parts_.push_back(part.parts_.front());
    for (GgufTensorInfo& t : part.tensors_) {
      t.part = static_cast<uint32_t>(i + 1);
      tensors_.push_back(std::move(t));
    }
    part.tensors_ = {};
  }
  check_names_unique_across_parts(tensors_, parts_);

  // One holder keeps every part's mapping; it points at the first part's.
  auto all = std::make_shared<std::vector<std::shared_ptr<const void>>>();
  all->push_back(mapping_);
  for (const auto& part : others_) all->push_back(part->mapping_);
  const void* first = mapping_.get();
  mapping_ = std::shared_ptr<const void>(all, first);
}

}  // namespace weft
