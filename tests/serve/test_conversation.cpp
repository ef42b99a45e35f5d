// Conversation (include/weft/serve/conversation.h) on a tiny demo model
// that carries a chat template: turn 2 evaluates only the end of turn 1 and
// its own message (counted against the template's text worked out here by
// hand), and its reply equals a fresh session's reply to the same tokens
// evaluated from position 0; a reply stopped by its callback keeps its last
// token for the next turn; a template that re-renders earlier turns
// differently falls back to evaluating everything; a full context ends it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/runtime/session.h"
#include "weft/serve/conversation.h"

namespace {

namespace fs = std::filesystem;
using weft::serve::ChatTemplate;
using weft::serve::Conversation;
using weft::serve::ConversationOptions;
using weft::serve::Reply;

// Markup the demo vocabulary spells character by character, and its </s>
// (a control token) closing each message.
constexpr const char* kTemplate =
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}";

class ConversationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string((fs::temp_directory_path() / ("weft_chat_" + std::to_string(::getpid()) + ".gguf")).string());
    weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.chat_template = kTemplate;
    weft::model::write_demo_model(*path_, spec);
  }
  static void TearDownTestSuite() {
    fs::remove(*path_);
    delete path_;
  }

  static std::unique_ptr<weft::Session> session(int64_t n_ctx) {
    auto s = std::make_unique<weft::Session>(weft::SessionOptions{.model = *path_, .devices = {"cpu:1"}});
    s->load(n_ctx);
    return s;
  }

  static ChatTemplate file_template() {
    std::string warning;
    ChatTemplate t = weft::serve::load_chat_template("", *path_, &warning);
    EXPECT_EQ(warning, "");
    return t;
  }

  static ConversationOptions options(int max_tokens) {
    ConversationOptions o;
    o.system = "Be brief.";
    o.generate.max_tokens = max_tokens;
    o.generate.stop_at_end_of_generation = false;  // random weights: every reply the same length
    return o;
  }

  static std::string* path_;
};
std::string* ConversationTest::path_ = nullptr;

TEST_F(ConversationTest, SecondTurnEvaluatesOnlyItsNewTokens) {
  auto s = session(512);
  const weft::model::Tokenizer& tok = s->tokenizer();
  const ChatTemplate tpl = file_template();  // the file's own template
  Conversation chat(*s, tpl, options(12));

  const Reply r1 = chat.say("Hello there");
  const std::string turn1 = "<|system|>Be brief.</s><|user|>Hello there</s><|assistant|>";
  const std::vector<int32_t> want1 = tok.encode(turn1, true, true);  // bos, the markup's </s> as control tokens
  EXPECT_EQ(r1.reused, 0);
  EXPECT_EQ(r1.evaluated, static_cast<int64_t>(want1.size()));
  ASSERT_EQ(r1.generation.tokens.size(), 12u);
  EXPECT_EQ(r1.generation.stop, weft::StopReason::max_tokens);
  // The twelfth reply token was not evaluated (generation stopped there).
  const int64_t after1 = static_cast<int64_t>(want1.size()) + 11;
  EXPECT_EQ(chat.positions(), after1);

  const std::vector<int32_t> history = chat.tokens();
  const Reply r2 = chat.say("And again");
  const std::string delta = "</s><|user|>And again</s><|assistant|>";
  const std::vector<int32_t> new2 = tok.encode(delta, false, true);
  EXPECT_EQ(r2.reused, after1);
  EXPECT_EQ(r2.evaluated, 1 + static_cast<int64_t>(new2.size()));  // the pending reply token, then the delta
  ASSERT_EQ(r2.generation.tokens.size(), 12u);

  // The reference: everything evaluated from position 0 in a fresh session.
  std::vector<int32_t> all = history;
  all.insert(all.end(), new2.begin(), new2.end());
  auto fresh = session(512);
  weft::GenerateOptions g{.max_tokens = 12, .stop_at_end_of_generation = false};
  EXPECT_EQ(fresh->generate(all, g).tokens, r2.generation.tokens);
  ASSERT_EQ(chat.messages().size(), 5u);
  EXPECT_EQ(chat.messages()[4]["role"], "assistant");
  EXPECT_EQ(chat.messages()[4]["content"], r2.text);
}

TEST_F(ConversationTest, ReplyStoppedByCallbackKeepsItsTokens) {
  auto s = session(512);
  const ChatTemplate tpl = file_template();
  Conversation chat(*s, tpl, options(40));
  int seen = 0;
  const Reply r1 = chat.say("Tell me a long story", [&](int32_t) { return ++seen < 3; });
  ASSERT_EQ(r1.generation.tokens.size(), 3u);
  EXPECT_EQ(r1.generation.stop, weft::StopReason::callback);
  const int64_t after1 = r1.evaluated + 2;
  EXPECT_EQ(chat.positions(), after1);
  const std::vector<int32_t> history = chat.tokens();
  ASSERT_EQ(history.size(), static_cast<size_t>(after1 + 1));
  EXPECT_EQ(history.back(), r1.generation.tokens.back());

  const Reply r2 = chat.say("Go on");
  const std::vector<int32_t> new2 = s->tokenizer().encode("</s><|user|>Go on</s><|assistant|>", false, true);
  EXPECT_EQ(r2.reused, after1);
  EXPECT_EQ(r2.evaluated, 1 + static_cast<int64_t>(new2.size()));
  std::vector<int32_t> all = history;
  all.insert(all.end(), new2.begin(), new2.end());
  auto fresh = session(512);
  weft::GenerateOptions g{.max_tokens = 40, .stop_at_end_of_generation = false};
  EXPECT_EQ(fresh->generate(all, g).tokens, r2.generation.tokens);
}

TEST_F(ConversationTest, TemplateThatRewritesEarlierTurnsIsEvaluatedWhole) {
  auto s = session(512);
  // The message count first: every turn's rendering differs from the start.
  const ChatTemplate tpl = ChatTemplate::parse(std::string("{{ messages | length }}") + kTemplate);
  Conversation chat(*s, tpl, options(4));
  const Reply r1 = chat.say("One");
  const Reply r2 = chat.say("Two");
  EXPECT_EQ(r2.reused, 0);
  const std::string text2 = "4<|system|>Be brief.</s><|user|>One</s><|assistant|>" + r1.text +
                            "</s><|user|>Two</s><|assistant|>";
  EXPECT_EQ(r2.evaluated, static_cast<int64_t>(s->tokenizer().encode(text2, true, true).size()));
  auto fresh = session(512);
  weft::GenerateOptions g{.max_tokens = 4, .stop_at_end_of_generation = false};
  EXPECT_EQ(fresh->generate(s->tokenizer().encode(text2, true, true), g).tokens, r2.generation.tokens);
}

TEST_F(ConversationTest, FullContextEndsTheConversation) {
  auto s = session(64);
  const ChatTemplate tpl = file_template();
  Conversation chat(*s, tpl, options(1000));
  const Reply r1 = chat.say("Hi");
  EXPECT_TRUE(r1.context_full);
  EXPECT_EQ(r1.generation.stop, weft::StopReason::context_full);
  EXPECT_EQ(chat.positions(), 64);  // every position; the last reply token had none left
  const Reply r2 = chat.say("More?");
  EXPECT_TRUE(r2.context_full);
  EXPECT_EQ(r2.evaluated, 0);
  EXPECT_EQ(chat.messages().size(), 3u);  // the refused turn was not added
}

TEST_F(ConversationTest, TemplateErrorsNameTheTemplate) {
  auto s = session(64);
  const ChatTemplate tpl = ChatTemplate::parse("{{ raise_exception('no system messages here') }}");
  Conversation chat(*s, tpl, options(4));
  try {
    chat.say("Hi");
    FAIL() << "no error";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[chat] the chat template"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no system messages here"), std::string::npos) << e.what();
  }
}

}  // namespace
