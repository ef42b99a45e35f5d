// Lookups in the generated mapping tables of tokenizer_unicode_lower.cpp and
// tokenizer_unicode_nfd.cpp.
#include <algorithm>

#include "tokenizer_unicode_norm.h"

namespace weft::model::detail {

namespace {

// Appends the mapping of cp in a (keys, chars) table, or cp itself. Keys are
// sorted (cp << 8) | length; a mapping's code points follow those of every
// key before it in chars.
void append_mapped(const uint32_t* keys, size_t n_keys, const std::vector<uint32_t>& offsets, const uint32_t* chars,
                   uint32_t cp, std::vector<uint32_t>& out) {
  const uint32_t* end = keys + n_keys;
  const uint32_t* it = std::lower_bound(keys, end, cp << 8);
  if (cp > 0x10FFFF || it == end || (*it >> 8) != cp) {
    out.push_back(cp);
    return;
  }
  const size_t k = static_cast<size_t>(it - keys);
  out.insert(out.end(), chars + offsets[k], chars + offsets[k] + (*it & 0xFF));
}

std::vector<uint32_t> offsets_of(const uint32_t* keys, size_t n) {
  std::vector<uint32_t> off(n);
  uint32_t at = 0;
  for (size_t k = 0; k < n; ++k) off[k] = at, at += keys[k] & 0xFF;
  return off;
}

}  // namespace

void append_lower(uint32_t cp, std::vector<uint32_t>& out) {
  static const std::vector<uint32_t> offsets = offsets_of(kLowerKeys, kLowerKeyCount);
  append_mapped(kLowerKeys, kLowerKeyCount, offsets, kLowerChars, cp, out);
}

void append_nfd(uint32_t cp, std::vector<uint32_t>& out) {
  // Hangul syllables: L V (T), by the arithmetic of Unicode's chapter 3.12.
  constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7, kTCount = 28,
                     kNCount = 21 * 28, kSCount = 19 * 21 * 28;
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  static const std::vector<uint32_t> offsets = offsets_of(kNfdKeys, kNfdKeyCount);
  append_mapped(kNfdKeys, kNfdKeyCount, offsets, kNfdChars, cp, out);
}

}  // namespace weft::model::detail
