// Ollama's and Anthropic's routes of weft::serve::Server over loopback
// HTTP: hostile bodies answered 400 in each API's error shape naming the
// field, the server serving on after them, and the API key taken from
// x-api-key as well as Authorization: Bearer. (The clients' view, streams
// included: tests/serve/compat.test.mjs.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/http_client.h"
#include "weft/model/demo_model.h"
#include "weft/serve/server.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using serve_test::request;
using serve_test::Response;

class ServerCompat : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ =
        new std::string((fs::temp_directory_path() / ("weft_compat_" + std::to_string(::getpid()) + ".gguf")).string());
    weft::model::write_demo_model(*path_, weft::model::tiny_demo_spec());
  }
  static void TearDownTestSuite() {
    fs::remove(*path_);
    delete path_;
  }
  void start(const std::string& key = "") {
    weft::serve::ServeOptions o;
    o.session.model = *path_;
    o.session.device_options.cpu_threads = 1;
    o.ctx_size = 256;
    o.parallel = 1;
    o.port = 0;
    o.log = false;
    o.api_key = key;
    server_ = std::make_unique<weft::serve::Server>(std::move(o));
    server_->start();
    server_->wait_ready();
    port_ = server_->port();
  }
  Response post(const std::string& path, const std::string& body, const std::string& headers = "") {
    return request(port_, "POST", path, body, headers);
  }

  static std::string* path_;
  std::unique_ptr<weft::serve::Server> server_;
  int port_ = 0;
};
std::string* ServerCompat::path_ = nullptr;

// Ollama's error: 400 {"error": "... field ..."}.
void expect_ollama_400(const Response& r, const std::string& names) {
  EXPECT_EQ(r.status, 400) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error") && j["error"].is_string()) << r.body;
  EXPECT_NE(j["error"].get<std::string>().find(names), std::string::npos) << r.body;
}

// Anthropic's error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"... field ..."}}.
void expect_anthropic_400(const Response& r, const std::string& names) {
  EXPECT_EQ(r.status, 400) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.value("type", "") == "error" && j["error"].is_object()) << r.body;
  EXPECT_EQ(j["error"]["type"], "invalid_request_error") << r.body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(names), std::string::npos) << r.body;
}

TEST_F(ServerCompat, HostileBodiesAre400sNamingTheField) {
  start();
  const std::string user = R"("messages":[{"role":"user","content":"hi"}])";
  expect_ollama_400(post("/api/chat", "{" + user + R"(,"options":{"temperature":"hot"}})"), "options.temperature");
  expect_ollama_400(post("/api/chat", "{" + user + R"(,"options":{"top_p":1e308}})"), "options.top_p");
  expect_ollama_400(post("/api/chat", "{" + user + R"(,"options":{"num_predict":99999999999999999999}})"),
                    "options.num_predict");
  expect_ollama_400(post("/api/chat", "{" + user + R"(,"options":{"seed":"x"}})"), "options.seed");
  expect_ollama_400(post("/api/chat", "{" + user + R"(,"options":"fast"})"), "options");
  expect_ollama_400(post("/api/chat", R"({"messages":[{"role":"user","content":{"text":"hi"}}]})"),
                    "messages[0].content");
  expect_ollama_400(post("/api/chat", R"({"messages":"hi"})"), "messages");
  expect_ollama_400(post("/api/chat", "[1,2,3]"), "JSON object");
  expect_ollama_400(post("/api/chat", "{\"messages\": ["), "not valid JSON");
  expect_ollama_400(post("/api/chat", std::string(100, '[') + std::string(100, ']')), "nested deeper");
  expect_ollama_400(post("/api/generate", R"({"prompt":12})"), "prompt");
  expect_ollama_400(post("/api/generate", R"({"prompt":"x","raw":"yes"})"), "raw");
  expect_ollama_400(post("/api/generate", R"({"prompt":")" + std::string(4000, 'z') + R"(","raw":true})"),
                    "do not fit the context");
  expect_ollama_400(post("/api/show", R"({"model":5})"), "model");

  expect_anthropic_400(post("/v1/messages", "{" + user + "}"), "'max_tokens' is required");
  expect_anthropic_400(post("/v1/messages", R"({"max_tokens":1e300,)" + user + "}"), "max_tokens");
  expect_anthropic_400(post("/v1/messages", R"({"max_tokens":-1,)" + user + "}"), "max_tokens");
  expect_anthropic_400(post("/v1/messages", R"({"max_tokens":4,"top_k":true,)" + user + "}"), "top_k");
  expect_anthropic_400(post("/v1/messages", R"({"max_tokens":4,"stop_sequences":[null],)" + user + "}"),
                       "stop_sequences");
  expect_anthropic_400(
      post("/v1/messages", R"({"max_tokens":4,"messages":[{"role":"user","content":[{"text":"x"}]}]})"),
      "messages[0].content[0]");
  expect_anthropic_400(post("/v1/messages", R"({"max_tokens":4})"), "messages");
  expect_anthropic_400(post("/v1/messages", "{\"max_tokens\": "), "not valid JSON");

  // Still serving, on every API.
  const Response ok = post("/api/chat", "{" + user + R"(,"stream":false,"options":{"num_predict":3}})");
  ASSERT_EQ(ok.status, 200) << ok.body;
  const json o = json::parse(ok.body);
  EXPECT_EQ(o["done"], true);
  EXPECT_EQ(o["message"]["role"], "assistant");
  EXPECT_LE(o["eval_count"].get<int>(), 3);
  const Response msg = post("/v1/messages", R"({"max_tokens":3,)" + user + "}");
  ASSERT_EQ(msg.status, 200) << msg.body;
  EXPECT_EQ(json::parse(msg.body)["type"], "message");
  EXPECT_EQ(request(port_, "GET", "/api/version").status, 200);
  // Embeddings: hostile bodies answered 400 in each API's shape naming the
  // field, then served (tests/serve/test_embeddings.cpp checks the values).
  expect_ollama_400(post("/api/embed", R"({"input":7})"), "'input' must be a string");
  expect_ollama_400(post("/api/embed", R"({"input":[""]})"), "'input[0]' is an empty string");
  expect_ollama_400(post("/api/embed", R"({"input":"x","truncate":1})"), "'truncate'");
  expect_ollama_400(post("/api/embed", R"({"input":"x","dimensions":1e300})"), "'dimensions'");
  const Response bad = post("/v1/embeddings", R"({"input":[[1,-1]]})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(json::parse(bad.body)["error"]["param"], "input") << bad.body;
  const Response embed = post("/api/embed", R"({"input":["x","y"]})");
  ASSERT_EQ(embed.status, 200) << embed.body;
  const json e = json::parse(embed.body);
  ASSERT_EQ(e["embeddings"].size(), 2u);
  double norm = 0;
  for (const json& v : e["embeddings"][0]) norm += v.get<double>() * v.get<double>();
  EXPECT_NEAR(norm, 1.0, 1e-5);
  const Response oa = post("/v1/embeddings", R"({"input":"x","encoding_format":"base64"})");
  ASSERT_EQ(oa.status, 200) << oa.body;
  EXPECT_TRUE(json::parse(oa.body)["data"][0]["embedding"].is_string()) << oa.body;
}

TEST_F(ServerCompat, KeyFromXApiKeyOrBearer) {
  start("s3cret-key");
  const std::string body = R"({"max_tokens":2,"messages":[{"role":"user","content":"hi"}]})";
  EXPECT_EQ(post("/v1/messages", body, "x-api-key: s3cret-key\r\n").status, 200);
  EXPECT_EQ(post("/v1/messages", body, "Authorization: Bearer s3cret-key\r\n").status, 200);
  const Response wrong = post("/v1/messages", body, "x-api-key: s3cret-kez\r\n");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(json::parse(wrong.body)["error"]["type"], "authentication_error") << wrong.body;
  EXPECT_EQ(post("/v1/messages", body, "x-api-key: s3cret-ke\r\n").status, 401);
  const Response none = request(port_, "GET", "/api/tags");
  EXPECT_EQ(none.status, 401);
  EXPECT_TRUE(json::parse(none.body)["error"].is_string()) << none.body;  // Ollama's shape
  EXPECT_EQ(request(port_, "GET", "/api/tags", "", "x-api-key: s3cret-key\r\n").status, 200);
  // OpenAI's routes take x-api-key too, and keep their own error shape.
  EXPECT_EQ(request(port_, "GET", "/v1/models", "", "x-api-key: s3cret-key\r\n").status, 200);
  EXPECT_TRUE(json::parse(request(port_, "GET", "/v1/models").body)["error"].is_object());
}

}  // namespace
