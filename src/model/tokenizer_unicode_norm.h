// Unicode mappings for the normalizers of BERT (lowercasing, accent
// stripping by canonical decomposition), from the generated tables in
// tokenizer_unicode_lower.cpp and tokenizer_unicode_nfd.cpp (written by
// tests/model/tokenizer_data/make_unicode_norm.js). Not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::model::detail {

// Appends cp's full lowercase mapping (İ gives i and U+0307, as
// String.prototype.toLowerCase and Rust's char::to_lowercase do).
void append_lower(uint32_t cp, std::vector<uint32_t>& out);
// Appends cp's canonical decomposition (NFD of cp alone; Hangul syllables
// into their jamo). The canonical reordering of marks from neighbouring code
// points is not done: the accent stripping that uses this drops them.
void append_nfd(uint32_t cp, std::vector<uint32_t>& out);

extern const uint32_t kLowerKeys[];
extern const size_t kLowerKeyCount;
extern const uint32_t kLowerChars[];
extern const uint32_t kNfdKeys[];
extern const size_t kNfdKeyCount;
extern const uint32_t kNfdChars[];

}  // namespace weft::model::detail
