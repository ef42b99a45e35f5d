// tests/data/quant-vectors.json and mxfp4-vectors.json, read once: per GGUF
// type, f32 rows, the bytes ggml's reference quantizer wrote for them (no
// importance matrix) and the floats its dequantizer returned. Shared by the tests of weft's codecs
// (tests/core/test_quant_types.cpp) and of the conformance reference's
// decoders (tests/conformance/test_reference_quant.cpp).
#pragma once

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace weft::test {

// ---- A minimal JSON reader, enough for quant-vectors.json ----------------

struct Json {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  const Json& at(const std::string& key) const {
    auto it = object.find(key);
    if (it == object.end()) throw std::runtime_error("quant-vectors.json: missing key " + key);
    return it->second;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : s_(text) {}

  Json document() {
    Json v = value();
    skip_space();
    if (pos_ != s_.size()) error("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    throw std::runtime_error("quant-vectors.json: " + what + " at offset " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) error(std::string("expected '") + c + "'");
  }
  bool eat_word(const char* word) {
    const size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }

  Json value() {
    skip_space();
    if (pos_ >= s_.size()) error("unexpected end");
    Json v;
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = Json::Kind::object;
      ++pos_;
      if (eat('}')) return v;
      do {
        skip_space();
        std::string key = string_literal();
        expect(':');
        v.object[key] = value();
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      v.kind = Json::Kind::array;
      ++pos_;
      if (eat(']')) return v;
      do v.array.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::Kind::string;
      v.string = string_literal();
    } else if (eat_word("true") || eat_word("false")) {
      v.kind = Json::Kind::boolean;
    } else if (eat_word("null")) {
      v.kind = Json::Kind::null;
    } else {
      v.kind = Json::Kind::number;
      const char* begin = s_.c_str() + pos_;
      char* end = nullptr;
      v.number = std::strtod(begin, &end);  // correctly rounded: f32 values survive exactly
      if (end == begin) error("bad value");
      pos_ += static_cast<size_t>(end - begin);
    }
    return v;
  }

  std::string string_literal() {  // the file's strings need no escapes but '\"' and '\\'
    if (pos_ >= s_.size() || s_[pos_] != '"') error("expected a string");
    std::string out;
    for (++pos_; pos_ < s_.size() && s_[pos_] != '"'; ++pos_) {
      if (s_[pos_] == '\\' && ++pos_ >= s_.size()) break;
      out += s_[pos_];
    }
    if (pos_ >= s_.size()) error("unterminated string");
    ++pos_;
    return out;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

// ---- The vectors ---------------------------------------------------------

struct VectorRow {
  std::vector<float> input;
  std::vector<uint8_t> quantized;
  std::vector<float> dequantized;
};

struct VectorType {
  std::string name;
  uint32_t gguf_id;
  int64_t block_values;
  size_t block_bytes;
  std::vector<VectorRow> rows;
};

inline std::vector<float> floats(const Json& array) {
  std::vector<float> out;
  for (const Json& v : array.array) out.push_back(static_cast<float>(v.number));
  return out;
}

inline std::vector<uint8_t> bytes_from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// The types of one vector file (tests/data/NAME).
inline std::vector<VectorType> load_vector_file(const std::string& name) {
  const std::string path = WEFT_SOURCE_DIR "/tests/data/" + name;
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("cannot open " + path);
  std::stringstream text;
  text << file.rdbuf();
  const std::string content = text.str();
  const Json doc = JsonReader(content).document();
  std::vector<VectorType> out;
  for (const Json& t : doc.at("types").array) {
    VectorType type{t.at("type").string,
                    static_cast<uint32_t>(t.at("gguf_dtype_id").number),
                    static_cast<int64_t>(t.at("block_values").number),
                    static_cast<size_t>(t.at("block_bytes").number),
                    {}};
    for (const Json& r : t.at("rows").array) {
      type.rows.push_back(
          {floats(r.at("input_f32")), bytes_from_hex(r.at("quantized_hex").string), floats(r.at("dequantized_f32"))});
    }
    out.push_back(std::move(type));
  }
  return out;
}

// Every type's vectors: quant-vectors.json (llama-quantize's output for the
// common types), then mxfp4-vectors.json (ggml's mxfp4 reference functions,
// driven by tests/data/mxfp4_vectors.c; edge cases included).
inline const std::vector<VectorType>& quant_vectors() {
  static const std::vector<VectorType> types = [] {
    std::vector<VectorType> all = load_vector_file("quant-vectors.json");
    for (VectorType& t : load_vector_file("mxfp4-vectors.json")) all.push_back(std::move(t));
    return all;
  }();
  return types;
}

}  // namespace weft::test
