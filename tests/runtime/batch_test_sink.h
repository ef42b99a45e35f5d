// What the BatchEngine tests share (test_batch_engine.cpp,
// test_batch_speculative.cpp): the fake target's next token (from the
// sequence and the position evaluated, so every expected token is known),
// a sink that records what a job receives, a greedy job, and the loop that
// runs the engine until its jobs end.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "weft/runtime/batch_engine.h"

namespace batch_test {

inline constexpr int64_t kVocab = 64;

// The token a fake step predicts after the token at pos of sequence seq.
inline int32_t predicted(int seq, int32_t pos) { return static_cast<int32_t>((seq * 7 + pos * 3 + 1) % kVocab); }

// Greedy tokens of a sequence whose prompt has n tokens, in slot seq, from position 0.
inline std::vector<int32_t> expected(int seq, int n_prompt, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(predicted(seq, n_prompt - 1 + i));
  return out;
}

// Records what the engine hands a job.
struct Recorder : weft::BatchSink {
  std::vector<int32_t> tokens;
  bool finished = false;
  weft::BatchEnd end;
  int cancel_after = -1;  // tokens, then cancelled() says yes
  int throw_at = -1;      // the token whose on_token throws
  int stop_after = -1;    // on_token says stop at this many tokens
  bool on_token(int32_t token, std::span<const float> row) override {
    EXPECT_EQ(row.size(), static_cast<size_t>(kVocab));
    if (static_cast<int>(tokens.size()) == throw_at) throw std::runtime_error("the owner's callback broke");
    tokens.push_back(token);
    return stop_after < 0 || static_cast<int>(tokens.size()) < stop_after;
  }
  bool cancelled() override { return cancel_after >= 0 && static_cast<int>(tokens.size()) >= cancel_after; }
  void on_finish(const weft::BatchEnd& e) override {
    EXPECT_FALSE(finished) << "on_finish twice";
    finished = true;
    end = e;
  }
};

// A greedy job that ignores end-of-generation tokens.
inline weft::BatchJob job(std::vector<int32_t> prompt, int max_tokens) {
  weft::BatchJob j;
  j.prompt = std::move(prompt);
  j.options.max_tokens = max_tokens;
  j.options.stop_at_end_of_generation = false;
  return j;
}

// advance() until no job is busy (a test failure after 10000 rounds).
inline void run(weft::BatchEngine& e) {
  for (int guard = 0; e.busy(); ++guard) {
    ASSERT_LT(guard, 10000) << "the engine does not finish";
    e.advance();
  }
}

}  // namespace batch_test
