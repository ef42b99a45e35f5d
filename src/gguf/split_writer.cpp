// GgufWriter::write_split: the tensors cut into parts as llama-gguf-split
// cuts them, each part written by the one-file writer, all renamed into place
// only after the last is written.
#include <limits>

#include "gguf_impl.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace weft {

namespace {

// The alignment the first part will use (write_file refuses a bad one).
uint64_t alignment_of(const std::vector<std::pair<std::string, GgufValue>>& kvs) {
  for (const auto& kv : kvs)
    if (kv.first == "general.alignment" && kv.second.type == GgufType::u32 && kv.second.u != 0) return kv.second.u;
  return kGgufDefaultAlignment;
}

GgufValue integer(GgufType type, int64_t v) {
  GgufValue x;
  x.type = type;
  x.u = static_cast<uint64_t>(v);
  x.i = v;
  return x;
}

bool is_split_key(const std::string& key) {
  return key == kGgufSplitNo || key == kGgufSplitCount || key == kGgufSplitTensorsCount;
}

}  // namespace

std::vector<std::string> GgufWriter::write_split(const std::string& prefix, const GgufSplitLimits& limits) const {
  // Where each part starts: a new part when the current one holds a tensor
  // and the next would pass a limit. Sizes saturate rather than wrap.
  const uint64_t alignment = alignment_of(kvs_);
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  std::vector<size_t> starts{0};
  uint64_t bytes = 0, count = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const uint64_t n = tensors_[i].nbytes;
    const uint64_t pad = (alignment - n % alignment) % alignment;
    const uint64_t padded = n > kMax - pad ? kMax : n + pad;
    const bool too_many = limits.max_tensors != 0 && count >= limits.max_tensors;
    const bool too_big = limits.max_bytes != 0 && (padded > limits.max_bytes || bytes > limits.max_bytes - padded);
    if (count > 0 && (too_many || too_big)) {
      starts.push_back(i);
      bytes = count = 0;
    }
    bytes = padded > kMax - bytes ? kMax : bytes + padded;
    ++count;
  }
  const size_t n_parts = starts.size();
  if (n_parts > std::numeric_limits<uint16_t>::max())
    fail(ErrorKind::invalid_input, "gguf",
         prefix + ": the limits cut the model into " + std::to_string(n_parts) + " parts, more than split.count (u16) holds");
  if (tensors_.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail(ErrorKind::invalid_input, "gguf", prefix + ": " + std::to_string(tensors_.size()) + " tensors do not fit split.tensors.count (i32)");

  std::vector<std::pair<std::string, GgufValue>> metadata;
  for (const auto& kv : kvs_)
    if (!is_split_key(kv.first)) metadata.push_back(kv);
  std::vector<std::string> paths;
  std::vector<std::unique_ptr<Output>> outputs;  // removed unless all are committed
  for (size_t p = 0; p < n_parts; ++p) {
    std::vector<std::pair<std::string, GgufValue>> kvs = p == 0 ? metadata : decltype(metadata){};
    kvs.emplace_back(kGgufSplitNo, integer(GgufType::u16, static_cast<int64_t>(p)));
    kvs.emplace_back(kGgufSplitCount, integer(GgufType::u16, static_cast<int64_t>(n_parts)));
    kvs.emplace_back(kGgufSplitTensorsCount, integer(GgufType::i32, static_cast<int64_t>(tensors_.size())));
    const size_t end = p + 1 < n_parts ? starts[p + 1] : tensors_.size();
    paths.push_back(gguf_split_path(prefix, static_cast<uint32_t>(p), static_cast<uint32_t>(n_parts)));
    outputs.push_back(write_file(paths.back(), kvs, starts[p], end));
  }
  for (const auto& out : outputs) out->commit();
  return paths;
}

}  // namespace weft
