// Tool calls parsed out of replies, per template family (src/serve/tool_calls.h),
// and the request's tool fields (src/serve/tool_request.h). The references
// are the families' published chat templates: Jinja2's renderings of their
// assistant tool-call turns (tests/serve/chat_templates/*cases.json, made by
// Python's Jinja2) are what the models were trained to write, so the parser
// must read them back; and the same templates, given OpenAI's arguments as
// JSON text, must render what Jinja2 rendered from objects.
#include <gtest/gtest.h>

#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

#include "serve/openai_api.h"
#include "serve/tool_calls.h"
#include "serve/tool_request.h"
#include "temp_dir.h"
#include "weft/serve/chat_template.h"

namespace {

using weft::serve::ApiError;
using weft::serve::Json;
using weft::serve::ParsedReply;
using weft::serve::ToolFamily;
using weft::serve::detect_tool_family;
using weft::serve::parse_tool_calls;
using weft::serve::tool_call_hold_from;

const std::string kTemplateFixtures = WEFT_SOURCE_DIR "/tests/serve/chat_templates/";

using weft::test::read_bytes;

const std::vector<std::string> kWeather = {"get_weather", "get_time"};

// The case named name of template tpl in a fixture file.
Json fixture_case(const std::string& file, const std::string& tpl, const std::string& name) {
  for (const Json& c : Json::parse(read_bytes(kTemplateFixtures + file)))
    if ((tpl.empty() || c.value("template", tpl) == tpl) && c["name"] == name) return c;
  ADD_FAILURE() << "no case " << tpl << "/" << name << " in " << file;
  return Json::object();
}

// text between the last occurrence of from (included when keep_from) and the next until.
std::string slice(const std::string& text, const std::string& from, const std::string& until, bool keep_from) {
  const size_t a = text.rfind(from);
  EXPECT_NE(a, std::string::npos) << from;
  if (a == std::string::npos) return "";
  const size_t start = keep_from ? a : a + from.size();
  const size_t b = text.find(until, start);
  return text.substr(start, b == std::string::npos ? std::string::npos : b - start);
}

void expect_call(const ParsedReply& p, size_t i, const std::string& name, const Json& arguments) {
  ASSERT_GT(p.calls.size(), i);
  EXPECT_EQ(p.calls[i].name, name);
  EXPECT_EQ(Json::parse(p.calls[i].arguments), arguments) << p.calls[i].arguments;
}

TEST(ToolCalls, FamilyDetectedFromTheRealTemplates) {
  const std::pair<const char*, ToolFamily> cases[] = {
      {"llama3_1.jinja", ToolFamily::llama3},   {"llama3_2.jinja", ToolFamily::llama3},
      {"qwen2_5.jinja", ToolFamily::hermes},    {"qwen3.jinja", ToolFamily::hermes},
      {"mistral_nemo.jinja", ToolFamily::mistral}, {"gpt_oss.jinja", ToolFamily::gpt_oss},
      {"chatml.jinja", ToolFamily::none},       {"llama3.jinja", ToolFamily::none},
      {"llama2.jinja", ToolFamily::none},       {"mistral.jinja", ToolFamily::none},
      {"gemma2.jinja", ToolFamily::none},       {"gemma3.jinja", ToolFamily::none},
      {"phi3.jinja", ToolFamily::none},
  };
  for (const auto& [file, family] : cases)
    EXPECT_EQ(detect_tool_family(read_bytes(kTemplateFixtures + file)), family) << file;
  // DeepSeek's (V3, R1) assistant turn, as its published template spells it.
  EXPECT_EQ(detect_tool_family("{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + "
                               "'<｜tool▁sep｜>' + tool['function']['name']}}"),
            ToolFamily::deepseek);
}

// What each real template renders for an assistant's call is what its
// model writes: the parser reads it back.
TEST(ToolCalls, ParsesTheCallsTheRealTemplatesRender) {
  const Json paris = {{"location", "Paris"}, {"unit", "celsius"}};
  for (const char* tpl : {"llama3_1", "llama3_2"}) {
    const std::string out = fixture_case("cases.json", tpl, "tool_call")["expected"];
    const std::string reply = slice(out, "assistant<|end_header_id|>\n\n{", "<|eot_id|>", false);
    const ParsedReply p = parse_tool_calls(ToolFamily::llama3, "{" + reply, kWeather, true);
    ASSERT_EQ(p.calls.size(), 1u) << tpl << ": {" << reply;
    expect_call(p, 0, "get_weather", paris);
    EXPECT_EQ(p.content, "");
  }
  for (const char* tpl : {"qwen2_5", "qwen3"}) {
    const std::string out = fixture_case("cases.json", tpl, "tool_call")["expected"];
    const std::string reply = slice(out, "<|im_start|>assistant\n<tool_call>", "<|im_end|>", true)
                                  .substr(std::string("<|im_start|>assistant\n").size());
    const ParsedReply p = parse_tool_calls(ToolFamily::hermes, reply, kWeather, true);
    ASSERT_EQ(p.calls.size(), 1u) << tpl << ": " << reply;
    expect_call(p, 0, "get_weather", paris);
  }
  {
    const std::string out = fixture_case("cases.json", "mistral_nemo", "tool_call")["expected"];
    const std::string reply = slice(out, "[TOOL_CALLS]", "</s>", true);
    const ParsedReply p = parse_tool_calls(ToolFamily::mistral, reply, kWeather, true);
    ASSERT_EQ(p.calls.size(), 1u) << reply;
    expect_call(p, 0, "get_weather", paris);
  }
  {
    const Json c = fixture_case("gpt_oss_cases.json", "", "tool_call");
    const std::string out = c["expected"];
    // The generation prompt ends "<|start|>assistant"; the reply goes on from there.
    const std::string reply = slice(out, "<|start|>assistant to=", "<|start|>functions", true)
                                  .substr(std::string("<|start|>assistant").size());
    const ParsedReply p = parse_tool_calls(ToolFamily::gpt_oss, reply, kWeather, true);
    ASSERT_EQ(p.calls.size(), 1u) << reply;
    expect_call(p, 0, "get_weather", Json{{"location", "Paris"}});
  }
}

// The forms the families' documentation and templates give, as a model
// writes them (several calls, text before them, the models' variants).
TEST(ToolCalls, ParsesEachFamilysForms) {
  const Json paris = {{"city", "Paris"}}, rome = {{"city", "Rome"}, {"days", 2}};
  {
    const std::string text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                             "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Rome\", \"days\": 2}}\n"
                             "</tool_call>";
    const ParsedReply p = parse_tool_calls(ToolFamily::hermes, text, kWeather, true);
    ASSERT_EQ(p.calls.size(), 2u);
    expect_call(p, 0, "get_weather", paris);
    expect_call(p, 1, "get_time", rome);
    EXPECT_EQ(p.content, "Let me check.\n");
    // Arguments as a JSON string, and a last block without its closing tag.
    // Text after the calls is content too.
    const ParsedReply after = parse_tool_calls(
        ToolFamily::hermes, "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>\nDone.", kWeather, true);
    ASSERT_EQ(after.calls.size(), 1u);
    EXPECT_EQ(after.content, "Done.");
    const ParsedReply q = parse_tool_calls(
        ToolFamily::hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}",
        kWeather, true);
    ASSERT_EQ(q.calls.size(), 1u);
    expect_call(q, 0, "get_weather", paris);
  }
  {
    const ParsedReply p = parse_tool_calls(
        ToolFamily::llama3,
        "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; "
        "{\"type\": \"function\", \"name\": \"get_time\", \"parameters\": {\"city\": \"Rome\", \"days\": 2}}",
        kWeather, true);
    ASSERT_EQ(p.calls.size(), 2u);
    expect_call(p, 0, "get_weather", paris);
    expect_call(p, 1, "get_time", rome);
  }
  {
    const ParsedReply p = parse_tool_calls(
        ToolFamily::mistral,
        "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcDEF123\"}, "
        "{\"name\": \"get_time\", \"arguments\": {\"city\": \"Rome\", \"days\": 2}}]",
        kWeather, true);
    ASSERT_EQ(p.calls.size(), 2u);
    expect_call(p, 1, "get_time", rome);
    // Tokenizer v11 (Magistral, Devstral): NAME[ARGS]{...} per call.
    const ParsedReply v11 = parse_tool_calls(
        ToolFamily::mistral,
        "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{\"city\": \"Rome\", \"days\": 2}",
        kWeather, true);
    ASSERT_EQ(v11.calls.size(), 2u);
    expect_call(v11, 0, "get_weather", paris);
    expect_call(v11, 1, "get_time", rome);
  }
  {
    // Harmony: analysis first, then the call with the recipient in the channel header.
    const ParsedReply p = parse_tool_calls(
        ToolFamily::gpt_oss,
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
        kWeather, true);
    ASSERT_EQ(p.calls.size(), 1u);
    expect_call(p, 0, "get_weather", paris);
    EXPECT_EQ(p.reasoning, "Need the weather.");
    EXPECT_EQ(p.content, "");
  }
  {
    // DeepSeek V3 / R1, two calls (the template's own spelling, "\n" between them).
    const std::string text = "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
                             "```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function"
                             "<｜tool▁sep｜>get_time\n```json\n{\"city\": \"Rome\", \"days\": 2}\n```<｜tool▁call▁end｜>"
                             "<｜tool▁calls▁end｜>";
    const ParsedReply p = parse_tool_calls(ToolFamily::deepseek, text, kWeather, true);
    ASSERT_EQ(p.calls.size(), 2u);
    expect_call(p, 0, "get_weather", paris);
    expect_call(p, 1, "get_time", rome);
    EXPECT_EQ(p.content, "Checking.");
    // V3.1: NAME<sep>{...}.
    const ParsedReply v31 = parse_tool_calls(
        ToolFamily::deepseek,
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"Rome\", \"days\": 2}"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        kWeather, true);
    ASSERT_EQ(v31.calls.size(), 1u);
    expect_call(v31, 0, "get_time", rome);
  }
}

TEST(ToolCalls, ParallelFalseKeepsTheFirstCall) {
  const std::string text = "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>"
                           "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>";
  EXPECT_EQ(parse_tool_calls(ToolFamily::hermes, text, kWeather, true).calls.size(), 2u);
  const ParsedReply one = parse_tool_calls(ToolFamily::hermes, text, kWeather, false);
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.calls[0].name, "get_time");
  EXPECT_EQ(one.calls[0].arguments, "{}");
}

// Replies that are not calls, or broken ones, come back whole as text.
TEST(ToolCalls, MalformedRepliesStayText) {
  const std::string deep = std::string(200, '[') + std::string(200, ']');
  const std::vector<std::pair<ToolFamily, std::string>> cases = {
      {ToolFamily::none, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>"},
      {ToolFamily::hermes, "Just text, no call."},
      {ToolFamily::hermes, "<tool_call>"},
      {ToolFamily::hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": </tool_call>"},
      {ToolFamily::hermes, "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>"},  // not offered
      {ToolFamily::hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": [1, 2]}</tool_call>"},
      {ToolFamily::hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"not json\"}</tool_call>"},
      {ToolFamily::hermes, "<tool_call>{\"name\": \"get_weather\"}</tool_call>"},
      {ToolFamily::hermes, "<tool_call>{\"name\": 5, \"arguments\": {}}</tool_call>"},
      {ToolFamily::hermes, "<tool_call>{\"name\": \"get_weather\", \"parameters\": {}}</tool_call>"},  // llama3's key
      {ToolFamily::hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}} trailing</tool_call>"},
      {ToolFamily::hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call><tool_call>{oops"},
      {ToolFamily::hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"a\": " + deep + "}}</tool_call>"},
      {ToolFamily::llama3, "{\"not\": \"a call\"}"},
      {ToolFamily::llama3, "Sure: {\"name\": \"get_weather\", \"parameters\": {}}"},  // text first, no tag
      {ToolFamily::llama3, "{\"name\": \"get_weather\", \"parameters\": {}} and then prose"},
      {ToolFamily::llama3, "<|python_tag|>brave_search.call(query=\"x\")"},
      {ToolFamily::llama3, "{\"type\": \"code\", \"name\": \"get_weather\", \"parameters\": {}}"},
      {ToolFamily::llama3, "{\"name\": \"get_weather\", \"parameters\": {}"},  // unclosed
      {ToolFamily::mistral, "[TOOL_CALLS]"},
      {ToolFamily::mistral, "[TOOL_CALLS][]"},
      {ToolFamily::mistral, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {}}"},
      {ToolFamily::mistral, "[TOOL_CALLS]{\"name\": \"get_weather\", \"arguments\": {}}"},
      {ToolFamily::mistral, "[TOOL_CALLS]get_weather[ARGS]{\"city\": "},
      {ToolFamily::gpt_oss, "<|channel|>final<|message|>It is sunny.<|return|>"},  // no call
      {ToolFamily::gpt_oss, "<|channel|>commentary to=browser.search<|message|>{\"q\": 1}<|call|>"},
      {ToolFamily::gpt_oss, "<|channel|>analysis to=python<|message|>print(1)<|call|>"},  // a built-in tool
      {ToolFamily::gpt_oss, "<|channel|>commentary to=functions.get_weather<|message|>{\"city\"<|call|>"},
      {ToolFamily::gpt_oss, "<|channel|>commentary to=functions.get_weather json"},  // no <|message|>
      {ToolFamily::gpt_oss, "<|channel|>weird<|message|>x<|end|><|channel|>commentary to=functions.get_time<|message|>{}"},
      {ToolFamily::deepseek, "<｜tool▁calls▁begin｜>"},
      {ToolFamily::deepseek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{}\n```"
                             "garbage"},
      {ToolFamily::deepseek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n{\"a\": 1}"},
      {ToolFamily::deepseek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"a\": 1}"},
      {ToolFamily::deepseek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather{\"a\": 1}<｜tool▁call▁end｜>"},
      {ToolFamily::deepseek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>nope<｜tool▁sep｜>{}<｜tool▁call▁end｜>"},
  };
  for (const auto& [family, text] : cases) {
    const ParsedReply p = parse_tool_calls(family, text, kWeather, true);
    EXPECT_TRUE(p.calls.empty()) << weft::serve::tool_family_name(family) << ": " << text;
    EXPECT_EQ(p.content, text);
  }
}

TEST(ToolCalls, HoldsBackFromWhereACallMayBegin) {
  EXPECT_EQ(tool_call_hold_from(ToolFamily::hermes, "Hello there"), 11u);
  EXPECT_EQ(tool_call_hold_from(ToolFamily::hermes, "Hello <tool"), 6u);       // a marker's start at the end
  EXPECT_EQ(tool_call_hold_from(ToolFamily::hermes, "Hello <tool_call>{"), 6u);
  EXPECT_EQ(tool_call_hold_from(ToolFamily::hermes, "a < b"), 5u);
  EXPECT_EQ(tool_call_hold_from(ToolFamily::llama3, "  "), 0u);               // may still become a call
  EXPECT_EQ(tool_call_hold_from(ToolFamily::llama3, " {\"na"), 0u);
  EXPECT_EQ(tool_call_hold_from(ToolFamily::llama3, "Hi <|python"), 3u);
  EXPECT_EQ(tool_call_hold_from(ToolFamily::mistral, "ok [TOOL_CALLS]["), 3u);
  EXPECT_EQ(tool_call_hold_from(ToolFamily::deepseek, "ok <｜tool"), 3u);
  EXPECT_EQ(tool_call_hold_from(ToolFamily::gpt_oss, "anything"), 0u);
  EXPECT_EQ(tool_call_hold_from(ToolFamily::none, "<tool_call>"), 11u);
}

TEST(ToolCalls, IdsAreFreshAndShaped) {
  std::set<std::string> ids;
  for (int i = 0; i < 2000; ++i) {
    const std::string id = weft::serve::new_tool_call_id(ToolFamily::hermes);
    EXPECT_EQ(id.rfind("call_", 0), 0u);
    EXPECT_EQ(id.size(), 29u);
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 2000u);
  // Mistral's template refuses ids that are not 9 letters and digits.
  const std::string m = weft::serve::new_tool_call_id(ToolFamily::mistral);
  EXPECT_EQ(m.size(), 9u);
  for (char c : m) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << m;
}

TEST(ToolCalls, JsonValueEnd) {
  using weft::serve::json_value_end;
  EXPECT_EQ(json_value_end("{\"a\": \"}\"} rest"), 10u);
  EXPECT_EQ(json_value_end("[1, {\"b\": [2]}]x"), 15u);
  EXPECT_EQ(json_value_end("{\"a\": \"\\\"}\"}"), 12u);
  EXPECT_EQ(json_value_end("{\"a\": 1"), 0u);
  EXPECT_EQ(json_value_end("{\"a\": 1]"), 0u);
  EXPECT_EQ(json_value_end("\"str\""), 0u);
  EXPECT_EQ(json_value_end(std::string(64, '[') + std::string(64, ']')), 128u);
  EXPECT_EQ(json_value_end(std::string(65, '[') + std::string(65, ']')), 0u);  // deeper than 64
}

// The request's tool fields.
std::string tool_error(const Json& body) {
  Json extra = Json::object();
  try {
    weft::serve::read_tool_options(body, ToolFamily::hermes, extra);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.body()["error"]["param"].get<std::string>() + ": " + e.what();
  }
  return "";
}

Json weather_tools() {
  return Json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
                         {"type": "function", "function": {"name": "get_time"}}])");
}

TEST(ToolRequest, ChecksTheFields) {
  EXPECT_EQ(tool_error(Json{{"tools", weather_tools()}}), "");
  EXPECT_EQ(tool_error(Json{{"tools", Json::array()}}), "");
  EXPECT_NE(tool_error(Json{{"tools", "x"}}).find("tools: "), std::string::npos);
  EXPECT_NE(tool_error(Json{{"tools", Json::array({Json{{"type", "retrieval"}}})}}).find("tools[0]"), std::string::npos);
  EXPECT_NE(tool_error(Json::parse(R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})")).find("name"),
            std::string::npos);
  EXPECT_NE(tool_error(Json::parse(R"({"tools": [{"type": "function", "function": {"name": "f"}},
                                                   {"type": "function", "function": {"name": "f"}}]})"))
                .find("two tools"),
            std::string::npos);
  Json many = Json::array();
  for (int i = 0; i < 129; ++i) many.push_back({{"type", "function"}, {"function", {{"name", "f" + std::to_string(i)}}}});
  EXPECT_NE(tool_error(Json{{"tools", many}}).find("at most 128"), std::string::npos);
  EXPECT_NE(tool_error(Json{{"tools", weather_tools()}, {"tool_choice", "sometimes"}}).find("tool_choice: "),
            std::string::npos);
  EXPECT_NE(tool_error(Json{{"tool_choice", "required"}}).find("needs 'tools'"), std::string::npos);
  EXPECT_EQ(tool_error(Json{{"tool_choice", "none"}}), "");
  EXPECT_NE(tool_error(Json::parse(R"({"tools": [{"type": "function", "function": {"name": "f"}}],
                                       "tool_choice": {"type": "function", "function": {"name": "g"}}})"))
                .find("'g'"),
            std::string::npos);
  EXPECT_NE(tool_error(Json{{"parallel_tool_calls", "no"}}).find("parallel_tool_calls: "), std::string::npos);
}

TEST(ToolRequest, WhatTheTemplateAndTheParserGet) {
  Json extra = Json::object();
  auto t = weft::serve::read_tool_options(Json{{"tools", weather_tools()}}, ToolFamily::hermes, extra);
  EXPECT_TRUE(t.parse);
  EXPECT_TRUE(t.parallel);
  EXPECT_EQ(t.names, (std::vector<std::string>{"get_weather", "get_time"}));
  EXPECT_EQ(extra["tools"], weather_tools());
  // A named function: the template sees it alone, and calls may name it alone.
  extra = Json::object();
  t = weft::serve::read_tool_options(
      Json{{"tools", weather_tools()}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}},
           {"parallel_tool_calls", false}},
      ToolFamily::hermes, extra);
  EXPECT_EQ(t.names, std::vector<std::string>{"get_time"});
  ASSERT_EQ(extra["tools"].size(), 1u);
  EXPECT_EQ(extra["tools"][0]["function"]["name"], "get_time");
  EXPECT_FALSE(t.parallel);
  // "none": no tools shown, replies are text.
  extra = Json::object();
  t = weft::serve::read_tool_options(Json{{"tools", weather_tools()}, {"tool_choice", "none"}}, ToolFamily::hermes,
                                     extra);
  EXPECT_FALSE(t.parse);
  EXPECT_FALSE(extra.contains("tools"));
  // A template of no known family: shown, never parsed.
  extra = Json::object();
  t = weft::serve::read_tool_options(Json{{"tools", weather_tools()}}, ToolFamily::none, extra);
  EXPECT_FALSE(t.parse);
  EXPECT_TRUE(extra.contains("tools"));
}

// OpenAI sends a call's arguments as JSON text; the real templates, given
// them through tool_history_for_template, render exactly what Jinja2
// rendered from the objects Hugging Face's chat format holds.
TEST(ToolRequest, HistoryRendersAsTheTemplatesExpect) {
  const std::pair<const char*, const char*> cases[] = {
      {"cases.json", "llama3_1"}, {"cases.json", "llama3_2"},     {"cases.json", "qwen2_5"},
      {"cases.json", "qwen3"},    {"cases.json", "mistral_nemo"}, {"gpt_oss_cases.json", "gpt_oss"},
  };
  for (const auto& [file, tpl] : cases) {
    const Json c = fixture_case(file, file == std::string("cases.json") ? tpl : "", "tool_call");
    Json vars = c["variables"];
    bool stringified = false;
    for (Json& m : vars["messages"])
      if (m.contains("tool_calls"))
        for (Json& call : m["tool_calls"]) {
          call["function"]["arguments"] = call["function"]["arguments"].dump();
          stringified = true;
        }
    ASSERT_TRUE(stringified) << tpl;
    const ToolFamily family = detect_tool_family(read_bytes(kTemplateFixtures + tpl + ".jinja"));
    weft::serve::tool_history_for_template(vars["messages"], family);
    auto t = weft::serve::ChatTemplate::parse(read_bytes(kTemplateFixtures + tpl + ".jinja"));
    std::tm tm{};  // the day gpt_oss_cases.json was rendered on (as test_chat_template.cpp pins it)
    tm.tm_year = 2031 - 1900;
    tm.tm_mon = 5;
    tm.tm_mday = 15;
    tm.tm_hour = 12;
    tm.tm_isdst = -1;
    t.set_clock([at = std::chrono::system_clock::from_time_t(std::mktime(&tm))] { return at; });
    EXPECT_EQ(t.render(vars), c["expected"].get<std::string>()) << tpl;
  }
}

// DeepSeek's template concatenates the arguments' text and renders calls
// only for a content of none; the others read arguments as an object.
TEST(ToolRequest, HistoryPerFamily) {
  const Json sent = Json::parse(R"([{"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                                      "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
                                    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_2", "type": "function",
                                      "function": {"name": "f", "arguments": "not json"}}]}])");
  Json ds = sent;
  weft::serve::tool_history_for_template(ds, ToolFamily::deepseek);
  EXPECT_TRUE(ds[0]["content"].is_null());
  EXPECT_EQ(ds[0]["tool_calls"][0]["function"]["arguments"], "{\"a\": 1}");
  Json qwen = sent;
  weft::serve::tool_history_for_template(qwen, ToolFamily::hermes);
  EXPECT_EQ(qwen[0]["content"], "");
  EXPECT_EQ(qwen[0]["tool_calls"][0]["function"]["arguments"], Json({{"a", 1}}));
  EXPECT_EQ(qwen[1]["tool_calls"][0]["function"]["arguments"], "not json");  // left as sent
}

TEST(Choices, SeedsOfChoices) {
  EXPECT_EQ(weft::serve::choice_seed(1234, 0), 1234u);
  // SplitMix64's first output from state 0 (its published reference value).
  EXPECT_EQ(weft::serve::choice_seed(0, 1), 0xE220A8397B1DCDAFull);
  std::set<uint64_t> seeds;
  for (int i = 0; i < 128; ++i) seeds.insert(weft::serve::choice_seed(42, i));
  EXPECT_EQ(seeds.size(), 128u);
}

}  // namespace
