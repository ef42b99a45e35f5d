// Executor::eval_batch: several sequences in one graph, each in its own
// part of the KV cache, equal to each sequence run alone (continuous
// batching: sequences join, leave and mix prompt chunks with decode steps).
// On the tiny demo model and on the Gemma 2/3 family files (sliding windows).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/family_files.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"

namespace {

namespace fs = std::filesystem;
using weft::model::BatchToken;
using weft::model::LlamaModel;
using weft::Executor;
using weft::model::LogitRows;

// Each sequence alone: the prompt, then `steps` greedy tokens; the logits
// of the prompt's last token and of each step.
struct Alone {
  std::vector<int32_t> tokens;               // the greedy continuation
  std::vector<std::vector<float>> logits;    // steps + 1 rows
};

Alone run_alone(const weft::GgufFile& file, weft::Device& dev, int64_t n_ctx, const std::vector<int32_t>& prompt,
                int steps) {
  Executor m(file, dev, n_ctx);
  const int vocab = static_cast<int>(m.params().n_vocab);
  Alone a;
  std::vector<float> logits = m.eval(prompt, 0, LogitRows::last);
  int64_t pos = static_cast<int64_t>(prompt.size());
  for (int s = 0; s <= steps; ++s) {
    a.logits.push_back(logits);
    if (s == steps) break;
    const int32_t next = weft::model::greedy(logits.data(), vocab);
    a.tokens.push_back(next);
    logits = m.eval(std::vector<int32_t>{next}, pos++, LogitRows::last);
  }
  return a;
}

double max_rel_diff(const std::vector<float>& a, const float* b) {
  double worst = 0, scale = 1e-3;
  for (float v : a) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  return worst / scale;
}

// Three sequences through one model with the cache cut in three: A's
// prompt in two chunks, B's at once in the first step with A's first
// chunk, C joining at the third step; then decode steps of every live
// sequence together, A leaving early. Every logits row equals its
// sequence run alone.
void check_batched_equals_alone(const std::string& path, int64_t seq_ctx) {
  auto file = weft::GgufFile::open(path);
  auto dev = weft::make_cpu_device(2);
  const int64_t vocab = weft::model::LlamaParams::from_gguf(*file).n_vocab;
  auto prompt = [&](int n, int salt) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 37 + salt * 101 + 5) % vocab));
    return p;
  };
  const std::vector<std::vector<int32_t>> prompts{prompt(9, 1), prompt(13, 2), prompt(4, 3)};
  const int steps = 6;
  std::vector<Alone> alone;
  for (const auto& p : prompts) alone.push_back(run_alone(*file, *dev, seq_ctx, p, steps));

  Executor m(*file, *dev, 3 * seq_ctx);
  const int64_t n_seq = 3;
  struct Seq {
    size_t fed = 0;     // prompt tokens evaluated
    int produced = 0;   // logits rows checked
    int32_t last = -1;  // the token to feed next once the prompt is in
    int64_t pos = 0;
    int join_step = 0;
    int leave_after = steps;
  };
  std::vector<Seq> seqs(3);
  seqs[2].join_step = 2;
  seqs[0].leave_after = 3;
  std::vector<float> logits;
  for (int step = 0; step < 16; ++step) {
    std::vector<BatchToken> batch;
    std::vector<int> owners;  // the sequence of each logits row
    for (int s = 0; s < 3; ++s) {
      Seq& q = seqs[static_cast<size_t>(s)];
      const auto& p = prompts[static_cast<size_t>(s)];
      if (step < q.join_step || q.produced > q.leave_after) continue;
      if (q.fed < p.size()) {
        // A: 5 tokens, then the rest; others at once.
        const size_t chunk = s == 0 && q.fed == 0 ? 5 : p.size() - q.fed;
        for (size_t i = 0; i < chunk; ++i, ++q.fed) {
          const bool last = q.fed + 1 == p.size();
          batch.push_back({p[q.fed], static_cast<int32_t>(q.pos++), s, last});
          if (last) owners.push_back(s);
        }
      } else {
        batch.push_back({q.last, static_cast<int32_t>(q.pos++), s, true});
        owners.push_back(s);
      }
    }
    if (batch.empty()) break;
    if (owners.empty()) {  // no row yet (never with these chunks)
      FAIL() << "a step without logits";
    }
    m.eval_batch(batch, n_seq, logits);
    ASSERT_EQ(logits.size(), owners.size() * static_cast<size_t>(vocab));
    for (size_t r = 0; r < owners.size(); ++r) {
      Seq& q = seqs[static_cast<size_t>(owners[r])];
      const Alone& a = alone[static_cast<size_t>(owners[r])];
      const float* row = &logits[r * static_cast<size_t>(vocab)];
      EXPECT_LT(max_rel_diff(a.logits[static_cast<size_t>(q.produced)], row), 1e-4)
          << "sequence " << owners[r] << " row " << q.produced << " at step " << step;
      if (q.produced < steps) {
        q.last = weft::model::greedy(row, static_cast<int>(vocab));
        EXPECT_EQ(q.last, a.tokens[static_cast<size_t>(q.produced)]) << "sequence " << owners[r];
      }
      ++q.produced;
    }
  }
  EXPECT_EQ(seqs[0].produced, 4);  // left after its third decode step
  EXPECT_EQ(seqs[1].produced, steps + 1);
  EXPECT_EQ(seqs[2].produced, steps + 1);
}

TEST(BatchEval, SequencesTogetherEqualEachAlone) {
  const std::string path = (fs::temp_directory_path() / ("weft_batch_" + std::to_string(::getpid()) + ".gguf")).string();
  weft::model::write_demo_model(path, weft::model::tiny_demo_spec());
  check_batched_equals_alone(path, 64);
  fs::remove(path);
}

TEST(BatchEval, SlidingWindowsStayWithinEachSequence) {
  for (const char* name : {"gemma2", "gemma3"}) {
    SCOPED_TRACE(name);
    check_batched_equals_alone((family_files::dir() / (std::string(name) + ".gguf")).string(), 32);
  }
}

TEST(BatchEval, RejectsWhatDoesNotFit) {
  const std::string path = (fs::temp_directory_path() / ("weft_batchbad_" + std::to_string(::getpid()) + ".gguf")).string();
  weft::model::write_demo_model(path, weft::model::tiny_demo_spec());
  auto file = weft::GgufFile::open(path);
  auto dev = weft::make_cpu_device(1);
  Executor m(*file, *dev, 96);
  std::vector<float> logits;
  auto expect_invalid = [&](std::vector<BatchToken> b, int64_t n_seq, const std::string& words) {
    try {
      m.eval_batch(b, n_seq, logits);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_invalid({{1, 0, 0, true}}, 5, "do not divide");
  expect_invalid({{1, 32, 0, true}}, 3, "outside 3 sequences of 32 positions");
  expect_invalid({{1, 0, 3, true}}, 3, "outside 3 sequences");
  expect_invalid({{1, -1, 0, true}}, 3, "position -1");
  expect_invalid({{100000, 0, 0, true}}, 3, "outside the vocabulary");
  expect_invalid({{1, 0, 0, false}}, 3, "no token");
  expect_invalid({}, 3, "at least one token");
  fs::remove(path);
}

}  // namespace
