// Embeddings (docs/serve.md, "Embeddings"): the hidden states a decoder
// model's forward keeps after its output norm, pooled and L2-normalised,
// against the float64 forward pass of tests/model/llama_reference.h run on
// the weights decoded from the same file; served by the engine between its
// generations (which stay equal to their runs alone), locally and over two
// stages; the pooling and base64 helpers against direct float64 and
// Python-computed values; and the request parsers' errors naming the field.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model/llama_reference.h"
#include "rpc/local_workers.h"
#include "serve/embedding.h"
#include "serve/embeddings_api.h"
#include "serve/engine.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/runtime/session.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using weft::serve::EmbedJob;
using weft::serve::EmbedResult;
using weft::serve::Engine;
using weft::serve::Pooling;

// The demo model's tensors as the float64 reference sees them: each one's
// bytes from the file (q8_0 matrices, f32 norms) decoded by the reference.
llama_reference::RefTensors embed_ref_tensors(const weft::GgufFile& f) {
  llama_reference::RefTensors t;
  for (const weft::GgufTensorInfo& info : f.tensors()) {
    llama_reference::RefTensor r;
    r.type = info.type;
    int64_t n = 1;
    for (int d = 0; d < info.n_dims; ++d) {
      r.ne.push_back(info.ne[d]);
      n *= info.ne[d];
    }
    const auto* p = static_cast<const uint8_t*>(f.tensor_data(info));
    r.bytes.assign(p, p + info.nbytes);
    if (info.type == weft::DType::q8_0) {
      r.v = llama_reference::q8_0_decode(p, n);
    } else {
      EXPECT_EQ(info.type, weft::DType::f32) << info.name;
      std::vector<float> fl(static_cast<size_t>(n));
      std::memcpy(fl.data(), p, fl.size() * 4);
      r.v.assign(fl.begin(), fl.end());
    }
    t[info.name] = std::move(r);
  }
  return t;
}

class EmbeddingsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string((fs::temp_directory_path() / ("weft_embed_" + std::to_string(::getpid()) + ".gguf")).string());
    weft::model::write_demo_model(*path_, weft::model::tiny_demo_spec());
  }
  static void TearDownTestSuite() {
    fs::remove(*path_);
    delete path_;
  }

  // Every token's hidden state after the output norm, float64.
  static std::vector<std::vector<double>> reference_hidden(const std::vector<int32_t>& tokens) {
    auto f = weft::GgufFile::open(*path_);
    const weft::model::LlamaParams p = weft::model::LlamaParams::from_gguf(*f);
    const llama_reference::RefTensors t = embed_ref_tensors(*f);
    llama_reference::Shape s{"llama", p.n_vocab, p.n_embd, p.n_layer, p.n_head, p.n_head_kv, p.n_ff, p.rms_eps, p.rope_base};
    return llama_reference::forward_hidden(s, t, tokens, [&](int64_t l, const std::vector<double>& h) {
      const std::string b = "blk." + std::to_string(l) + ".";
      auto g = llama_reference::matvec(t.at(b + "ffn_gate.weight").v, h, p.n_ff);
      llama_reference::swiglu(g, llama_reference::matvec(t.at(b + "ffn_up.weight").v, h, p.n_ff));
      return llama_reference::matvec(t.at(b + "ffn_down.weight").v, g, p.n_embd);
    });
  }

  // The reference's pooled, normalised vector.
  static std::vector<double> reference_vector(const std::vector<int32_t>& tokens, Pooling pooling) {
    const auto rows = reference_hidden(tokens);
    std::vector<double> v(rows[0].size(), 0.0);
    const size_t first = pooling == Pooling::last ? rows.size() - 1 : 0;
    const size_t end = pooling == Pooling::mean ? rows.size() : first + 1;
    for (size_t i = first; i < end; ++i)
      for (size_t c = 0; c < v.size(); ++c) v[c] += rows[i][c] / static_cast<double>(end - first);
    double norm = 0;
    for (double x : v) norm += x * x;
    for (double& x : v) x /= std::sqrt(norm);
    return v;
  }

  static std::vector<int32_t> embed_prompt(int i, int n) {
    std::vector<int32_t> p{1};
    for (int k = 0; k < n; ++k) p.push_back(static_cast<int32_t>(300 + (i * 31 + k * 13) % 290));
    return p;
  }

  static EmbedResult embed(Engine& engine, EmbedJob job) {
    auto r = engine.submit_embed(std::move(job));
    EXPECT_NE(r, nullptr);
    std::optional<EmbedResult> out = r->wait(60s);
    EXPECT_TRUE(out.has_value());
    return out.value_or(EmbedResult{.error = "no result"});
  }

  // The largest |a - b| over a vector.
  static double max_diff(const std::vector<float>& a, const std::vector<double>& b) {
    EXPECT_EQ(a.size(), b.size());
    double worst = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
  }

  static std::string* path_;
};
std::string* EmbeddingsTest::path_ = nullptr;

// q8_0 weights are decoded exactly by the reference; the differences are the
// CPU kernels' q8_0 activations and f32 sums: a few 1e-3 of a unit vector
// whose 64 components are ~0.12 each. A wrong row, a missing norm or a
// mean over the wrong tokens moves components by ~1e-1.
constexpr double kEmbedTol = 8e-3;

TEST_F(EmbeddingsTest, PooledHiddenStatesMatchFloat64Reference) {
  weft::Session s({.model = *path_});
  s.load(256);
  Engine engine(s, {.slots = 2, .batch_tokens = 8});  // prompts of 13 tokens go in two steps
  const std::vector<int32_t> a = embed_prompt(0, 12), b = embed_prompt(1, 5);
  for (Pooling pooling : {Pooling::last, Pooling::mean, Pooling::cls}) {
    const EmbedResult r = embed(engine, {.inputs = {a, b}, .pooling = pooling});
    ASSERT_EQ(r.error, "") << weft::serve::pooling_name(pooling);
    ASSERT_EQ(r.vectors.size(), 2u);
    EXPECT_EQ(r.prompt_tokens, static_cast<int>(a.size() + b.size()));
    const double da = max_diff(r.vectors[0], reference_vector(a, pooling));
    const double db = max_diff(r.vectors[1], reference_vector(b, pooling));
    std::printf("%s: max |weft - float64| %.2e, %.2e\n", weft::serve::pooling_name(pooling), da, db);
    EXPECT_LT(da, kEmbedTol) << weft::serve::pooling_name(pooling);
    EXPECT_LT(db, kEmbedTol) << weft::serve::pooling_name(pooling);
  }
  EXPECT_EQ(engine.metrics().embeddings, 3u);
}

// A request's inputs are batched as prompts are: two inputs on two free
// slots with room for both in one step take one step, and give what each
// gives alone.
TEST_F(EmbeddingsTest, SeveralInputsShareAStep) {
  weft::Session s({.model = *path_});
  s.load(256);
  Engine engine(s, {.slots = 2, .batch_tokens = 16});
  const std::vector<int32_t> a = embed_prompt(2, 4), b = embed_prompt(3, 5);
  const EmbedResult both = embed(engine, {.inputs = {a, b}, .pooling = Pooling::mean});
  ASSERT_EQ(both.error, "");
  EXPECT_EQ(engine.metrics().embed_steps, 1u);
  const EmbedResult alone_a = embed(engine, {.inputs = {a}, .pooling = Pooling::mean});
  const EmbedResult alone_b = embed(engine, {.inputs = {b}, .pooling = Pooling::mean});
  EXPECT_EQ(engine.metrics().embed_steps, 3u);
  const auto as_double = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  EXPECT_LT(max_diff(both.vectors.at(0), as_double(alone_a.vectors.at(0))), 1e-5);
  EXPECT_LT(max_diff(both.vectors.at(1), as_double(alone_b.vectors.at(0))), 1e-5);
  // Three inputs on two slots: two steps' worth of groups, the third
  // input's vector as alone.
  const EmbedResult three = embed(engine, {.inputs = {a, b, a}, .pooling = Pooling::mean});
  ASSERT_EQ(three.vectors.size(), 3u);
  EXPECT_EQ(engine.metrics().embed_steps, 5u);
  EXPECT_LT(max_diff(three.vectors.at(2), as_double(alone_a.vectors.at(0))), 1e-5);
}

// A request of many inputs whose deadline passes while it runs ends there
// with "timeout", its remaining steps not taken, and the engine serves on
// (the deadline is looked at before each step, not only in the queue).
TEST_F(EmbeddingsTest, ADeadlinePassingMidRequestEndsIt) {
  weft::Session s({.model = *path_});
  s.load(256);
  Engine engine(s, {.slots = 2, .batch_tokens = 8});
  std::vector<std::vector<int32_t>> many;
  for (int i = 0; i < 400; ++i) many.push_back(embed_prompt(i, 20));  // 21 tokens each: 6 steps of 8 per pair, 1200 in all
  const EmbedResult r =
      embed(engine, {.inputs = many, .deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(30)});
  EXPECT_EQ(r.error, "timeout");
  EXPECT_LT(engine.metrics().embed_steps, 1200u);
  EXPECT_EQ(engine.metrics().embeddings, 0u);
  const EmbedResult after = embed(engine, {.inputs = {embed_prompt(1, 4)}});
  EXPECT_EQ(after.error, "");
  EXPECT_EQ(engine.metrics().embeddings, 1u);
}

// Embeddings served while generations run: each generation's greedy tokens
// equal its run alone (the embedding took a free slot, never a busy one's
// cache), and the embedding equals the one computed on an idle engine.
TEST_F(EmbeddingsTest, ServedBetweenGenerationsWithoutDisturbingThem) {
  const std::vector<int32_t> gen = embed_prompt(5, 6), text = embed_prompt(6, 9);
  std::vector<int32_t> alone;
  std::vector<float> idle_vector;
  {
    weft::Session s({.model = *path_});
    s.load(256);
    weft::GenerateOptions o{.max_tokens = 24, .stop_at_end_of_generation = false};
    alone = s.generate(gen, o).tokens;
  }
  weft::Session s({.model = *path_});
  s.load(256);
  Engine engine(s, {.slots = 2});
  idle_vector = embed(engine, {.inputs = {text}}).vectors.at(0);
  weft::serve::Job job;
  job.prompt = gen;
  job.max_tokens = 24;
  job.ignore_eos = true;
  auto running = engine.submit(job);
  ASSERT_NE(running, nullptr);
  std::vector<EmbedResult> during;
  for (int i = 0; i < 3; ++i) during.push_back(embed(engine, {.inputs = {text}}));
  std::vector<int32_t> tokens;
  for (;;) {
    auto e = running->next(60000ms);
    ASSERT_TRUE(e.has_value());
    tokens.insert(tokens.end(), e->tokens.begin(), e->tokens.end());
    if (e->finished) break;
  }
  EXPECT_EQ(tokens, alone);
  for (const EmbedResult& r : during) {
    ASSERT_EQ(r.error, "");
    // Another slot's rows (more masked cache rows read): equal but for f32 rounding.
    EXPECT_LT(max_diff(r.vectors.at(0), std::vector<double>(idle_vector.begin(), idle_vector.end())), 1e-5);
  }
}

// Over two stages (this CPU and a worker on loopback): the layers split,
// the vector still the reference's; and while a generation's prompt is
// fed in pipelined steps (two groups in flight), the embedding waits for
// them to finish and both requests succeed.
TEST_F(EmbeddingsTest, OverTwoStagesMatchesReference) {
  weft::testing::LocalWorkers workers(1);
  weft::SessionOptions o{.model = *path_, .devices = {"cpu:1", "rpc://" + workers.endpoint(0)}};
  o.split = "1,1";
  weft::Session s(o);
  s.load(2048);
  Engine engine(s, {.slots = 4, .batch_tokens = 16});
  ASSERT_EQ(engine.metrics().groups, 2);
  const std::vector<int32_t> a = embed_prompt(3, 10);
  const EmbedResult r = embed(engine, {.inputs = {a}, .pooling = Pooling::mean});
  ASSERT_EQ(r.error, "");
  EXPECT_LT(max_diff(r.vectors.at(0), reference_vector(a, Pooling::mean)), kEmbedTol);
  std::vector<std::shared_ptr<weft::serve::Request>> gens;
  for (int i = 0; i < 2; ++i) {
    weft::serve::Job job;
    job.prompt = embed_prompt(7 + i, 400);  // 25 steps of prompt in each group
    job.max_tokens = 8;
    job.ignore_eos = true;
    gens.push_back(engine.submit(job));
    ASSERT_NE(gens.back(), nullptr);
  }
  // Once both prompts are being fed (both groups have had a step).
  while (engine.metrics().slots_busy < 2 || engine.metrics().steps < 2) std::this_thread::sleep_for(1ms);
  const EmbedResult during = embed(engine, {.inputs = {a}, .pooling = Pooling::mean});
  ASSERT_EQ(during.error, "");
  EXPECT_LT(max_diff(during.vectors.at(0), std::vector<double>(r.vectors[0].begin(), r.vectors[0].end())), 1e-5);
  for (auto& g : gens) {
    std::optional<weft::serve::Event> e;
    while ((e = g->next(60000ms)) && !e->finished) {
    }
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->finish_reason, "length") << e->error;
    EXPECT_EQ(e->completion_tokens, 8);
  }
}

TEST_F(EmbeddingsTest, EngineRefusesBadInputsNamingThem) {
  weft::Session s({.model = *path_});
  s.load(64);
  Engine engine(s, {.slots = 2});  // 32 positions a slot
  auto message = [&](EmbedJob job) {
    try {
      engine.submit_embed(std::move(job));
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({}).find("no inputs"), std::string::npos);
  EXPECT_NE(message({.inputs = {{1, 2}, {}}}).find("input 1: "), std::string::npos);
  EXPECT_NE(message({.inputs = {embed_prompt(0, 40)}}).find("do not fit a slot's context of 32"), std::string::npos);
  EXPECT_NE(message({.inputs = {{1, 600}}}).find("outside the vocabulary"), std::string::npos);
}

// The file's <arch>.pooling_type: read as the standard engine numbers it,
// absent as -1, anything outside 0..4 refused naming the key.
TEST_F(EmbeddingsTest, FilePoolingTypeKey) {
  const llama_reference::RefTensors t = embed_ref_tensors(*weft::GgufFile::open(*path_));
  const weft::model::LlamaParams p = weft::model::LlamaParams::from_gguf(*weft::GgufFile::open(*path_));
  const llama_reference::Shape s{"llama", p.n_vocab, p.n_embd, p.n_layer, p.n_head, p.n_head_kv, p.n_ff};
  llama_reference::TempFile file("weft_embed_pooling");
  auto pooling_of = [&](std::function<void(weft::GgufWriter&)> keys) {
    llama_reference::write_model(file.path, s, t, keys);
    return weft::model::LlamaParams::from_gguf(*weft::GgufFile::open(file.path)).pooling_type;
  };
  EXPECT_EQ(pooling_of({}), -1);
  EXPECT_EQ(pooling_of([](weft::GgufWriter& w) { w.set_u32("llama.pooling_type", 1); }), 1);
  EXPECT_EQ(pooling_of([](weft::GgufWriter& w) { w.set_i32("llama.pooling_type", 3); }), 3);
  for (int bad : {5, -1}) {
    try {
      pooling_of([bad](weft::GgufWriter& w) { w.set_i32("llama.pooling_type", bad); });
      ADD_FAILURE() << bad << " accepted";
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      EXPECT_NE(std::string(e.what()).find("key llama.pooling_type is not one of 0 none"), std::string::npos) << e.what();
    }
  }
}

// The request bodies: each fault a 400 naming its field.
TEST_F(EmbeddingsTest, ParsersNameTheField) {
  auto tok = weft::model::Tokenizer::from_gguf(*weft::GgufFile::open(*path_));
  const weft::serve::ApiContext ctx{.tokenizer = tok.get(), .n_vocab = 600, .slot_context = 32};
  const weft::serve::EmbeddingShape shape{.n_embd = 64, .pooling_type = -1};
  using weft::serve::Json;
  auto param = [&](const char* body, bool ollama = false) {
    try {
      const Json j = Json::parse(body);
      ollama ? weft::serve::parse_ollama_embed(j, ctx, shape) : weft::serve::parse_embeddings(j, ctx, shape);
    } catch (const weft::serve::ApiError& e) {
      EXPECT_EQ(e.status(), 400) << body;
      return e.param() + ": " + e.what();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(param(R"({"input": "The quick brown fox"})"), "accepted");
  EXPECT_EQ(param(R"({"input": ["a", "b"], "encoding_format": "base64", "dimensions": 64, "model": "m"})"), "accepted");
  EXPECT_EQ(param(R"({"input": [1, 2, 3]})"), "accepted");
  EXPECT_EQ(param(R"({"input": [[1, 2], [3]], "pooling": "mean"})"), "accepted");
  EXPECT_EQ(param(R"({"model": "m"})"), "input: 'input' is required");
  EXPECT_EQ(param(R"({"input": ""})"), "input: 'input' is an empty string");
  EXPECT_EQ(param(R"({"input": []})"), "input: 'input' is an empty array");
  EXPECT_EQ(param(R"({"input": ["ok", ""]})"), "input: 'input[1]' is an empty string");
  EXPECT_EQ(param(R"({"input": [[1], []]})"), "input: 'input[1]' has no tokens");
  EXPECT_EQ(param(R"({"input": 5})").rfind("input: 'input' must be a string, an array", 0), 0u);
  EXPECT_EQ(param(R"({"input": [1, 600]})"), "input: 'input[1]' must be a token id in [0, 600)");
  EXPECT_EQ(param(R"({"input": [["a"]]})"), "input: 'input[0][0]' must be a token id in [0, 600)");
  EXPECT_EQ(param(R"({"input": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
                                25, 26, 27, 28, 29, 30, 31, 32, 33]})"),
            "input: 'input' is 33 tokens, more than a slot's context of 32");
  EXPECT_EQ(param(R"({"input": "a", "encoding_format": "int8"})"),
            "encoding_format: 'encoding_format' must be \"float\" or \"base64\"");
  EXPECT_EQ(param(R"({"input": "a", "dimensions": 32})").rfind("dimensions: 'dimensions' must be the model's", 0), 0u);
  EXPECT_EQ(param(R"({"input": "a", "pooling": "max"})"), "pooling: 'pooling' must be \"mean\", \"cls\" or \"last\"");
  EXPECT_EQ(param(R"({"input": "a", "model": 3})"), "model: 'model' must be a string");
  const Json many = {{"input", std::vector<std::string>(2049, "a")}};
  EXPECT_THROW(weft::serve::parse_embeddings(many, ctx, shape), weft::serve::ApiError);
  const Json ids = {{"input", std::vector<int>(33, 5)}};  // one token array: its length counts, not the item limit
  EXPECT_EQ(param(ids.dump().c_str()), "input: 'input' is 33 tokens, more than a slot's context of 32");
  EXPECT_EQ(param(R"([1])"), ": the request body must be a JSON object");
  // Ollama's: strings only; too long is cut unless truncate is false.
  EXPECT_EQ(param(R"({"input": ["a", "b"]})", true), "accepted");
  EXPECT_EQ(param(R"({"input": [1, 2]})", true), "input: 'input[0]' must be a string");
  EXPECT_EQ(param(R"({"input": "a", "truncate": "no"})", true), "truncate: 'truncate' must be a boolean");
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "fox ";
  const Json body = {{"input", long_text}};
  EXPECT_EQ(weft::serve::parse_ollama_embed(body, ctx, shape).job.inputs.at(0).size(), 32u);
  EXPECT_EQ(param((R"({"input": ")" + long_text + R"(", "truncate": false})").c_str(), true)
                .rfind("input: 'input' is ", 0), 0u);
  EXPECT_EQ(param((R"({"input": ")" + long_text + R"("})").c_str()).rfind("input: 'input' is ", 0), 0u);
  // A file's rank pooling has no vector unless the request names one.
  const weft::serve::EmbeddingShape rank{.n_embd = 64, .pooling_type = 4};
  EXPECT_THROW(weft::serve::parse_embeddings(Json::parse(R"({"input": "a"})"), ctx, rank), weft::serve::ApiError);
  EXPECT_EQ(weft::serve::parse_embeddings(Json::parse(R"({"input": "a", "pooling": "cls"})"), ctx, rank).job.pooling,
            Pooling::cls);
}

// Pooling against a direct float64 computation; the file's pooling_type.
TEST(EmbeddingPooling, PoolsAndNormalisesInDouble) {
  const std::vector<float> rows = {1, 2, 0, 3, -1, 4, 0.5f, 0, 2};  // 3 tokens of 3
  auto expect_unit = [](const std::vector<float>& got, std::vector<double> want) {
    double n = 0;
    for (double w : want) n += w * w;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i] / std::sqrt(n), 1e-7) << i;
  };
  expect_unit(weft::serve::pool_normalized(rows, 3, Pooling::mean), {4.5 / 3, 1.0 / 3, 6.0 / 3});
  expect_unit(weft::serve::pool_normalized(rows, 3, Pooling::cls), {1, 2, 0});
  expect_unit(weft::serve::pool_normalized(rows, 3, Pooling::last), {0.5, 0, 2});
  EXPECT_EQ(weft::serve::pool_normalized(std::vector<float>(6, 0.0f), 3, Pooling::mean), std::vector<float>(3, 0.0f));
  EXPECT_THROW(weft::serve::pool_normalized(std::vector<float>(7, 1.0f), 3, Pooling::mean), weft::Error);
  EXPECT_THROW(weft::serve::pool_normalized({}, 3, Pooling::last), weft::Error);
  EXPECT_EQ(weft::serve::pooling_of_file(1), Pooling::mean);
  EXPECT_EQ(weft::serve::pooling_of_file(2), Pooling::cls);
  EXPECT_EQ(weft::serve::pooling_of_file(3), Pooling::last);
  EXPECT_EQ(weft::serve::pooling_of_file(-1), Pooling::last);  // a decoder model's file without the key
  EXPECT_EQ(weft::serve::pooling_of_file(0), Pooling::last);
  EXPECT_EQ(weft::serve::pooling_of_file(4), std::nullopt);    // rank
}

// Python: base64.b64encode(struct.pack('<3f', 1.0, -2.5, 0.1)) and the others.
TEST(EmbeddingPooling, Base64IsLittleEndianFloat32) {
  EXPECT_EQ(weft::serve::base64_floats(std::vector<float>{1.0f, -2.5f, 0.1f}), "AACAPwAAIMDNzMw9");
  EXPECT_EQ(weft::serve::base64_floats(std::vector<float>{1.0f, -2.5f}), "AACAPwAAIMA=");
  EXPECT_EQ(weft::serve::base64_floats(std::vector<float>{3.25f}), "AABQQA==");
  EXPECT_EQ(weft::serve::base64_floats(std::vector<float>{}), "");
}

}  // namespace
