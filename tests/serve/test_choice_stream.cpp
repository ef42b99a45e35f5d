// Streamed choices (src/serve/choice_stream.h) against the whole response
// (full_response): a reply cut into pieces anywhere streams as OpenAI's
// deltas that add up -- as the openai client adds them -- to the whole
// reply's message, tool calls included; and n choices in one response.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "serve/choice_stream.h"
#include "serve/openai_api.h"
#include "weft/gguf/gguf.h"
#include "weft/model/demo_model.h"
#include "weft/model/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using weft::serve::ChoiceStream;
using weft::serve::Collected;
using weft::serve::CompletionRequest;
using weft::serve::Event;
using weft::serve::Json;
using weft::serve::ResponseMeta;
using weft::serve::ToolFamily;

class ChoiceStreamTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = (fs::temp_directory_path() / ("weft_cs_" + std::to_string(::getpid()) + ".gguf")).string();
    weft::model::write_demo_model(path, weft::model::tiny_demo_spec());
    tok_ = weft::model::Tokenizer::from_gguf(*weft::GgufFile::open(path)).release();
    fs::remove(path);
  }
  static void TearDownTestSuite() { delete tok_; }

  static CompletionRequest chat_with_tools() {
    CompletionRequest r;
    r.chat = true;
    r.tools.parse = true;
    r.tools.names = {"get_weather", "get_time"};
    r.tool_family = ToolFamily::hermes;
    return r;
  }
  static Event piece(std::string text) {
    Event e;
    e.text = std::move(text);
    return e;
  }
  static Event end(std::string text, std::string reason) {
    Event e = piece(std::move(text));
    e.finished = true;
    e.finish_reason = std::move(reason);
    e.prompt_tokens = 10;
    e.completion_tokens = 7;
    return e;
  }

  // The message the openai client assembles from a stream's deltas:
  // content concatenated, tool calls by index (id, type and name as first
  // given, arguments concatenated), and the finish_reason.
  struct Assembled {
    std::string content;
    Json tool_calls = Json::array();
    std::string finish;
    int roles = 0, finishes = 0;
  };
  static Assembled assemble(const std::vector<Json>& chunks) {
    Assembled a;
    for (const Json& c : chunks) {
      EXPECT_EQ(c["object"], "chat.completion.chunk");
      const Json& ch = c["choices"][0];
      const Json& d = ch["delta"];
      if (d.contains("role")) ++a.roles;
      if (d.contains("content")) a.content += d["content"].get<std::string>();
      if (d.contains("tool_calls"))
        for (const Json& t : d["tool_calls"]) {
          const size_t i = t["index"].get<size_t>();
          if (i == a.tool_calls.size()) {
            EXPECT_TRUE(t.contains("id") && t.contains("type") && t["function"].contains("name")) << t.dump();
            a.tool_calls.push_back({{"id", t["id"]}, {"type", t["type"]},
                                    {"function", {{"name", t["function"]["name"]}, {"arguments", ""}}}});
          }
          EXPECT_LT(i, a.tool_calls.size());
          if (t.contains("function") && t["function"].contains("arguments"))
            a.tool_calls[i]["function"]["arguments"] =
                a.tool_calls[i]["function"]["arguments"].get<std::string>() + t["function"]["arguments"].get<std::string>();
        }
      if (!ch["finish_reason"].is_null()) {
        a.finish = ch["finish_reason"];
        ++a.finishes;
      }
    }
    return a;
  }
  // text streamed as three pieces cut at i and j, the last one finishing.
  static Assembled stream(const CompletionRequest& r, const std::string& text, size_t i, size_t j,
                          const std::string& reason) {
    ChoiceStream s(r, 0);
    std::vector<Json> chunks;
    for (const Event& e : {piece(text.substr(0, i)), piece(text.substr(i, j - i)), end(text.substr(j), reason)})
      for (Json& c : s.chunks(e, meta_, *tok_)) chunks.push_back(std::move(c));
    EXPECT_FALSE(chunks.empty());
    return assemble(chunks);
  }
  static Json whole(const CompletionRequest& r, const std::string& text, const std::string& reason) {
    Collected c;
    c.add(end(text, reason));
    return weft::serve::full_response(r, meta_, {c}, *tok_)["choices"][0];
  }

  static inline weft::model::Tokenizer* tok_ = nullptr;
  static inline const ResponseMeta meta_{"chatcmpl-x", 1, "m"};
};

// Without ids (random on each parse): name and arguments per call.
Json without_ids(Json calls) {
  for (Json& c : calls) {
    EXPECT_EQ(c["id"].get<std::string>().rfind("call_", 0), 0u);
    c.erase("id");
  }
  return calls;
}

TEST_F(ChoiceStreamTest, ToolCallsStreamedCutAnywhereEqualTheWholeReply) {
  const CompletionRequest r = chat_with_tools();
  const std::string text = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                           "</tool_call>\n<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>";
  const Json w = whole(r, text, "stop");
  ASSERT_EQ(w["finish_reason"], "tool_calls");
  EXPECT_EQ(w["message"]["content"], "Let me look.\n");
  ASSERT_EQ(w["message"]["tool_calls"].size(), 2u);
  EXPECT_EQ(w["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Paris\"}");
  EXPECT_EQ(w["message"]["tool_calls"][1]["type"], "function");
  for (size_t i = 0; i <= text.size(); i += 3)
    for (size_t j = i; j <= text.size(); j += 5) {
      const Assembled a = stream(r, text, i, j, "stop");
      ASSERT_EQ(a.content, "Let me look.\n") << i << "," << j;
      ASSERT_EQ(without_ids(a.tool_calls), without_ids(w["message"]["tool_calls"])) << i << "," << j;
      ASSERT_EQ(a.finish, "tool_calls");
      ASSERT_EQ(a.roles, 1);
      ASSERT_EQ(a.finishes, 1);
    }
}

TEST_F(ChoiceStreamTest, TextBeforeACallIsNotHeldBack) {
  const CompletionRequest r = chat_with_tools();
  ChoiceStream s(r, 0);
  const std::vector<Json> first = s.chunks(piece("Hello <tool"), meta_, *tok_);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["choices"][0]["delta"]["content"], "Hello ");  // "<tool" may begin a call
  EXPECT_EQ(first[0]["choices"][0]["delta"]["role"], "assistant");
  const std::vector<Json> second = s.chunks(piece("s are handy"), meta_, *tok_);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0]["choices"][0]["delta"]["content"], "<tools are handy");
}

TEST_F(ChoiceStreamTest, RepliesThatDoNotParseStreamAsText) {
  const CompletionRequest r = chat_with_tools();
  const std::string broken = "Here: <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": ";
  const std::string valid = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>";
  for (const auto& [text, reason] : std::vector<std::pair<std::string, std::string>>{
           {broken, "stop"}, {valid, "length"}, {"<tool_call>{\"name\": \"unknown\", \"arguments\": {}}", "stop"}}) {
    const Json w = whole(r, text, reason);
    EXPECT_EQ(w["message"]["content"], text);
    EXPECT_FALSE(w["message"].contains("tool_calls"));
    EXPECT_EQ(w["finish_reason"], reason);
    for (size_t i = 0; i <= text.size(); i += 7) {
      const Assembled a = stream(r, text, i, i + (text.size() - i) / 2, reason);
      ASSERT_EQ(a.content, text) << i;
      ASSERT_TRUE(a.tool_calls.empty());
      ASSERT_EQ(a.finish, reason);
    }
  }
}

TEST_F(ChoiceStreamTest, WithoutToolsEveryPieceGoesOutAsItCame) {
  CompletionRequest r = chat_with_tools();
  r.tools.parse = false;
  const std::string text = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>";
  const Json w = whole(r, text, "stop");
  EXPECT_EQ(w["message"]["content"], text);
  EXPECT_EQ(w["finish_reason"], "stop");
  ChoiceStream s(r, 3);
  const std::vector<Json> c = s.chunks(piece("<tool_call>"), meta_, *tok_);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["choices"][0]["delta"]["content"], "<tool_call>");
  EXPECT_EQ(c[0]["choices"][0]["index"], 3);
}

TEST_F(ChoiceStreamTest, NChoicesInOneResponse) {
  CompletionRequest r;
  r.n = 3;
  std::vector<Collected> cs(3);
  for (int i = 0; i < 3; ++i) {
    Event e = end("text " + std::to_string(i), i == 2 ? "length" : "stop");
    e.completion_tokens = 4 + i;
    cs[static_cast<size_t>(i)].add(e);
  }
  const Json out = weft::serve::full_response(r, meta_, cs, *tok_);
  ASSERT_EQ(out["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out["choices"][i]["index"], i);
    EXPECT_EQ(out["choices"][i]["text"], "text " + std::to_string(i));
  }
  EXPECT_EQ(out["choices"][2]["finish_reason"], "length");
  // The prompt once, every choice's completion.
  EXPECT_EQ(out["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(out["usage"]["completion_tokens"], 4 + 5 + 6);
  EXPECT_EQ(out["usage"]["total_tokens"], 10 + 15);
  const Json u = weft::serve::usage_chunk(r, meta_, {cs[0].finish, cs[1].finish, cs[2].finish});
  EXPECT_EQ(u["usage"], out["usage"]);
}

}  // namespace
