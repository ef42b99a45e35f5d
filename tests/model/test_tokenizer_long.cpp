// Long single pieces (merging is O(n log n) per piece; these would take hours
// with a scan of all pairs per merge) and the heap-based BPE merging checked
// against a plain "scan all pairs, merge the lowest rank" reference on many
// mid-sized random texts. Times are printed, not asserted.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <unordered_map>

#include "model/tokenizer_impl.h"
#include "model/tokenizer_pre.h"
#include "test_tokenizer_util.h"

namespace {

using namespace tokenizer_test;

// Encodes text, checks the round trip, and prints how long encoding took.
void check_long(const Tokenizer& tok, const std::string& text, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  Ids ids = tok.encode(text, false);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  %s: %zu bytes -> %zu tokens in %.1f ms\n", what, text.size(), ids.size(), ms);
  EXPECT_EQ(tok.decode(ids), text) << what;
}

std::string repeat_to(const std::string& unit, size_t n) {
  std::string s;
  while (s.size() < n) s += unit;
  s.resize(n);
  return s;
}

TEST(TokenizerLong, Llama3SinglePieces) {
  auto tok = load(llama3_ref().writer("llama-bpe"), "long_l3");
  check_long(*tok, repeat_to("antidisestablishmentarianismPneumonoultramicroscopicsilicovolcanoconiosis", 200000),
             "200 KB of letters, one piece");
  check_long(*tok, std::string(100000, 'z'), "100 KB of 'z'");
  check_long(*tok, std::string(100000, 'a'), "100 KB of 'a'");
  check_long(*tok, std::string(100000, ' '), "100 KB of spaces");
  check_long(*tok, repeat_to("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", 150000), "150 KB of CJK, one piece");
}

// smollm's pre-tokenizer looks for the end of each run without digits once
// per run, not once per piece.
TEST(TokenizerLong, DigitsGpt2ManyPieces) {
  BpeVocab v;
  auto tok = load(v.writer("smollm"), "long_smollm");
  check_long(*tok, repeat_to("hello lol, hell! ", 200000), "smollm: 200 KB of words, no digits");
  check_long(*tok, repeat_to("hello 123 ", 200000), "smollm: 200 KB of words and digits");
}

TEST(TokenizerLong, SpmSinglePieces) {
  SpmVocab v;
  auto tok = load(v.writer(), "long_spm");
  check_long(*tok, repeat_to("abcHelloworld", 200000), "spm: 200 KB of letters");
  check_long(*tok, std::string(100000, ' '), "spm: 100 KB of spaces");
  check_long(*tok, std::string(100000, 'l'), "spm: 100 KB of 'l'");
}

// Gemma's user-defined tokens (runs of spaces, newlines and tabs, HTML tags)
// are looked for at every byte of plain text, and the text between them is
// one SentencePiece piece however long.
TEST(TokenizerLong, GemmaUserDefinedTokens) {
  auto tok = load(gemma3_ref().writer(), "long_gemma");
  check_long(*tok, repeat_to("Hello world  <b>x</b>\n\n\tThe quick brown fox. ", 200000),
             "gemma: 200 KB of words, whitespace runs and tags");
  check_long(*tok, std::string(100000, '<'), "gemma: 100 KB of '<'");
  check_long(*tok, std::string(100000, ' '), "gemma: 100 KB of spaces");
  check_long(*tok, repeat_to("antidisestablishmentarianism", 200000), "gemma: 200 KB of letters, one piece");
}

// The byte-level BPE the slow way: for each pre-tokenized piece, the whole
// piece if it is a token (llama3), else repeatedly merge the lowest-rank
// adjacent pair, leftmost on ties, scanning every pair each time.
Ids reference_encode(const BpeRefData& d, const std::string& text) {
  static const auto maps = [&] {
    std::pair<std::unordered_map<std::string, int32_t>, std::unordered_map<std::string, int32_t>> m;
    for (size_t i = 0; i < d.tokens.size(); ++i) m.first.emplace(d.tokens[i], static_cast<int32_t>(i));
    for (size_t i = 0; i < d.merges.size(); ++i) m.second.emplace(d.merges[i], static_cast<int32_t>(i));
    return m;
  }();
  const auto& [ids, ranks] = maps;
  Ids out;
  for (const std::string& piece :
       weft::model::detail::pretokenize(text, *weft::model::detail::find_pre_tokenizer("llama3"))) {
    std::vector<std::string> sym;
    for (char c : piece) sym.push_back(byte_symbol(static_cast<unsigned char>(c)));
    std::string whole;
    for (const std::string& s : sym) whole += s;
    if (ids.count(whole)) {
      out.push_back(ids.at(whole));
      continue;
    }
    for (;;) {
      int32_t best = INT32_MAX;
      size_t at = 0;
      for (size_t k = 0; k + 1 < sym.size(); ++k) {
        auto it = ranks.find(sym[k] + " " + sym[k + 1]);
        if (it != ranks.end() && it->second < best) best = it->second, at = k;
      }
      if (best == INT32_MAX) break;
      sym[at] += sym[at + 1];
      sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
    for (const std::string& s : sym) out.push_back(ids.at(s));  // every merge result is a token here
  }
  return out;
}

TEST(TokenizerLong, HeapMergingEqualsScanning) {
  const BpeRefData& d = llama3_ref();
  auto tok = load(d.writer("llama-bpe"), "long_vs_scan");
  // Fragments of the reference texts, so that many merges apply.
  const std::vector<std::string> parts = {"anti",     "dis",   "establish", "ment",         "arian",  "ism",
                                          "Pneumono", "ultra", "micro",     "scopic",       "silico", "volcano",
                                          "coniosis", "zz",    "aaa",       "xkcd",         "Donau",  "dampf",
                                          "schiff",   "fahrt", "\xC3\xA4",  "\xE6\x97\xA5", " ",      "--"};
  std::mt19937 rng(1234);
  for (int round = 0; round < 30; ++round) {
    std::string text;
    while (text.size() < 1000) text += parts[rng() % parts.size()];
    EXPECT_EQ(tok->encode(text, false), reference_encode(d, text)) << "round " << round;
  }
}

}  // namespace
