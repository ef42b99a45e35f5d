// Shared by the tokenizer tests (test_tokenizer*.cpp): GGUF files written to
// a temporary path and loaded, two small vocabularies worked out by hand (one
// SentencePiece-style, one byte-level BPE), and the readers of the reference
// data in tokenizer_data/ (BpeRefData, SpmRefData).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "weft/gguf/gguf.h"
#include "weft/model/tokenizer.h"

namespace tokenizer_test {

using Ids = std::vector<int32_t>;
using weft::model::Tokenizer;

// Writes w to a temporary file, loads its tokenizer and removes the file
// (the tokenizer copies what it needs).
inline std::unique_ptr<Tokenizer> load(const weft::GgufWriter& w, const std::string& name) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("weft_tok_" + std::to_string(::getpid()) + "_" + name + ".gguf"))
          .string();
  struct Remove {
    const std::string& p;
    ~Remove() { std::remove(p.c_str()); }
  } remove{path};
  w.write(path);
  auto f = weft::GgufFile::open(path);
  return Tokenizer::from_gguf(*f);
}

inline int32_t index_of(const std::vector<std::string>& tokens, const std::string& t) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] == t) return static_cast<int32_t>(i);
  ADD_FAILURE() << "no token " << t;
  return -1;
}

// --- SentencePiece-style ----------------------------------------------------

// A `llama` tokenizer's metadata with bos 1 and eos 2.
inline weft::GgufWriter spm_writer(const std::vector<std::string>& tokens, const std::vector<float>& scores,
                                   const std::vector<int32_t>& types) {
  weft::GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_array("tokenizer.ggml.tokens", tokens);
  w.set_array("tokenizer.ggml.scores", scores);
  w.set_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  return w;
}

// A `gpt2` tokenizer's metadata: pre-tokenizer pre, bos and eos ids.
inline weft::GgufWriter bpe_writer(const std::vector<std::string>& tokens, const std::vector<std::string>& merges,
                                   const std::vector<int32_t>& types, const std::string& pre, int32_t bos,
                                   int32_t eos) {
  weft::GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_array("tokenizer.ggml.tokens", tokens);
  w.set_array("tokenizer.ggml.merges", merges);
  w.set_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  return w;
}

constexpr int32_t kByte0 = 3;                  // <0x00> .. <0xFF> are ids 3..258
inline const std::string kS = "\xE2\x96\x81";  // ▁

struct SpmVocab {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  SpmVocab() {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      add(name, 0, 6);
    }
    for (const char* c : {"a", "b", "c", "d", "e", "H", "l", "o", "r", "w", "x"}) add(c, -100);
    add(kS, -100);
    // Merged pieces: higher score merges first.
    add("or", -1);
    add("ll", -2);
    add("llo", -3);
    add("Hello", -4);
    add("He", -5);
    add(kS + "w", -6);
    add(kS + "wor", -7);
    add("ld", -8);
    add(kS + "world", -9);
    add(kS + "H", -10);
    add(kS + "Hello", -20);
    add(kS + kS, -0.5f);
    add("ab", -30);
    add("bc", -30);
  }
  void add(const std::string& t, float score, int32_t type = 1) {
    tokens.push_back(t);
    scores.push_back(score);
    types.push_back(type);
  }
  int32_t id(const std::string& t) const { return index_of(tokens, t); }
  weft::GgufWriter writer() const {
    weft::GgufWriter w = spm_writer(tokens, scores, types);
    w.set_u32("tokenizer.ggml.unknown_token_id", 0);
    return w;
  }
};

// --- GPT-2 byte-level BPE ---------------------------------------------------

// The GPT-2 byte -> printable code point table, written out again here.
inline std::string byte_symbol(int b) {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int next = 256;
    for (int i = 0; i < 256; ++i) {
      bool printable = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
      int cp = printable ? i : next++;
      std::string s;
      if (cp < 0x80)
        s += static_cast<char>(cp);
      else
        s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
      t[i] = s;
    }
    return t;
  }();
  return table[b];
}

// Byte tokens are ids 0..255 (id == byte), then merged pieces, then the
// control token <|end|> (bos and eos).
struct BpeVocab {
  std::vector<std::string> tokens;
  std::vector<std::string> merges;
  std::vector<int32_t> types;
  BpeVocab() {
    for (int b = 0; b < 256; ++b) tokens.push_back(byte_symbol(b));
    const std::string G = byte_symbol(' ');  // Ġ
    for (auto [l, r] : std::vector<std::pair<std::string, std::string>>{
             {"l", "o"}, {"l", "l"}, {"h", "e"}, {"he", "l"}, {"hel", "lo"}, {G, "hello"}, {"1", "2"}, {"12", "3"}}) {
      merges.push_back(l + " " + r);
      tokens.push_back(l + r);
    }
    types.assign(tokens.size(), 1);
    add("<|end|>", 3);
  }
  void add(const std::string& t, int32_t type) {
    tokens.push_back(t);
    types.push_back(type);
  }
  int32_t id(const std::string& t) const { return index_of(tokens, t); }
  weft::GgufWriter writer(const std::string& pre) const {
    return bpe_writer(tokens, merges, types, pre, id("<|end|>"), id("<|end|>"));
  }
};

// --- reference data ---------------------------------------------------------

// Undoes JSON.stringify for the escapes it writes: \" \\ \n \t \r \b \f \uXXXX
// (it leaves other characters, non-ASCII included, as they are).
inline std::string unjson(const std::string& s) {
  std::string out;
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    char c = s[++i];
    if (c == 'n')
      out += '\n';
    else if (c == 't')
      out += '\t';
    else if (c == 'r')
      out += '\r';
    else if (c == 'b')
      out += '\b';
    else if (c == 'f')
      out += '\f';
    else if (c == 'u') {
      unsigned cp = static_cast<unsigned>(std::stoul(s.substr(i + 1, 4), nullptr, 16));
      i += 4;
      if (cp < 0x80)
        out += static_cast<char>(cp);
      else if (cp < 0x800)
        out += static_cast<char>(0xC0 | (cp >> 6)), out += static_cast<char>(0x80 | (cp & 0x3F));
      else
        out += static_cast<char>(0xE0 | (cp >> 12)), out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
            out += static_cast<char>(0x80 | (cp & 0x3F));
    } else
      out += c;
  }
  return out;
}

inline Ids parse_ids(const std::string& csv) {
  Ids ids;
  std::stringstream ss(csv);
  for (std::string x; std::getline(ss, x, ',');) ids.push_back(std::stoi(x));
  return ids;
}

// A tab-separated line of tokenizer_data/*.txt, split into at most n fields
// (the last keeps any further tabs).
inline std::vector<std::string> fields(const std::string& line, size_t n = SIZE_MAX) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t tab; out.size() + 1 < n && (tab = line.find('\t', pos)) != std::string::npos; pos = tab + 1)
    out.push_back(line.substr(pos, tab - pos));
  out.push_back(line.substr(pos));
  return out;
}

inline std::ifstream open_data(const std::string& name) {
  // Literals joined by the compiler, then one append: GCC 12 reads
  // std::string(short) + "..." as writing past the short buffer (-Warray-bounds).
  std::string path = WEFT_SOURCE_DIR "/tests/model/tokenizer_data/";
  path += name;
  std::ifstream in(path);
  EXPECT_TRUE(in) << "tests/model/tokenizer_data/" << name;
  return in;
}

// A byte-level BPE reference in tokenizer_data/ (llama3_bpe.txt from
// make_llama3.js, qwen2_bpe.txt from make_qwen2.js): the vocabulary and merges
// trimmed to what its texts use, and reference encodings.
struct BpeRefData {
  std::vector<std::string> tokens;  // ids outside the trimmed set hold unreachable placeholders
  std::vector<int32_t> types;
  std::vector<std::string> merges;  // in rank order
  int32_t bos = -1, eos = -1, eot = -1;
  std::vector<std::pair<std::string, Ids>> cases;     // special token strings are plain text
  std::vector<std::pair<std::string, Ids>> specials;  // special token strings are parsed

  explicit BpeRefData(const std::string& file) {
    std::ifstream in = open_data(file);
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> f = fields(line, 4);
      if (f[0] == "vocab") {
        const size_t n = std::stoul(f[1]);
        types.assign(n, 1);
        for (size_t i = 0; i < n; ++i) tokens.push_back("\x01unreachable" + std::to_string(i));
      } else if (f[0] == "token") {
        const size_t id = std::stoul(f[1]);
        EXPECT_LT(id, tokens.size());
        if (id >= tokens.size()) continue;
        types[id] = std::stoi(f[2]);
        tokens[id] = f[3];
      } else if (f[0] == "merge") {
        merges.push_back(f[1]);
      } else if (f[0] == "bos" || f[0] == "eos" || f[0] == "eot") {
        (f[0] == "bos" ? bos : f[0] == "eos" ? eos : eot) = std::stoi(f[1]);
      } else if (f[0] == "case" || f[0] == "special") {
        (f[0] == "case" ? cases : specials).emplace_back(unjson(f[2]), parse_ids(f[1]));
      }
    }
  }
  // The metadata of a gpt2 GGUF file with pre-tokenizer pre, as llama.cpp's
  // converter writes it, less eot_token_id and add_bos_token.
  weft::GgufWriter writer(const std::string& pre) const {
    return bpe_writer(tokens, merges, types, pre, bos, eos);
  }
};

// A SentencePiece-style reference in tokenizer_data/ (gemma3_spm.txt and
// gemma2_spm.txt from make_gemma.js, phi3_spm.txt from make_phi3.js; the
// format is in spm_ref.mjs): the vocabulary trimmed to what its texts reach,
// the keys a converter writes, and reference encodings.
struct SpmRefData {
  std::vector<std::string> tokens;  // ids outside the trimmed set hold unreachable placeholders
  std::vector<float> scores;
  std::vector<int32_t> types;
  int32_t bos = -1, eos = -1, unk = -1;
  bool add_space_prefix = true;
  std::vector<int32_t> rstrip;  // tokens that drop the whitespace after them
  struct Case {
    std::string text;
    Ids ids;
    std::string decoded;  // the reference's decoding of ids
  };
  std::vector<Case> cases;                            // special token strings are plain text
  std::vector<std::pair<std::string, Ids>> specials;  // special token strings are parsed

  explicit SpmRefData(const std::string& file) {
    std::ifstream in = open_data(file);
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> f = fields(line, 5);
      if (f[0] == "vocab") {
        const size_t n = std::stoul(f[1]);
        scores.assign(n, 0.f);
        types.assign(n, 1);
        for (size_t i = 0; i < n; ++i) tokens.push_back("\x01unreachable" + std::to_string(i));
      } else if (f[0] == "token" && f.size() == 5) {
        const size_t id = std::stoul(f[1]);
        EXPECT_LT(id, tokens.size());
        if (id >= tokens.size()) continue;
        types[id] = std::stoi(f[2]);
        scores[id] = std::stof(f[3]);
        tokens[id] = unjson(f[4]);
      } else if (f[0] == "bos" || f[0] == "eos" || f[0] == "unk") {
        (f[0] == "bos" ? bos : f[0] == "eos" ? eos : unk) = std::stoi(f[1]);
      } else if (f[0] == "add_space_prefix") {
        add_space_prefix = f[1] == "1";
      } else if (f[0] == "rstrip") {
        rstrip.push_back(std::stoi(f[1]));
      } else if (f[0] == "case") {
        std::string text = unjson(f[2]);
        cases.push_back({text, parse_ids(f[1]), text});
      } else if (f[0] == "decoded" && !cases.empty()) {
        cases.back().decoded = unjson(f[1]);
      } else if (f[0] == "special") {
        specials.emplace_back(unjson(f[2]), parse_ids(f[1]));
      }
    }
  }
  int32_t id(const std::string& t) const { return index_of(tokens, t); }
  // The metadata of a `llama` GGUF file as llama.cpp's converter writes it
  // (less general.name and general.architecture, and eot_token_id, which it
  // does not write for these families).
  weft::GgufWriter writer() const {
    weft::GgufWriter w = spm_writer(tokens, scores, types);
    w.set_string("tokenizer.ggml.pre", "default");
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
    w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
    w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(unk));
    w.set_bool("tokenizer.ggml.add_space_prefix", add_space_prefix);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    return w;
  }
};

// The references, each read once per test program.
inline const BpeRefData& llama3_ref() {
  static const BpeRefData d("llama3_bpe.txt");
  return d;
}
inline const BpeRefData& qwen2_ref() {
  static const BpeRefData d("qwen2_bpe.txt");
  return d;
}
inline const BpeRefData& qwen3_ref() {
  static const BpeRefData d("qwen3_bpe.txt");
  return d;
}
inline const SpmRefData& gemma3_ref() {
  static const SpmRefData d("gemma3_spm.txt");
  return d;
}
inline const SpmRefData& gemma2_ref() {
  static const SpmRefData d("gemma2_spm.txt");
  return d;
}
inline const SpmRefData& phi3_ref() {
  static const SpmRefData d("phi3_spm.txt");
  return d;
}

// Checks that tok, loaded from d.writer(), has d's vocabulary, encodes each
// of d's plain-text cases to the reference ids and decodes them as the
// reference does (back to the text but where a token dropped whitespace),
// and encodes each special case with parse_special to the reference ids.
inline void expect_spm_reference(const Tokenizer& tok, const SpmRefData& d, const std::string& what = "") {
  EXPECT_EQ(tok.vocab_size(), d.tokens.size());
  EXPECT_GE(d.cases.size(), 90u);
  EXPECT_GE(d.specials.size(), 8u);
  for (const SpmRefData::Case& c : d.cases) {
    EXPECT_EQ(tok.encode(c.text, false), c.ids) << what << c.text;
    EXPECT_EQ(tok.decode(c.ids), c.decoded) << what << c.text;
  }
  for (const auto& [text, ids] : d.specials) EXPECT_EQ(tok.encode(text, false, true), ids) << what << text;
}

// Checks that tok, loaded from d.writer(), has d's vocabulary and encodes
// each of d's cases (special token strings as plain text) to the reference
// ids, and decodes the ids back to the text.
inline void expect_cases(const Tokenizer& tok, const BpeRefData& d, const std::string& what = "") {
  EXPECT_EQ(tok.vocab_size(), d.tokens.size());
  EXPECT_GE(d.cases.size(), 60u);
  for (const auto& [text, ids] : d.cases) {
    EXPECT_EQ(tok.encode(text, false), ids) << what << text;
    EXPECT_EQ(tok.decode(ids), text) << what << text;
  }
}

// Checks that tok encodes each of d's special cases with parse_special to the
// reference ids, and without it as plain text: no control tokens (user-defined
// ones are split out of any text), which decodes back to the text.
inline void expect_specials(const Tokenizer& tok, const BpeRefData& d) {
  EXPECT_GE(d.specials.size(), 5u);
  for (const auto& [text, ids] : d.specials) {
    EXPECT_EQ(tok.encode(text, false, /*parse_special=*/true), ids) << text;
    const Ids plain = tok.encode(text, false);
    for (int32_t id : plain) EXPECT_NE(d.types.at(static_cast<size_t>(id)), 3) << text;
    EXPECT_EQ(tok.decode(plain), text) << text;
  }
  // Control tokens decode to "", user-defined ones to their text.
  for (const auto& [text, ids] : d.specials) {
    std::string visible = text;
    for (int32_t id : ids)
      if (d.types[id] == 3) visible.erase(visible.find(d.tokens[id]), d.tokens[id].size());
    EXPECT_EQ(tok.decode(ids), visible) << text;
  }
}

}  // namespace tokenizer_test
