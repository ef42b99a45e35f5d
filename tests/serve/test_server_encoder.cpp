// `weft serve` with a BERT encoder file (a tiny one with a WordPiece
// vocabulary) over loopback HTTP: /v1/embeddings and Ollama's /api/embed
// give the float64 reference's pooled, normalized vector for the text's
// tokens ([CLS] ... [SEP]); the engine evaluates an input longer than a
// step's token budget whole, in one step; generation routes answer 400
// naming why (an encoder has no output matrix) and the server keeps serving.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/bert_reference.h"
#include "serve/engine.h"
#include "serve/http_client.h"
#include "weft/runtime/session.h"
#include "weft/serve/server.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using serve_test::request;

// [PAD] [UNK] [CLS] [SEP], then word-initial pieces (U+2581, as the
// standard engine's converter writes them) and a continuation.
const std::vector<std::string> kEncoderWords = {"hello", "world", "the", "cat", "sat", "on", "mat", "a", "dog", "ran"};

std::vector<std::string> encoder_vocab(int64_t size) {
  std::vector<std::string> v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]"};
  for (const std::string& w : kEncoderWords) v.push_back("\xe2\x96\x81" + w);
  v.push_back("s");  // a continuation: "cats" is ▁cat s
  while (static_cast<int64_t>(v.size()) < size) v.push_back("\xe2\x96\x81w" + std::to_string(v.size()));
  return v;
}

// The id of a word-initial piece.
int32_t encoder_id(const std::string& word) {
  for (size_t i = 0; i < kEncoderWords.size(); ++i)
    if (kEncoderWords[i] == word) return static_cast<int32_t>(4 + i);
  return 1;
}

class ServerEncoder : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(
        (fs::temp_directory_path() / ("weft_encoder_" + std::to_string(::getpid()) + ".gguf")).string());
    tensors_ = new bert_reference::RefTensors(bert_reference::make_bert_tensors(shape(), 21, weft::DType::f32));
    bert_reference::write_bert_model(*path_, shape(), *tensors_, [](weft::GgufWriter& w) {
      const std::vector<std::string> vocab = encoder_vocab(shape().vocab);
      std::vector<int32_t> types(vocab.size(), 1);
      for (int i = 0; i < 4; ++i) types[static_cast<size_t>(i)] = 3;  // control tokens
      w.set_string("tokenizer.ggml.model", "bert");
      w.set_array("tokenizer.ggml.tokens", vocab);
      w.set_array("tokenizer.ggml.token_type", types);
      w.set_u32("tokenizer.ggml.padding_token_id", 0);
      w.set_u32("tokenizer.ggml.unknown_token_id", 1);
      w.set_u32("tokenizer.ggml.bos_token_id", 2);
      w.set_u32("tokenizer.ggml.seperator_token_id", 3);
    });
    weft::serve::ServeOptions o;
    o.session.model = *path_;
    o.session.device_options.cpu_threads = 1;
    o.ctx_size = 64;
    o.parallel = 2;
    o.port = 0;
    o.log = false;
    server_ = new weft::serve::Server(o);
    server_->start();
    server_->wait_ready();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete tensors_;
    fs::remove(*path_);
    delete path_;
  }
  static bert_reference::BertShape shape() {
    return bert_reference::BertShape{.vocab = 40, .dim = 64, .layers = 2, .heads = 4, .ff = 96, .pooling = 1};
  }
  // The reference's mean-pooled vector of [CLS] words... [SEP].
  static std::vector<double> reference(const std::vector<std::string>& words) {
    std::vector<int32_t> ids = {2};
    for (const std::string& w : words) ids.push_back(encoder_id(w));
    ids.push_back(3);
    return bert_reference::pool(bert_reference::bert_forward(shape(), *tensors_, ids), 1);
  }
  static double max_diff(const json& got, const std::vector<double>& want) {
    EXPECT_EQ(got.size(), want.size());
    double worst = 0;
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
      worst = std::max(worst, std::abs(got[i].get<double>() - want[i]));
    return worst;
  }

  static std::string* path_;
  static bert_reference::RefTensors* tensors_;
  static weft::serve::Server* server_;
};
std::string* ServerEncoder::path_ = nullptr;
bert_reference::RefTensors* ServerEncoder::tensors_ = nullptr;
weft::serve::Server* ServerEncoder::server_ = nullptr;

// f32 matrices: the f16 cache and f32 sums, about 1e-5 on components ~0.12.
constexpr double kEncoderTol = 1e-3;

TEST_F(ServerEncoder, EmbeddingsAreTheReferencesPooledVector) {
  const json body = {{"input", {"hello world", "the cat sat on the mat a dog ran"}}};
  const serve_test::Response r = request(server_->port(), "POST", "/v1/embeddings", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4 + 11);  // [CLS] and [SEP] around each
  const double d0 = max_diff(j["data"][0]["embedding"], reference({"hello", "world"}));
  const double d1 =
      max_diff(j["data"][1]["embedding"], reference({"the", "cat", "sat", "on", "the", "mat", "a", "dog", "ran"}));
  std::printf("[ encoder ] max |weft - float64| %.2e, %.2e\n", d0, d1);
  EXPECT_LT(d0, kEncoderTol);
  EXPECT_LT(d1, kEncoderTol);

  const serve_test::Response o =
      request(server_->port(), "POST", "/api/embed", json{{"model", "m"}, {"input", "hello world"}}.dump());
  ASSERT_EQ(o.status, 200) << o.body;
  EXPECT_LT(max_diff(json::parse(o.body)["embeddings"][0], reference({"hello", "world"})), kEncoderTol);
}

// An engine feeding prompts 4 tokens a step still gives an encoder's
// 12-token input in one step (in pieces, the first tokens would not see
// the last): the reference's vector; and a generation job is refused.
TEST_F(ServerEncoder, AnInputLongerThanAStepGoesWhole) {
  weft::Session s({.model = *path_});
  s.load(64);
  weft::serve::Engine engine(s, {.slots = 2, .batch_tokens = 4});
  const std::vector<std::string> words = {"the", "cat", "sat", "on", "the", "mat", "a", "dog", "ran", "hello"};
  std::vector<int32_t> ids = {2};
  for (const std::string& w : words) ids.push_back(encoder_id(w));
  ids.push_back(3);
  auto r = engine.submit_embed({.inputs = {ids}, .pooling = weft::serve::Pooling::mean});
  ASSERT_NE(r, nullptr);
  const std::optional<weft::serve::EmbedResult> out = r->wait(std::chrono::seconds(60));
  ASSERT_TRUE(out.has_value());
  ASSERT_EQ(out->error, "");
  const std::vector<double> want = reference(words);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(out->vectors.at(0).at(i) - want[i]));
  EXPECT_LT(worst, kEncoderTol);
  weft::serve::Job job;
  job.prompt = ids;
  job.max_tokens = 2;
  try {
    (void)engine.submit(job);
    ADD_FAILURE() << "a generation job was queued on an encoder";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("encoder"), std::string::npos) << e.what();
  }
}

TEST_F(ServerEncoder, GenerationIsRefusedNamingWhyAndTheServerServesOn) {
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/api/generate", "/api/chat", "/v1/messages"}) {
    json body = {{"model", "m"}, {"max_tokens", 4}, {"prompt", "hello"}};
    body["messages"] = json::array({{{"role", "user"}, {"content", "hello"}}});
    const serve_test::Response r = request(server_->port(), "POST", path, body.dump());
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
    EXPECT_NE(r.body.find("encoder"), std::string::npos) << path << ": " << r.body;
  }
  const serve_test::Response r = request(server_->port(), "POST", "/v1/embeddings", json{{"input", "a cat"}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  // An input longer than a slot's context (64 / 2) is refused by name.
  std::string many;
  for (int i = 0; i < 40; ++i) many += "cat ";
  const serve_test::Response big = request(server_->port(), "POST", "/v1/embeddings", json{{"input", many}}.dump());
  EXPECT_EQ(big.status, 400) << big.body;
}

}  // namespace
