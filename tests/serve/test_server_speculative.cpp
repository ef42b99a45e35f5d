// `weft serve --model-draft` over loopback HTTP with tiny demo models: greedy
// completions with a draft (another model, and the target as its own
// draft) equal those of the same server without one, streamed and not,
// with max_tokens, stop strings and n choices; the draft's counts in the
// timings, /metrics and /v1/pool; logprobs; two concurrent requests; a sampled request's
// length; a grammar request speculating within its grammar, its text the
// plain one; a client leaving
// mid-stream; a draft of another
// vocabulary refused before loading, naming both sizes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/http_client.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/serve/server.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using serve_test::request;
using serve_test::Response;

// A chunked body's data, the chunk-size lines removed.
std::string spec_dechunk(const std::string& body) {
  std::string out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t eol = body.find("\r\n", at);
    if (eol == std::string::npos) break;
    const size_t n = std::stoul(body.substr(at, eol - at), nullptr, 16);
    if (n == 0) break;
    out += body.substr(eol + 2, n);
    at = eol + 2 + n + 2;
  }
  return out;
}

// A stream's events: the JSON of every `data: {...}` line, in order.
std::vector<json> spec_events(const Response& r) {
  std::vector<json> out;
  const std::string data = spec_dechunk(r.body);
  for (size_t at = data.find("data: {"); at != std::string::npos; at = data.find("data: {", at + 1))
    out.push_back(json::parse(data.substr(at + 6, data.find('\n', at) - at - 6)));
  return out;
}

// The token counts of two responses (cached_tokens aside: the reference
// server's cache has its own history).
void spec_same_counts(const json& got, const json& want) {
  for (const char* k : {"prompt_tokens", "completion_tokens", "total_tokens"})
    EXPECT_EQ(got["usage"][k], want["usage"][k]) << k;
}

class ServerSpeculative : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string stem = (fs::temp_directory_path() / ("weft_serve_spec_" + std::to_string(::getpid()))).string();
    target_ = new std::string(stem + "_target.gguf");
    draft_ = new std::string(stem + "_draft.gguf");
    other_ = new std::string(stem + "_other.gguf");
    weft::model::DemoModelSpec t = weft::model::tiny_demo_spec();
    t.n_layer = 3;
    weft::model::write_demo_model(*target_, t);
    weft::model::DemoModelSpec d = weft::model::tiny_demo_spec();  // same vocabulary, other weights
    d.n_layer = 1;
    d.n_embd = 32;
    d.n_head = 2;
    d.n_head_kv = 1;
    d.n_ff = 64;
    d.seed = 7;
    weft::model::write_demo_model(*draft_, d);
    d.n_vocab = 520;
    weft::model::write_demo_model(*other_, d);
    plain_ = start("", 1).release();
  }
  static void TearDownTestSuite() {
    delete plain_;
    for (std::string* p : {target_, draft_, other_}) {
      fs::remove(*p);
      delete p;
    }
  }

  static weft::serve::ServeOptions options(const std::string& draft, int parallel) {
    weft::serve::ServeOptions o;
    o.session.model = *target_;
    o.session.device_options.cpu_threads = 1;
    o.ctx_size = 256 * parallel;
    o.parallel = parallel;
    o.port = 0;
    o.log = false;
    if (!draft.empty()) {
      o.draft.model = draft;
      o.draft.devices = {"cpu:1"};
      o.draft.probe = false;
      o.draft_max = 4;
    }
    return o;
  }
  static std::unique_ptr<weft::serve::Server> start(const std::string& draft, int parallel) {
    auto s = std::make_unique<weft::serve::Server>(options(draft, parallel));
    s->start();
    s->wait_ready();
    return s;
  }
  static json post(const weft::serve::Server& s, const json& body) {
    const Response r = request(s.port(), "POST", "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }
  // A metric's value from /metrics (-1 when absent).
  static double metric(const weft::serve::Server& s, const std::string& name) {
    const std::string text = request(s.port(), "GET", "/metrics").body;
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
  }
  static json greedy(const std::string& prompt, int max_tokens) {
    return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
  }

  static std::string* target_;
  static std::string* draft_;
  static std::string* other_;
  static weft::serve::Server* plain_;  // the same target without a draft: the reference
};
std::string* ServerSpeculative::target_ = nullptr;
std::string* ServerSpeculative::draft_ = nullptr;
std::string* ServerSpeculative::other_ = nullptr;
weft::serve::Server* ServerSpeculative::plain_ = nullptr;

const char* const kSpecPrompts[] = {"Once upon a time", "The quick brown fox jumps over"};

TEST_F(ServerSpeculative, GreedyCompletionsEqualThoseWithoutADraftStreamedOrNot) {
  // Another model as the draft (few proposals kept), and the target itself
  // (every proposal kept: runs of 5 tokens per round).
  for (const std::string* draft : {draft_, target_}) {
    auto s = start(*draft, 1);
    for (const char* prompt : kSpecPrompts) {
      const json want = post(*plain_, greedy(prompt, 24));
      const json got = post(*s, greedy(prompt, 24));
      EXPECT_EQ(got["choices"][0]["text"], want["choices"][0]["text"]) << prompt;
      spec_same_counts(got, want);
      EXPECT_EQ(got["choices"][0]["finish_reason"], "length");
      ASSERT_TRUE(got["timings"].contains("draft_n")) << got.dump();
      EXPECT_GT(got["timings"]["draft_n"].get<int>(), 0);
      if (draft == target_) {
        EXPECT_EQ(got["timings"]["draft_n_accepted"], got["timings"]["draft_n"]);
      }
      EXPECT_FALSE(want["timings"].contains("draft_n"));

      json streamed = greedy(prompt, 24);
      streamed["stream"] = true;
      streamed["stream_options"] = {{"include_usage", true}};
      const Response r = request(s->port(), "POST", "/v1/completions", streamed.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      std::string text;
      json usage;
      for (const json& e : spec_events(r)) {
        if (!e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
        if (e.contains("usage") && !e["usage"].is_null()) usage = e["usage"];
      }
      EXPECT_EQ(text, want["choices"][0]["text"]) << prompt;
      EXPECT_EQ(usage["completion_tokens"], 24);
    }
    EXPECT_GT(metric(*s, "weft_speculative_steps_total"), 0);
    EXPECT_GT(metric(*s, "weft_draft_tokens_total"), 0);
    EXPECT_GE(metric(*s, "weft_draft_accepted_total"), 0);
    const json pool = json::parse(request(s->port(), "GET", "/v1/pool").body)["engine"];
    EXPECT_EQ(pool["draft_tokens"].get<double>(), metric(*s, "weft_draft_tokens_total"));
    EXPECT_EQ(pool["draft_accepted"].get<double>(), metric(*s, "weft_draft_accepted_total"));
  }
  EXPECT_EQ(metric(*plain_, "weft_draft_tokens_total"), 0);
}

TEST_F(ServerSpeculative, StopStringsMaxTokensAndChoicesEndWherePlainDecodingEnds) {
  auto s = start(*target_, 1);  // runs of 5 tokens: a stop string falls inside one
  const std::string full = post(*plain_, greedy(kSpecPrompts[0], 30))["choices"][0]["text"];
  ASSERT_GT(full.size(), 12u) << full;
  const std::string stop = full.substr(full.size() / 2, 3);
  json body = greedy(kSpecPrompts[0], 30);
  body["stop"] = json::array({stop});
  const json want = post(*plain_, body);
  const json got = post(*s, body);
  EXPECT_EQ(got["choices"][0]["text"], want["choices"][0]["text"]);
  EXPECT_EQ(got["choices"][0]["finish_reason"], "stop");
  spec_same_counts(got, want);
  EXPECT_EQ(got["choices"][0]["text"].get<std::string>().find(stop), std::string::npos);
  for (int max_tokens : {1, 2, 6, 7}) {
    const json a = post(*plain_, greedy(kSpecPrompts[1], max_tokens));
    const json b = post(*s, greedy(kSpecPrompts[1], max_tokens));
    EXPECT_EQ(b["choices"][0]["text"], a["choices"][0]["text"]) << max_tokens;
    EXPECT_EQ(b["usage"]["completion_tokens"], max_tokens);
  }
  json two = greedy(kSpecPrompts[1], 12);
  two["n"] = 2;
  const json a = post(*plain_, two);
  const json b = post(*s, two);
  ASSERT_EQ(b["choices"].size(), 2u);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(b["choices"][i]["text"], a["choices"][i]["text"]) << i;
}

TEST_F(ServerSpeculative, LogprobsComeFromTheTargetsRowForEachKeptToken) {
  auto s = start(*target_, 1);  // runs of 5 tokens per round
  json body = greedy(kSpecPrompts[0], 12);
  body["logprobs"] = 2;
  const json want = post(*plain_, body)["choices"][0]["logprobs"];
  const json got = post(*s, body)["choices"][0]["logprobs"];
  EXPECT_EQ(got["tokens"], want["tokens"]);
  ASSERT_EQ(got["token_logprobs"].size(), 12u);
  for (size_t i = 0; i < 12; ++i)  // a row of a step of several tokens: within rounding of a step of one
    EXPECT_NEAR(got["token_logprobs"][i].get<double>(), want["token_logprobs"][i].get<double>(), 1e-3) << i;
}

TEST_F(ServerSpeculative, TwoConcurrentRequestsBothCompleteAsAlone) {
  for (int parallel : {1, 2}) {  // queued one after the other; decoded together
    auto s = start(*draft_, parallel);
    std::vector<json> got(2);
    std::vector<std::thread> clients;
    for (int i = 0; i < 2; ++i) clients.emplace_back([&, i] { got[i] = post(*s, greedy(kSpecPrompts[i], 20)); });
    for (std::thread& c : clients) c.join();
    for (int i = 0; i < 2; ++i)
      EXPECT_EQ(got[i]["choices"][0]["text"], post(*plain_, greedy(kSpecPrompts[i], 20))["choices"][0]["text"])
          << "parallel " << parallel << ", request " << i;
  }
}

TEST_F(ServerSpeculative, ASampledRequestReturnsItsMaxTokens) {
  auto s = start(*draft_, 1);
  json body = {{"prompt", kSpecPrompts[0]}, {"max_tokens", 20}, {"temperature", 0.9}, {"top_k", 40},
               {"seed", 3},               {"ignore_eos", true}};
  const json got = post(*s, body);
  EXPECT_EQ(got["usage"]["completion_tokens"], 20);
  EXPECT_EQ(got["choices"][0]["finish_reason"], "length");
  EXPECT_GT(got["timings"].value("draft_n", 0), 0) << got.dump();
  EXPECT_EQ(post(*s, body)["choices"][0]["text"], got["choices"][0]["text"]);  // the same seed, the same draws
}

TEST_F(ServerSpeculative, AGrammarRequestSpeculatesAndGivesThePlainText) {
  auto s = start(*draft_, 1);
  json body = greedy(kSpecPrompts[0], 12);
  body["grammar"] = R"(root ::= [a-z ]+)";
  const json want = post(*plain_, body);
  const double before = metric(*s, "weft_draft_tokens_total");
  const json got = post(*s, body);
  EXPECT_EQ(got["choices"][0]["text"], want["choices"][0]["text"]);
  EXPECT_GT(got["timings"].value("draft_n", 0), 0) << got.dump();
  EXPECT_GT(metric(*s, "weft_draft_tokens_total"), before);
}

// A hostile grammar (more parse states at once than the matcher follows)
// on a server with a draft: the request gets an error naming the cause,
// in bounded time, and the next request is served as before.
TEST_F(ServerSpeculative, AHostileGrammarIsRefusedAndTheServerKeepsServing) {
  auto s = start(*draft_, 1);
  std::string wide = R"(root ::= "a" "0")";
  for (int i = 1; i < 5000; ++i) wide += R"( | "a" ")" + std::to_string(i) + "\"";
  json body = greedy(kSpecPrompts[0], 12);
  body["grammar"] = wide;
  const auto t0 = std::chrono::steady_clock::now();
  const Response r = request(s->port(), "POST", "/v1/completions", body.dump());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  const bool refused = r.status != 200 || r.body.find("\"error\"") != std::string::npos;
  EXPECT_TRUE(refused) << r.status << " " << r.body;
  EXPECT_NE(r.body.find("ambiguous"), std::string::npos) << r.body;
  const json want = post(*plain_, greedy(kSpecPrompts[1], 12));
  EXPECT_EQ(post(*s, greedy(kSpecPrompts[1], 12))["choices"][0]["text"], want["choices"][0]["text"]);
}

TEST_F(ServerSpeculative, AClientLeavingMidStreamEndsTheRoundsAndTheNextRequestIsRight) {
  weft::serve::ServeOptions o = options(*target_, 1);
  o.ctx_size = 4096;  // a stream of 4000 tokens: in flight when the client leaves
  weft::serve::Server s(std::move(o));
  s.start();
  s.wait_ready();
  {
    serve_test::Socket c(s.port());
    const std::string body = R"({"prompt":"Once upon a time","max_tokens":4000,"ignore_eos":true,"stream":true})";
    c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body);
    std::string got;
    while (got.find("data: ") == std::string::npos) {
      const std::string part = c.read_some();
      ASSERT_FALSE(part.empty()) << "no stream data: " << got;
      got += part;
    }
  }  // closed after the first chunk
  bool cancelled = false;
  for (int i = 0; i < 200 && !cancelled; ++i) {
    cancelled = metric(s, "weft_requests_cancelled_total") == 1 && metric(s, "weft_slots_busy") == 0;
    if (!cancelled) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(cancelled);
  EXPECT_LT(metric(s, "weft_generated_tokens_total"), 4000);
  EXPECT_GT(metric(s, "weft_draft_tokens_total"), 0);
  // The slot's and the draft's caches after the cut rounds serve the next
  // request as a fresh server would.
  const json want = post(*plain_, greedy(kSpecPrompts[1], 16));
  EXPECT_EQ(post(s, greedy(kSpecPrompts[1], 16))["choices"][0]["text"], want["choices"][0]["text"]);
  s.stop();
}

TEST_F(ServerSpeculative, ADraftOfAnotherVocabularyIsRefusedBeforeLoading) {
  weft::serve::Server s(options(*other_, 1));
  s.start();
  try {
    s.wait_ready();
    FAIL() << "a draft of 520 tokens served a target of 600";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    const std::string m = e.what();  // check_same_vocabulary's words, as `weft run` says them
    EXPECT_NE(m.find("the draft model's vocabulary has 520 tokens, the target's 600"), std::string::npos) << m;
  }
  const Response health = request(s.port(), "GET", "/health");
  EXPECT_EQ(health.status, 500);
}

}  // namespace
