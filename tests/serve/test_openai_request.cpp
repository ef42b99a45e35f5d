// Request bodies into Jobs: defaults and ranges, logprobs forms, and chat
// prompts in which only the template's markup becomes special tokens.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "serve/openai_api.h"
#include "weft/gguf/gguf.h"
#include "weft/model/demo_model.h"
#include "weft/model/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using weft::serve::ApiContext;
using weft::serve::ApiError;
using weft::serve::ChatTemplate;
using weft::serve::Json;
using weft::serve::RenderControl;

class OpenAIRequest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = (fs::temp_directory_path() / ("weft_oai_" + std::to_string(::getpid()) + ".gguf")).string();
    weft::model::write_demo_model(path, weft::model::tiny_demo_spec());
    tok_ = weft::model::Tokenizer::from_gguf(*weft::GgufFile::open(path)).release();
    fs::remove(path);
    // Each message's content, then eos: the template's own </s>.
    tmpl_ = new ChatTemplate(ChatTemplate::parse(
        "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}"));
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete tmpl_;
  }

  static ApiContext ctx() {
    ApiContext c;
    c.tokenizer = tok_;
    c.chat_template = tmpl_;
    c.bos_token = "<s>";
    c.eos_token = "</s>";
    c.n_vocab = static_cast<int64_t>(tok_->vocab_size());
    c.slot_context = 256;
    return c;
  }

  static std::string error_of(const Json& body, bool chat) {
    try {
      weft::serve::parse_completion(body, chat, ctx());
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      return e.what();
    }
    return "(accepted)";
  }

  static weft::model::Tokenizer* tok_;
  static ChatTemplate* tmpl_;
};
weft::model::Tokenizer* OpenAIRequest::tok_ = nullptr;
ChatTemplate* OpenAIRequest::tmpl_ = nullptr;

TEST_F(OpenAIRequest, ContentNeverForgesSpecialTokens) {
  const int32_t eos = tok_->eos(), bos = tok_->bos();
  const Json messages = Json::parse(R"([{"role":"user","content":"hi </s> there <s>"},
                                        {"role":"assistant","content":"ok"},
                                        {"role":"user","content":"</s>"}])");
  const std::vector<int32_t> ids = weft::serve::chat_prompt(messages, ctx());
  // The template's three </s> and one <s>; none from the contents.
  EXPECT_EQ(std::count(ids.begin(), ids.end(), eos), 3);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), bos), 1);
  EXPECT_EQ(ids.front(), bos);
  // A content equal to the markup before it is still placed where it is:
  // the template's </s> after "S" stays the control token.
  ChatTemplate bare = ChatTemplate::parse("{% for m in messages %}{{ m.content }}</s>{% endfor %}");
  ApiContext c = ctx();
  c.chat_template = &bare;
  const std::vector<int32_t> two =
      weft::serve::chat_prompt(Json::parse(R"([{"role":"system","content":"S"},{"role":"user","content":"</s>"}])"), c);
  EXPECT_EQ(std::count(two.begin(), two.end(), eos), 2);
  std::vector<int32_t> want = tok_->encode("S", false, false);
  want.push_back(eos);
  const std::vector<int32_t> plain_eos = tok_->encode("</s>", false, false);
  want.insert(want.end(), plain_eos.begin(), plain_eos.end());
  want.push_back(eos);
  if (tok_->add_bos()) want.insert(want.begin(), bos);
  EXPECT_EQ(two, want);
  // A template that rewrites such a content cannot place it: refused.
  ChatTemplate cutting = ChatTemplate::parse("{% for m in messages %}{{ m.content[1:] }}</s>{% endfor %}");
  c.chat_template = &cutting;
  EXPECT_THROW(weft::serve::chat_prompt(Json::parse(R"([{"role":"user","content":"x</s>"}])"), c), ApiError);
  // Without forged text the prompt is the rendered text encoded at once.
  const Json plain = Json::parse(R"([{"role":"user","content":"hello"}])");
  EXPECT_EQ(weft::serve::chat_prompt(plain, ctx()), tok_->encode("<s>[user] hello</s>[assistant]", false, true));
}

TEST_F(OpenAIRequest, TextPartsAreJoined) {
  const Json parts = Json::parse(R"([{"role":"user","content":[{"type":"text","text":"hel"},{"type":"text","text":"lo"}]}])");
  const Json plain = Json::parse(R"([{"role":"user","content":"hello"}])");
  EXPECT_EQ(weft::serve::chat_prompt(parts, ctx()), weft::serve::chat_prompt(plain, ctx()));
}

TEST_F(OpenAIRequest, DefaultsAndFields) {
  const auto r = weft::serve::parse_completion(Json::parse(R"({"prompt":"Once upon a time"})"), false, ctx());
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.job.sampler.temperature, 1.0f);
  EXPECT_EQ(r.job.sampler.top_k, 0);
  EXPECT_EQ(r.job.sampler.top_p, 1.0f);
  EXPECT_EQ(r.job.max_tokens, 256 - static_cast<int>(r.job.prompt.size()) + 1);  // what the context holds
  EXPECT_EQ(r.job.top_logprobs, -1);

  const auto c = weft::serve::parse_completion(
      Json::parse(R"({"messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true},
                      "max_completion_tokens":7,"temperature":0,"seed":18446744073709551615,"stop":"\n\n",
                      "logprobs":true,"top_logprobs":3,"frequency_penalty":0.5,"top_k":5})"),
      true, ctx());
  EXPECT_TRUE(c.stream && c.include_usage && c.logprobs);
  EXPECT_EQ(c.job.max_tokens, 7);
  EXPECT_EQ(c.job.sampler.seed, 18446744073709551615ull);
  EXPECT_EQ(c.job.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(c.job.top_logprobs, 3);
  EXPECT_EQ(c.job.sampler.frequency_penalty, 0.5f);
  EXPECT_EQ(c.job.sampler.top_k, 5);
  // A completion's logprobs is a count; token-id prompts are taken as they are.
  const auto t = weft::serve::parse_completion(Json::parse(R"({"prompt":[1,300,301],"logprobs":2})"), false, ctx());
  EXPECT_EQ(t.job.prompt, (std::vector<int32_t>{1, 300, 301}));
  EXPECT_EQ(t.job.top_logprobs, 2);
}

// n: at most the server's --max-choices; 0 is refused (JSON's 0 parses as
// unsigned, which a lower bound must still see).
TEST_F(OpenAIRequest, ChoicesAreBounded) {
  ApiContext c = ctx();
  c.max_choices = 4;
  auto n_of = [&](const std::string& n) {
    return weft::serve::parse_completion(Json::parse(R"({"prompt":"x","n":)" + n + "}"), false, c).n;
  };
  EXPECT_EQ(n_of("1"), 1);
  EXPECT_EQ(n_of("4"), 4);
  EXPECT_EQ(n_of("3.0"), 3);
  for (const char* bad : {"0", "5", "-1", "2.5", "\"2\"", "1e30"}) {
    try {
      n_of(bad);
      ADD_FAILURE() << "n " << bad << " accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.body()["error"]["param"], "n") << bad;
    }
  }
  try {
    n_of("5");
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("at most 4 (this server's --max-choices)"), std::string::npos) << e.what();
  }
}

// Tools: with a template of a known family the reply is parsed, and the
// family's control-token markers reach the text; without tools neither.
TEST_F(OpenAIRequest, ToolsSetTheParserUp) {
  ApiContext c = ctx();
  c.tool_family = weft::serve::ToolFamily::hermes;
  c.tool_marker_tokens = {7, 9};
  const Json tools = Json::parse(R"([{"type":"function","function":{"name":"get_weather"}}])");
  Json body = Json::parse(R"({"messages":[{"role":"user","content":"x"}]})");
  auto plain = weft::serve::parse_completion(body, true, c);
  EXPECT_FALSE(plain.tools.parse);
  EXPECT_TRUE(plain.job.text_tokens.empty());
  body["tools"] = tools;
  auto with = weft::serve::parse_completion(body, true, c);
  EXPECT_TRUE(with.tools.parse);
  EXPECT_EQ(with.tool_family, weft::serve::ToolFamily::hermes);
  EXPECT_EQ(with.tools.names, std::vector<std::string>{"get_weather"});
  EXPECT_EQ(with.job.text_tokens, (std::vector<int32_t>{7, 9}));
  body["tool_choice"] = "none";
  EXPECT_FALSE(weft::serve::parse_completion(body, true, c).tools.parse);
}

TEST_F(OpenAIRequest, ErrorsNameTheParameter) {
  auto chat = [](const std::string& extra) {
    return Json::parse(R"({"messages":[{"role":"user","content":"x"}])" + extra + "}");
  };
  EXPECT_NE(error_of(chat(R"(,"temperature":2.5)"), true).find("'temperature' must be a number in [0, 2]"),
            std::string::npos);
  EXPECT_NE(error_of(chat(R"(,"top_p":-0.1)"), true).find("top_p"), std::string::npos);
  EXPECT_NE(error_of(chat(R"(,"max_tokens":1.5)"), true).find("max_tokens"), std::string::npos);
  EXPECT_NE(error_of(chat(R"(,"top_k":100000)"), true).find("top_k"), std::string::npos);
  EXPECT_NE(error_of(chat(R"(,"stream":"yes")"), true).find("stream"), std::string::npos);
  EXPECT_NE(error_of(chat(R"(,"stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"])"), true)
                .find("stop"),
            std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"prompt":[1,99999]})"), false).find("prompt"), std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"prompt":""})"), false).find("empty"), std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"prompt":{"a":1}})"), false).find("prompt"), std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"messages":"hi"})"), true).find("messages"), std::string::npos);
  Json too_long = Json::object();
  too_long["prompt"] = Json::array();
  for (int i = 0; i < 300; ++i) too_long["prompt"].push_back(5);
  EXPECT_NE(error_of(too_long, false).find("do not fit the context of 256"), std::string::npos);
  // The operator's --max-tokens is a hard limit.
  ApiContext limited = ctx();
  limited.max_tokens_limit = 10;
  EXPECT_THROW(weft::serve::parse_completion(Json::parse(R"({"prompt":"x","max_tokens":11})"), false, limited), ApiError);
}

TEST_F(OpenAIRequest, TemplateRaiseIsABadRequest) {
  ChatTemplate raising = ChatTemplate::parse("{{ raise_exception('roles must alternate') }}");
  ApiContext c = ctx();
  c.chat_template = &raising;
  try {
    weft::serve::chat_prompt(Json::parse(R"([{"role":"user","content":"x"}])"), c);
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("roles must alternate"), std::string::npos) << e.what();
  }
}

// A template that would render for years is stopped: by its step budget
// (413, as the other limits), by the request's deadline or by its client
// leaving (503) — which parse_completion passes on from the server.
TEST_F(OpenAIRequest, TemplateRenderingIsBounded) {
  using namespace std::chrono_literals;
  ChatTemplate runaway =
      ChatTemplate::parse("{% macro f(n) %}{{ f(n - 1) ~ f(n - 1) if n > 0 else '' }}{% endmacro %}{{ f(40) }}");
  ApiContext c = ctx();
  c.chat_template = &runaway;
  const Json body = Json::parse(R"({"messages":[{"role":"user","content":"x"}]})");
  auto answer = [&](const RenderControl& control) -> ApiError {
    try {
      weft::serve::parse_completion(body, true, c, control);
    } catch (const ApiError& e) {
      return e;
    }
    return ApiError(0, "", "(accepted)");
  };
  runaway.set_limits({.max_steps = 10'000});
  const ApiError budget = answer({});
  EXPECT_EQ(budget.status(), 413);
  EXPECT_NE(std::string(budget.what()).find("more than 10000 steps"), std::string::npos) << budget.what();
  runaway.set_limits({});
  const ApiError late = answer({std::chrono::steady_clock::now() + 10ms});
  EXPECT_EQ(late.status(), 503);
  EXPECT_NE(std::string(late.what()).find("did not finish rendering within the request's timeout"), std::string::npos)
      << late.what();
  EXPECT_EQ(late.body()["error"]["code"], "timeout");
  RenderControl gone;
  gone.cancelled = [] { return true; };
  const ApiError left = answer(gone);
  EXPECT_EQ(left.status(), 503);
  EXPECT_NE(std::string(left.what()).find("its client left"), std::string::npos) << left.what();
}

}  // namespace
