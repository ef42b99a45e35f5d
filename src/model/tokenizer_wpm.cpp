// WordPiece (tokenizer.ggml.model = bert), as BERT's tokenizer.json runs it:
// BertNormalizer (drop control characters, whitespace to spaces, spaces
// around CJK ideographs, accents stripped by NFD and dropping Mn, lowercase
// by the full mapping), BertPreTokenizer (split on whitespace; each
// punctuation code point a word of its own), then per word the longest
// vocabulary entry from the start, again and again; a word with a position
// no entry matches, or of more than 100 code points, is [UNK].
//
// GGUF files hold the vocabulary as llama.cpp's converter writes it: a word's
// first piece with U+2581 before it ("▁play"), a continuation as it is
// ("ing", which tokenizer.json spells "##ing"), bracketed specials as they
// are ("[CLS]").
#include <algorithm>

#include "tokenizer_impl.h"
#include "tokenizer_unicode_norm.h"

namespace weft::model::detail {

namespace {

constexpr size_t kMaxWordChars = 100;                  // HF WordPiece's max_input_chars_per_word

// HF tokenizers' is_chinese_char (its range 0x2B920.. where Unicode's
// Extension E starts at 0x2B820).
bool is_cjk(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_bert_punctuation(uint32_t c) {
  const bool ascii = (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  return ascii || cp_category(cp_props(c)) == CpCategory::P;
}

// The words of text after BertNormalizer and BertPreTokenizer, as code points.
std::vector<std::vector<uint32_t>> bert_words(const TokenizerData& d, std::string_view text) {
  std::vector<std::vector<uint32_t>> words(1);
  auto end_word = [&] {
    if (!words.back().empty()) words.emplace_back();
  };
  std::vector<uint32_t> mapped, lowered;
  for (const Cp& c : split_utf8(text)) {
    const uint8_t props = c.props;
    const bool space = c.cp == '\t' || c.cp == '\n' || c.cp == '\r' || (props & kWhiteSpaceBit);
    const bool control = !space && cp_category(props) == CpCategory::other;  // C*: no Z* is left
    if (c.cp == 0 || c.cp == 0xFFFD || control) continue;
    if (space) {
      end_word();
      continue;
    }
    if (is_cjk(c.cp)) {  // handle_chinese_chars: a word of its own
      end_word();
      words.back().push_back(c.cp);  // CJK ideographs are unchanged by the steps below
      end_word();
      continue;
    }
    mapped.clear();
    if (d.strip_accents)
      append_nfd(c.cp, mapped);
    else
      mapped.push_back(c.cp);
    for (uint32_t m : mapped) {
      if (d.strip_accents && cp_category(cp_props(m)) == CpCategory::Mn) continue;
      lowered.clear();
      if (d.lowercase)
        append_lower(m, lowered);
      else
        lowered.push_back(m);
      for (uint32_t l : lowered) {
        if (is_bert_punctuation(l)) {
          end_word();
          words.back().push_back(l);
          end_word();
        } else {
          words.back().push_back(l);
        }
      }
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

std::vector<int32_t> wpm_encode(const TokenizerData& d, std::string_view text) {
  std::vector<int32_t> out;
  std::string word;
  std::vector<size_t> starts;  // byte offset of each code point in word, then word's size
  for (const std::vector<uint32_t>& cps : bert_words(d, text)) {
    if (cps.size() > kMaxWordChars) {
      out.push_back(d.unk);
      continue;
    }
    word.assign(kPhantomSpace);
    starts.clear();
    for (uint32_t cp : cps) {
      starts.push_back(word.size());
      append_utf8(word, cp);
    }
    starts.push_back(word.size());
    starts[0] = 0;  // the first piece includes the phantom space
    const size_t before = out.size();
    for (size_t i = 0; i + 1 < starts.size();) {
      size_t j = starts.size() - 1;
      int32_t id = -1;
      for (; j > i; --j) {  // the longest entry from code point i
        if (starts[j] - starts[i] > d.max_token_len) continue;
        id = d.find(std::string_view(word).substr(starts[i], starts[j] - starts[i]));
        if (id >= 0) break;
      }
      if (id < 0) {
        out.resize(before);
        out.push_back(d.unk);
        break;
      }
      out.push_back(id);
      i = j;
    }
  }
  return out;
}

std::string wpm_decode_token(const TokenizerData& d, int32_t id) {
  const std::string& t = d.tokens[static_cast<size_t>(id)];
  // Appended in place: GCC 12 misreads " " + std::string&& as an overlapping
  // copy (-Wrestrict, GCC bug 105329).
  if (t.compare(0, kPhantomSpace.size(), kPhantomSpace) == 0) return std::string(" ").append(t, kPhantomSpace.size());
  return t;
}

}  // namespace weft::model::detail
