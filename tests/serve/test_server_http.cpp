// weft::serve::Server over loopback HTTP: the endpoints' shapes, hostile
// requests (malformed, nested, oversized, invalid UTF-8, slow), a client
// that leaves mid-stream, the queue bound, and the API key.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "rpc/local_workers.h"
#include "serve/http_client.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/serve/server.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using serve_test::request;
using serve_test::Response;
using serve_test::Socket;

class ServerHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string((fs::temp_directory_path() / ("weft_http_" + std::to_string(::getpid()) + ".gguf")).string());
    weft::model::write_demo_model(*path_, weft::model::tiny_demo_spec());
  }
  static void TearDownTestSuite() {
    fs::remove(*path_);
    delete path_;
  }

  static weft::serve::ServeOptions options() {
    weft::serve::ServeOptions o;
    o.session.model = *path_;
    o.session.device_options.cpu_threads = 1;
    o.ctx_size = 256;
    o.parallel = 2;
    o.port = 0;
    o.log = false;
    return o;
  }

  void start(weft::serve::ServeOptions o) {
    server_ = std::make_unique<weft::serve::Server>(std::move(o));
    server_->start();
    server_->wait_ready();
    port_ = server_->port();
  }

  // A metric's value from /metrics (-1 when absent).
  double metric(const std::string& name) {
    const std::string text = request(port_, "GET", "/metrics").body;
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
  }

  // Polls until pred holds or 10 s pass.
  template <class P>
  bool eventually(P pred) {
    for (int i = 0; i < 200; ++i) {
      if (pred()) return true;
      std::this_thread::sleep_for(50ms);
    }
    return pred();
  }

  static json error_of(const Response& r) {
    const json j = json::parse(r.body);
    EXPECT_TRUE(j.contains("error")) << r.body;
    EXPECT_TRUE(j["error"].contains("message") && j["error"]["message"].is_string()) << r.body;
    EXPECT_TRUE(j["error"].contains("type")) << r.body;
    return j["error"];
  }

  static std::string* path_;
  std::unique_ptr<weft::serve::Server> server_;
  int port_ = 0;
};
std::string* ServerHttp::path_ = nullptr;

const char* kChat = R"({"messages":[{"role":"user","content":"Hello there"}],"max_tokens":6,"temperature":0})";

TEST_F(ServerHttp, AnswersTheEndpointsInOpenAIShapes) {
  start(options());
  Response h = request(port_, "GET", "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(json::parse(h.body)["status"], "ok");
  Response m = request(port_, "GET", "/v1/models");
  EXPECT_EQ(json::parse(m.body)["data"][0]["object"], "model");

  Response c = request(port_, "POST", "/v1/chat/completions", kChat);
  ASSERT_EQ(c.status, 200) << c.body;
  const json j = json::parse(c.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_LE(j["usage"]["completion_tokens"].get<int>(), 6);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());

  Response t = request(port_, "POST", "/tokenize", R"({"content":"Once upon a time"})");
  ASSERT_EQ(t.status, 200);
  const json tokens = json::parse(t.body)["tokens"];
  EXPECT_FALSE(tokens.empty());
  Response d = request(port_, "POST", "/detokenize", json{{"tokens", tokens}}.dump());
  EXPECT_EQ(json::parse(d.body)["content"], "Once upon a time");

  Response none = request(port_, "GET", "/v1/nothing");
  EXPECT_EQ(none.status, 404);
  error_of(none);
  EXPECT_NE(request(port_, "GET", "/metrics").body.find("weft_generated_tokens_total"), std::string::npos);
  EXPECT_NE(request(port_, "GET", "/").body.find("<html"), std::string::npos);
}

TEST_F(ServerHttp, HostileRequestsGetErrorsAndTheServerKeepsServing) {
  auto o = options();
  o.max_body_bytes = 1 << 20;
  start(o);
  struct Case {
    std::string body;
    int status;
    std::string words;
  };
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::vector<Case> cases{
      {"{not json", 400, "not valid JSON"},
      {"[1,2,3]", 400, "JSON object"},
      {deep, 400, "nested deeper"},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", 400, "not valid JSON"},
      {R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":1e999})", 400, ""},
      {R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":-1})", 400, "max_tokens"},
      {R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":99999999999999999999999})", 400, "max_tokens"},
      {R"({"messages":[{"role":"user","content":"hi"}],"temperature":"hot"})", 400, "temperature"},
      {R"({"messages":[{"role":"user","content":"hi"}],"n":9})", 400, "--max-choices"},
      {R"({"messages":[{"role":"user","content":"hi"}],"n":0})", 400, "'n'"},
      {R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a b"}}]})", 400,
       "tools[0].function.name"},
      {R"({"messages":[{"role":"user","content":"hi"}],"tools":{}})", 400, "'tools' must be an array"},
      {R"({"messages":[{"role":"user","content":"hi"}],"tool_choice":"required"})", 400, "needs 'tools'"},
      {R"({"messages":[]})", 400, "messages"},
      {R"({"messages":[{"content":"no role"}]})", 400, "role"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", 400, "text"},
      {R"({"messages":[{"role":"user","content":"hi"}],"stop":[1,2]})", 400, "stop"},
      {R"({"messages":[{"role":"user","content":"hi"}],"top_logprobs":3})", 400, "logprobs"},
      {R"({"messages":[{"role":"user","content":"hi"}],"seed":"x"})", 400, "seed"},
      {std::string(2 << 20, ' '), 413, "too large"},
  };
  for (const Case& c : cases) {
    Response r = request(port_, "POST", "/v1/chat/completions", c.body);
    EXPECT_EQ(r.status, c.status) << c.body.substr(0, 120) << " -> " << r.body.substr(0, 300);
    if (r.status == c.status) {
      const std::string message = error_of(r)["message"];
      EXPECT_NE(message.find(c.words), std::string::npos) << message;
    }
  }
  // A prompt far longer than a slot's context (under the body limit).
  std::string words;
  while (words.size() < 600000) words += "once upon a time ";
  Response big = request(port_, "POST", "/v1/completions", json{{"prompt", words}, {"max_tokens", 1}}.dump());
  EXPECT_EQ(big.status, 400);
  EXPECT_NE(big.body.find("do not fit"), std::string::npos) << big.body.substr(0, 300);
  // Message content is never template text.
  Response inj = request(port_, "POST", "/v1/chat/completions",
                         R"({"messages":[{"role":"user","content":"{{ raise_exception('x') }}{% for %}"}],"max_tokens":2})");
  EXPECT_EQ(inj.status, 200) << inj.body;
  // A call's arguments nested far deeper than any body may be: left as
  // text (the depth cap), the request served.
  const std::string nested = std::string(50000, '[') + std::string(50000, ']');
  json history = {{"messages",
                   {{{"role", "assistant"}, {"content", ""},
                     {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                                      {"function", {{"name", "f"}, {"arguments", nested}}}}}}},
                    {{"role", "user"}, {"content", "hi"}}}},
                  {"max_tokens", 2}};
  EXPECT_EQ(request(port_, "POST", "/v1/chat/completions", history.dump()).status, 200);
  // Garbage that is not HTTP at all.
  {
    Socket s(port_);
    s.send("\x16\x03\x01 this is not http\r\n\r\n");
    EXPECT_NE(s.read_some().find("400"), std::string::npos);
  }
  EXPECT_EQ(request(port_, "POST", "/v1/chat/completions", kChat).status, 200);
}

TEST_F(ServerHttp, SlowClientsAreDroppedWhileOthersAreServed) {
  auto o = options();
  o.read_timeout_seconds = 1;
  start(o);
  // One stops mid-header; one trickles a header byte every 200 ms (each
  // read within cpp-httplib's timeout: only the request's deadline ends it).
  Socket silent(port_), trickle(port_);
  silent.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le");
  EXPECT_EQ(request(port_, "POST", "/v1/chat/completions", kChat).status, 200);
  // Bounded by bytes, not by the clock: the request's deadline (the 1 s
  // read timeout, checked every quarter second) passes within 20 trickled
  // bytes (4 s at 200 ms a byte; about 7 are sent); a client slowed by a
  // loaded machine only stretches its pauses, so it trickles fewer.
  const std::string header = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(100, 'a');
  bool dropped = false;
  size_t sent = 0;
  for (; sent < header.size() && !dropped; ++sent) {
    dropped = !trickle.send(header.substr(sent, 1));
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_TRUE(dropped) << "a client trickling its request was served for " << sent << " bytes";
  EXPECT_LT(sent, 20u) << "the trickling client was dropped only after " << sent << " bytes";
  const std::string answer = silent.read_all();  // closed: nothing, or a 400
  EXPECT_TRUE(answer.empty() || answer.find(" 400 ") != std::string::npos) << answer;
  EXPECT_EQ(request(port_, "POST", "/v1/chat/completions", kChat).status, 200);
}

TEST_F(ServerHttp, BodiesWithoutABoundAreRefused) {
  start(options());
  auto raw = [&](const std::string& text) {
    Socket s(port_);
    s.send(text);
    return serve_test::parse_response(s.read_all());
  };
  // Chunked (cpp-httplib would not bound it), no length, compressed.
  Response chunked = raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(chunked.status, 411);
  Response no_length = raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n{}");
  EXPECT_EQ(no_length.status, 411);
  Response gzip = raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Encoding: gzip\r\n"
                      "Content-Length: 4\r\n\r\nabcd");
  EXPECT_EQ(gzip.status, 415);
  // Made-up paths are counted together, not one label each.
  for (int i = 0; i < 5; ++i) request(port_, "GET", "/made-up-" + std::to_string(i));
  const std::string m = request(port_, "GET", "/metrics").body;
  EXPECT_EQ(m.find("made-up"), std::string::npos);
  EXPECT_NE(m.find("path=\"other\",status=\"404\"} 5"), std::string::npos) << m;
}

// A stream long enough to be in flight when the test acts: 4000 tokens.
weft::serve::ServeOptions long_streams(weft::serve::ServeOptions o) {
  o.ctx_size = 4096;
  o.parallel = 1;
  return o;
}
const char* kLongStream = R"({"prompt":"Once upon a time","max_tokens":4000,"ignore_eos":true,"stream":true})";

// Sends a POST of body to /v1/completions on s, without reading the answer.
void send_completion(Socket& s, const std::string& body) {
  s.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body);
}

// Starts kLongStream on s and reads until its first data event has come:
// what was read (headers included), which holds "data: " unless the server
// closed first (a test failure here).
std::string start_long_stream(Socket& s) {
  send_completion(s, kLongStream);
  std::string got;
  while (got.find("data: ") == std::string::npos) {
    const std::string part = s.read_some();
    if (part.empty()) {
      ADD_FAILURE() << "no stream data: " << got;
      break;
    }
    got += part;
  }
  return got;
}

TEST_F(ServerHttp, ClientLeavingMidStreamFreesItsSlot) {
  start(long_streams(options()));
  {
    Socket s(port_);
    ASSERT_NE(start_long_stream(s).find("data: "), std::string::npos);
  }  // closed after the first chunk
  EXPECT_TRUE(eventually([&] { return metric("weft_requests_cancelled_total") == 1; }));
  EXPECT_TRUE(eventually([&] { return metric("weft_slots_busy") == 0; }));
  EXPECT_LT(metric("weft_generated_tokens_total"), 4000);
  // A whole (non-streamed) request's client leaving is seen too, though
  // nothing is written to it until the end.
  {
    Socket s(port_);
    send_completion(s, R"({"prompt":"Once upon a time","max_tokens":4000,"ignore_eos":true})");
    ASSERT_TRUE(eventually([&] { return metric("weft_slots_busy") == 1; }));
  }
  EXPECT_TRUE(eventually([&] { return metric("weft_requests_cancelled_total") == 2; }));
  EXPECT_TRUE(eventually([&] { return metric("weft_slots_busy") == 0; }));
  EXPECT_LT(metric("weft_generated_tokens_total"), 8000);
}

// The request's --timeout runs from its arrival: a chat template that would
// render for years is stopped at it, and the server answers and keeps serving.
TEST_F(ServerHttp, ChatTemplateRenderingCountsAgainstTheTimeout) {
  auto o = options();
  o.chat_template = "{% macro f(n) %}{{ f(n - 1) ~ f(n - 1) if n > 0 else '' }}{% endmacro %}{{ f(40) }}";
  o.request_timeout_seconds = 0.05;  // far less than its step budget takes
  start(o);
  Response r = request(port_, "POST", "/v1/chat/completions", kChat);
  EXPECT_EQ(r.status, 503) << r.body;
  const std::string message = error_of(r)["message"];
  EXPECT_NE(message.find("did not finish rendering within the request's timeout"), std::string::npos) << message;
  EXPECT_EQ(request(port_, "GET", "/health").status, 200);
}

// docs/serve.md: a request still generating at --timeout ends as `length`
// (what it has so far, as a whole reply), and the server goes on.
TEST_F(ServerHttp, ARequestPastItsTimeoutEndsAsLength) {
  auto o = long_streams(options());
  o.request_timeout_seconds = 0.3;
  start(o);
  const Response r =
      request(port_, "POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":4000,"ignore_eos":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length") << r.body;
  const int completion = j["usage"]["completion_tokens"];
  EXPECT_GT(completion, 0);
  EXPECT_LT(completion, 4000) << "the timeout did not end it";
  EXPECT_EQ(metric("weft_requests_cancelled_total"), 1);  // counted as ended early
  EXPECT_EQ(request(port_, "POST", "/v1/chat/completions", kChat).status, 200);
}

// The same over a stream: its last chunk says `length` (not an error
// event), then [DONE], the connection kept.
TEST_F(ServerHttp, AStreamPastItsTimeoutEndsAsLength) {
  auto o = long_streams(options());
  o.request_timeout_seconds = 0.3;
  start(o);
  Socket s(port_);
  std::string got = start_long_stream(s);
  while (got.find("data: [DONE]") == std::string::npos) {
    const std::string part = s.read_some();
    if (part.empty()) break;
    got += part;
  }
  const std::string tail = got.substr(got.size() > 2000 ? got.size() - 2000 : 0);
  const size_t length_at = got.find("\"finish_reason\":\"length\"");
  ASSERT_NE(length_at, std::string::npos) << tail;
  EXPECT_EQ(got.find("\"finish_reason\":\"length\"", length_at + 1), std::string::npos) << "two ends: " << tail;
  EXPECT_NE(got.find("data: [DONE]", length_at), std::string::npos) << tail;
  EXPECT_EQ(got.find("{\"error\""), std::string::npos) << tail;
  // Ended early: far fewer than 4000 token chunks came.
  size_t chunks = 0;
  for (size_t at = got.find("data: {"); at != std::string::npos; at = got.find("data: {", at + 1)) ++chunks;
  EXPECT_LT(chunks, 4000u) << "the timeout did not end it";
  EXPECT_EQ(metric("weft_requests_cancelled_total"), 1);
  EXPECT_EQ(request(port_, "GET", "/health").status, 200);
}

// docs/serve.md: a stream whose generation fails after it began (a worker
// died) ends with a `data: {"error": ...}` event naming the failure, then
// [DONE], and no chunk carries a finish_reason a client would take for a
// whole reply. The server answers /health after.
TEST_F(ServerHttp, AStreamThatFailsEndsWithAnErrorEvent) {
  weft::testing::LocalWorkers workers(1);
  auto o = long_streams(options());
  o.session.devices = {"cpu:1", "rpc://" + workers.endpoint(0)};
  o.session.split = "1,1";
  start(o);
  Socket s(port_);
  std::string got = start_long_stream(s);
  ASSERT_NE(got.find("data: "), std::string::npos);
  const std::string dead = workers.endpoint(0);
  workers.worker(0).stop();
  while (got.find("data: [DONE]") == std::string::npos) {  // the connection stays open after it
    const std::string part = s.read_some();
    if (part.empty()) break;
    got += part;
  }
  const size_t error_at = got.find("data: {\"error\"");
  ASSERT_NE(error_at, std::string::npos) << got.substr(got.size() > 2000 ? got.size() - 2000 : 0);
  const std::string tail = got.substr(error_at);
  EXPECT_NE(tail.find("generation failed"), std::string::npos) << tail;
  EXPECT_NE(tail.find(dead), std::string::npos) << tail;
  EXPECT_NE(tail.find("data: [DONE]"), std::string::npos) << tail;
  EXPECT_EQ(got.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_EQ(got.find("\"finish_reason\":\"stop\""), std::string::npos);
  EXPECT_EQ(request(port_, "GET", "/health").status, 200);
}

TEST_F(ServerHttp, FullQueueAnswers429WithRetryAfter) {
  auto o = long_streams(options());
  o.max_queue = 0;
  start(o);
  Socket s(port_);
  ASSERT_NE(start_long_stream(s).find("200"), std::string::npos);
  Response r = request(port_, "POST", "/v1/chat/completions", kChat);
  EXPECT_EQ(r.status, 429);
  EXPECT_NE(r.head.find("Retry-After: 1"), std::string::npos) << r.head;
  EXPECT_EQ(error_of(r)["code"], "rate_limit_exceeded");
  EXPECT_EQ(metric("weft_requests_rejected_total"), 1);
  s.close();  // the slot frees (a request may still meet 429 until it has)
  EXPECT_TRUE(eventually([&] { return request(port_, "POST", "/v1/chat/completions", kChat).status == 200; }));
}

TEST_F(ServerHttp, ApiKeyIsRequiredAndComparedExactly) {
  auto o = options();
  o.api_key = "s3cret-key";
  start(o);
  EXPECT_EQ(request(port_, "GET", "/health").status, 200);
  Response none = request(port_, "POST", "/v1/chat/completions", kChat);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(error_of(none)["type"], "authentication_error");
  EXPECT_EQ(request(port_, "GET", "/v1/models", "", "Authorization: Bearer s3cret-ke\r\n").status, 401);
  EXPECT_EQ(request(port_, "GET", "/v1/models", "", "Authorization: Bearer s3cret-key2\r\n").status, 401);
  EXPECT_EQ(request(port_, "GET", "/metrics", "", "Authorization: s3cret-key\r\n").status, 401);
  EXPECT_EQ(request(port_, "GET", "/v1/models", "", "Authorization: Bearer s3cret-key\r\n").status, 200);
  EXPECT_EQ(request(port_, "POST", "/v1/chat/completions", kChat, "Authorization: Bearer s3cret-key\r\n").status, 200);
}

TEST(ServeOptions, NonLoopbackNeedsAKeyOrInsecure) {
  weft::serve::ServeOptions o;
  o.session.model = "unused.gguf";
  o.host = "0.0.0.0";
  try {
    weft::serve::Server s(o);
    ADD_FAILURE() << "accepted 0.0.0.0 without a key";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--api-key-file"), std::string::npos) << e.what();
  }
  o.insecure = true;
  EXPECT_NO_THROW(weft::serve::Server{o});
  o.insecure = false;
  o.api_key = "k";
  EXPECT_NO_THROW(weft::serve::Server{o});
  // A key the HTTP layer would percent-decode (or a client escape) could never
  // match as sent: refused whoever sets it, not only `weft serve`.
  o.api_key = "Aa0-_.~+/=";
  EXPECT_NO_THROW(weft::serve::Server{o});
  for (const std::string bad : {"50%off", "with space", "tab\t", "quote\"", "caf\xc3\xa9"}) {
    o.api_key = bad;
    try {
      weft::serve::Server s(o);
      ADD_FAILURE() << "accepted the API key " << bad;
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      EXPECT_NE(std::string(e.what()).find("API key"), std::string::npos) << e.what();
    }
  }
  o.api_key = "k";
  EXPECT_TRUE(weft::serve::is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(weft::serve::is_loopback_host("127.3.2.1"));
  EXPECT_TRUE(weft::serve::is_loopback_host("::1"));
  EXPECT_TRUE(weft::serve::is_loopback_host("localhost"));
  EXPECT_FALSE(weft::serve::is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(weft::serve::is_loopback_host("192.168.1.2"));
  EXPECT_FALSE(weft::serve::is_loopback_host("128.0.0.1"));
}

TEST(ServeOptions, LoadFailureIsReportedNotFatal) {
  weft::serve::ServeOptions o;
  o.session.model = "/nonexistent/model.gguf";
  o.port = 0;
  o.log = false;
  weft::serve::Server s(o);
  s.start();
  EXPECT_THROW(s.wait_ready(), weft::Error);
  Response h = request(s.port(), "GET", "/health");
  EXPECT_EQ(h.status, 500);
  EXPECT_NE(h.body.find("model.gguf"), std::string::npos) << h.body;
  EXPECT_EQ(request(s.port(), "POST", "/v1/chat/completions", kChat).status, 500);
}

}  // namespace
