// The standard names of a split model's parts (llama_split_path and
// llama_split_prefix in the standard engine): PREFIX-%05d-of-%05d.gguf, the
// first number the 1-based part, the second the count.
#include <cstdio>

#include "weft/gguf/gguf.h"

namespace weft {

namespace {

std::string postfix(uint32_t no, uint32_t count) {
  char buf[48];
  // no + 1 in 64 bits: a uint32_t no of UINT32_MAX does not wrap to 0.
  std::snprintf(buf, sizeof buf, "-%05llu-of-%05lu.gguf", static_cast<unsigned long long>(no) + 1,
                static_cast<unsigned long>(count));
  return buf;
}

}  // namespace

std::string gguf_split_path(const std::string& prefix, uint32_t no, uint32_t count) {
  return prefix + postfix(no, count);
}

std::optional<std::string> gguf_split_prefix(const std::string& path, uint32_t no, uint32_t count) {
  const std::string tail = postfix(no, count);
  if (path.size() <= tail.size() || path.compare(path.size() - tail.size(), tail.size(), tail) != 0)
    return std::nullopt;
  return path.substr(0, path.size() - tail.size());
}

}  // namespace weft
