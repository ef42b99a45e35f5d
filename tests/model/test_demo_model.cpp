// The demo model writer (src/model/demo_model.h): a small spec gives a file
// that LlamaParams, the tokenizer and LlamaModel accept; its vocabulary is
// exactly n_vocab unique pieces that round-trip text; the same spec gives the
// same bytes; and printable_text's replacements.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unordered_set>
#include <vector>

#include "model/llama_reference.h"
#include "temp_dir.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/demo_model.h"
#include "weft/model/model.h"
#include "weft/model/tokenizer.h"
#include "weft/runtime/executor.h"

namespace {

namespace fs = std::filesystem;
using weft::model::DemoModelSpec;
using weft::model::Tokenizer;

using llama_reference::TempFile;
using weft::test::read_bytes;

// A written model's file, tokenizer and vocabulary strings.
struct Written {
  TempFile f;
  std::unique_ptr<weft::GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
  std::vector<std::string> tokens;
  Written(const DemoModelSpec& spec, const std::string& name) : f(name) {
    weft::model::write_demo_model(f.path, spec);
    file = weft::GgufFile::open(f.path);
    tok = Tokenizer::from_gguf(*file);
    tokens = file->get_array_strings("tokenizer.ggml.tokens").value();
  }
};

TEST(DemoModel, SmallSpecLoadsWithTokenizer) {
  const DemoModelSpec spec = weft::model::tiny_demo_spec();
  Written w(spec, "small.gguf");
  const auto p = weft::model::LlamaParams::from_gguf(*w.file);
  EXPECT_EQ(p.n_vocab, spec.n_vocab);
  EXPECT_EQ(p.n_embd, spec.n_embd);
  EXPECT_EQ(p.n_layer, spec.n_layer);
  EXPECT_EQ(p.n_head, spec.n_head);
  EXPECT_EQ(p.n_head_kv, spec.n_head_kv);
  EXPECT_EQ(p.n_ff, spec.n_ff);
  EXPECT_EQ(p.n_ctx_train, spec.n_ctx);
  EXPECT_EQ(w.file->find_tensor("output.weight"), nullptr);  // tied
  EXPECT_EQ(w.tok->vocab_size(), static_cast<size_t>(spec.n_vocab));
  EXPECT_EQ(w.tok->bos(), 1);
  EXPECT_EQ(w.tok->eos(), 2);
  EXPECT_EQ(w.file->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(w.file->get_i64("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_EQ(w.file->get_bool("tokenizer.ggml.add_bos_token"), true);

  DemoModelSpec untied = spec;
  untied.tied = false;
  Written u(untied, "untied.gguf");
  EXPECT_NE(u.file->find_tensor("output.weight"), nullptr);
}

// n_vocab unique strings; the fixed layout; and every normal piece longer
// than one character splits into two pieces of the vocabulary (so the
// encoder's pairwise merges can reach it), with a score of its length.
void check_vocabulary(const Written& w, size_t n_vocab) {
  ASSERT_EQ(w.tokens.size(), n_vocab);
  const std::unordered_set<std::string> unique(w.tokens.begin(), w.tokens.end());
  EXPECT_EQ(unique.size(), n_vocab);
  const auto types = w.file->get_array_i32("tokenizer.ggml.token_type").value();
  const auto scores = w.file->get_array_f32("tokenizer.ggml.scores").value();
  ASSERT_EQ(types.size(), n_vocab);
  ASSERT_EQ(scores.size(), n_vocab);
  EXPECT_EQ(w.tokens[0], "<unk>");
  EXPECT_EQ(types[0], 2);
  EXPECT_EQ(w.tokens[1], "<s>");
  EXPECT_EQ(w.tokens[2], "</s>");
  EXPECT_EQ(types[1], 3);
  EXPECT_EQ(types[2], 3);
  EXPECT_EQ(w.tokens[3], "<0x00>");
  EXPECT_EQ(w.tokens[258], "<0xFF>");
  for (size_t i = 3; i < 259; ++i) EXPECT_EQ(types[i], 6) << i;
  for (size_t i = 259; i < n_vocab; ++i) {
    const std::string& t = w.tokens[i];
    ASSERT_EQ(types[i], 1) << t;
    size_t chars = 0;
    for (char c : t) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    EXPECT_EQ(scores[i], static_cast<float>(chars)) << t;
    if (chars < 2) continue;
    bool splits = false;
    for (size_t at = 1; at < t.size() && !splits; ++at)
      splits = unique.count(t.substr(0, at)) && unique.count(t.substr(at));
    EXPECT_TRUE(splits) << "piece " << i << " '" << t << "' is not two pieces";
  }
}

TEST(DemoModel, VocabularyUniqueAndMergeable) {
  for (int64_t n : {weft::model::kDemoMinVocab, int64_t{600}, int64_t{32000}}) {
    SCOPED_TRACE(n);
    DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.n_vocab = n;
    Written w(spec, "vocab.gguf");
    check_vocabulary(w, static_cast<size_t>(n));
  }
}

TEST(DemoModel, EncodeDecodeRoundTrip) {
  Written w(weft::model::tiny_demo_spec(), "roundtrip.gguf");
  const std::string texts[] = {
      "Hello world",
      weft::model::kDemoPrompt,
      "  two  spaces, then\ttab and\nnewline ",
      "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x99\x82 na\xC3\xAFve",  // é, 日本, 🙂, ï: byte fallback
      "<s> is not special </s>",
      "",
  };
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    const std::vector<int32_t> ids = w.tok->encode(text, /*add_bos=*/true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(w.tok->decode(ids), text);
    EXPECT_EQ(w.tok->decode(w.tok->encode(text, false)), text);
  }
  // Non-ASCII characters are not pieces: they go through the byte tokens.
  const auto ids = w.tok->encode("\xC3\xA9", false);
  bool bytes = false;
  for (int32_t id : ids) bytes |= id >= 3 && id < 259;
  EXPECT_TRUE(bytes);
  EXPECT_TRUE(w.tok->encode("", false).empty());
}

TEST(DemoModel, PromptWordsAreWholePieces) {
  for (int64_t n : {weft::model::kDemoPromptVocab, int64_t{32000}}) {
    DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.n_vocab = n;
    Written w(spec, "prompt.gguf");
    const auto ids = w.tok->encode(weft::model::kDemoPrompt, true);
    // <s>, 13 words and the full stop.
    EXPECT_EQ(ids.size(), 15u) << n;
    for (int32_t id : ids) EXPECT_TRUE(id == 1 || id >= 259) << id;
    EXPECT_EQ(w.tok->decode_token(ids[1]), " The");
    EXPECT_EQ(w.tok->decode_token(ids[2]), " quick");
  }
  DemoModelSpec spec = weft::model::tiny_demo_spec();
  spec.n_vocab = weft::model::kDemoPromptVocab - 1;  // "▁time" is the last prompt piece
  Written w(spec, "prompt.gguf");
  EXPECT_EQ(w.tok->encode(weft::model::kDemoPrompt, true).size(), 16u);
}

TEST(DemoModel, SameSpecSameBytes) {
  const DemoModelSpec spec = weft::model::tiny_demo_spec();
  TempFile a("a.gguf"), b("b.gguf"), c("c.gguf");
  weft::model::write_demo_model(a.path, spec);
  weft::model::write_demo_model(b.path, spec);
  DemoModelSpec other = spec;
  other.seed = 7;
  weft::model::write_demo_model(c.path, other);
  const std::string bytes = read_bytes(a.path);
  ASSERT_FALSE(bytes.empty());
  EXPECT_TRUE(bytes == read_bytes(b.path));
  EXPECT_FALSE(bytes == read_bytes(c.path));  // other weights, the same vocabulary
  auto fa = weft::GgufFile::open(a.path), fc = weft::GgufFile::open(c.path);
  EXPECT_EQ(fa->get_array_strings("tokenizer.ggml.tokens"), fc->get_array_strings("tokenizer.ggml.tokens"));
}

TEST(DemoModel, BadVocabularySizeIsInvalidInput) {
  TempFile f("bad.gguf");
  for (int64_t n : {int64_t{0}, weft::model::kDemoMinVocab - 1, int64_t{1000001}}) {
    DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.n_vocab = n;
    try {
      weft::model::write_demo_model(f.path, spec);
      ADD_FAILURE() << "n_vocab " << n << " was accepted";
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      EXPECT_NE(std::string(e.what()).find("n_vocab"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(f.path));
}

TEST(DemoModel, CpuEvalGivesFiniteLogits) {
  const DemoModelSpec spec = weft::model::tiny_demo_spec();
  Written w(spec, "eval.gguf");
  auto dev = weft::make_cpu_device(2);
  weft::Executor model(*w.file, *dev, 64);
  const auto prompt = w.tok->encode(weft::model::kDemoPrompt, true);
  std::vector<float> logits = model.eval(prompt, 0);
  ASSERT_EQ(logits.size(), prompt.size() * static_cast<size_t>(spec.n_vocab));
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  const int next = weft::model::greedy(&logits[(prompt.size() - 1) * spec.n_vocab], static_cast<int>(spec.n_vocab));
  logits = model.eval(std::span<const int32_t>(&next, 1), static_cast<int64_t>(prompt.size()));
  ASSERT_EQ(logits.size(), static_cast<size_t>(spec.n_vocab));
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

TEST(PrintableText, ReplacesInvalidUtf8AndControls) {
  using weft::model::printable_text;
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(printable_text(""), "");
  EXPECT_EQ(printable_text("plain text ~!"), "plain text ~!");
  const std::string valid = "caf\xC3\xA9 \xE2\x96\x81 \xE6\x97\xA5 \xF0\x9F\x99\x82 \xF4\x8F\xBF\xBF";
  EXPECT_EQ(printable_text(valid), valid);                                // up to U+10FFFF
  EXPECT_EQ(printable_text("a\nb\tc\x7F"), "a" + r + "b" + r + "c" + r);  // C0, DEL
  EXPECT_EQ(printable_text("\xC2\x85x"), r + "x");                        // C1: one character
  EXPECT_EQ(printable_text("x\xC3"), "x" + r);                            // truncated at the end
  EXPECT_EQ(printable_text("\xE2\x96x"), r + r + "x");                    // truncated, then ASCII
  EXPECT_EQ(printable_text("\xA9"), r);                                   // stray continuation
  EXPECT_EQ(printable_text("\xC0\x80"), r + r);                           // overlong
  EXPECT_EQ(printable_text("\xE0\x80\x80"), r + r + r);                   // overlong
  EXPECT_EQ(printable_text("\xED\xA0\x80"), r + r + r);                   // surrogate
  EXPECT_EQ(printable_text("\xF4\x90\x80\x80"), r + r + r + r);           // above U+10FFFF
  EXPECT_EQ(printable_text("\xFF\xFE"), r + r);
}

}  // namespace
