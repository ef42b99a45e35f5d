// The serving engine's tests' fixture (test_engine.cpp,
// test_engine_recovery.cpp): a tiny two-layer demo model written once per
// suite, the i-th test prompt, a request's greedy tokens run alone, and a
// request drained to its finished event.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "serve/engine.h"
#include "weft/model/demo_model.h"
#include "weft/runtime/session.h"

namespace weft::serve_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using weft::serve::Engine;
using weft::serve::Event;
using weft::serve::Job;
using weft::serve::Request;

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string((fs::temp_directory_path() / ("weft_engine_" + std::to_string(::getpid()) + ".gguf")).string());
    weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.n_layer = 2;
    weft::model::write_demo_model(*path_, spec);
  }
  static void TearDownTestSuite() {
    fs::remove(*path_);
    delete path_;
  }

  static std::unique_ptr<weft::Session> session(int64_t n_ctx) {
    auto s = std::make_unique<weft::Session>(weft::SessionOptions{.model = *path_});
    s->load(n_ctx);
    return s;
  }

  // The i-th test prompt: distinct token ids from the vocabulary.
  static std::vector<int32_t> prompt(int i, int n = 6) {
    std::vector<int32_t> p{1};
    for (int k = 0; k < n; ++k) p.push_back(static_cast<int32_t>(300 + (i * 53 + k * 17) % 290));
    return p;
  }

  // Greedy tokens of prompt run alone through Session::generate.
  static std::vector<int32_t> alone(const std::vector<int32_t>& p, int max_tokens) {
    auto s = session(128);
    weft::GenerateOptions o{.max_tokens = max_tokens, .stop_at_end_of_generation = true};
    return s->generate(p, o).tokens;
  }

  static Job greedy_job(std::vector<int32_t> p, int max_tokens) {
    Job j;
    j.prompt = std::move(p);
    j.max_tokens = max_tokens;
    return j;
  }

  // Every event until the finished one (tokens and text concatenated).
  struct Outcome {
    std::vector<int32_t> tokens;
    std::string text;
    Event finish;
  };
  static Outcome drain(Request& r) {
    Outcome o;
    for (int waited = 0; waited < 600; ++waited) {
      std::optional<Event> e = r.next(100ms);
      if (!e) continue;
      o.tokens.insert(o.tokens.end(), e->tokens.begin(), e->tokens.end());
      o.text += e->text;
      if (e->finished) {
        o.finish = *e;
        return o;
      }
    }
    ADD_FAILURE() << "no finished event within 60 s";
    return o;
  }

  inline static std::string* path_ = nullptr;
};

}  // namespace weft::serve_test
