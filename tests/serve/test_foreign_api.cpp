// Ollama's and Anthropic's request bodies into Jobs and engine events into
// their replies (src/serve/ollama_api.h, anthropic_api.h). References: the
// OpenAI mapping for prompts and sampler fields (one mapping for every
// API), the template's text encoded by hand, and the fields each API's
// public documentation lists.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>

#include "serve/anthropic_api.h"
#include "serve/api_bridge.h"
#include "serve/ollama_api.h"
#include "weft/gguf/gguf.h"
#include "weft/model/demo_model.h"
#include "weft/model/tokenizer.h"

namespace {

using weft::serve::ApiContext;
using weft::serve::ApiError;
using weft::serve::Json;

struct Model {
  std::unique_ptr<weft::model::Tokenizer> tok;
  std::unique_ptr<weft::serve::ChatTemplate> tmpl;
};

// The tiny demo model's tokenizer and a template whose text a test can
// write out: "<s>[role] content</s>...[assistant]".
const Model& model() {
  static const Model m = [] {
    namespace fs = std::filesystem;
    const std::string path =
        (fs::temp_directory_path() / ("weft_foreign_" + std::to_string(::getpid()) + ".gguf")).string();
    weft::model::write_demo_model(path, weft::model::tiny_demo_spec());
    Model out;
    out.tok = weft::model::Tokenizer::from_gguf(*weft::GgufFile::open(path));
    fs::remove(path);
    out.tmpl = std::make_unique<weft::serve::ChatTemplate>(weft::serve::ChatTemplate::parse(
        "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}"));
    return out;
  }();
  return m;
}

ApiContext ctx() {
  ApiContext c;
  c.tokenizer = model().tok.get();
  c.chat_template = model().tmpl.get();
  c.bos_token = "<s>";
  c.eos_token = "</s>";
  c.n_vocab = static_cast<int64_t>(model().tok->vocab_size());
  c.slot_context = 256;
  return c;
}

std::vector<int32_t> rendered(const std::string& text) {
  return model().tok->encode(text, false, true);
}

// The ApiError a call throws (status 0 when it throws none).
template <class F>
ApiError error_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "", "(accepted)");
}
ApiError ollama_error(const std::string& body, bool chat = true) {
  return error_of([&] { weft::serve::parse_ollama(Json::parse(body), chat, ctx()); });
}
ApiError messages_error(const std::string& body) {
  return error_of([&] { weft::serve::parse_messages(Json::parse(body), ctx()); });
}
// 400, param as named, and the message quoting or naming it.
void expect_bad(const ApiError& e, const std::string& param, const std::string& in_message) {
  EXPECT_EQ(e.status(), 400) << e.what();
  EXPECT_EQ(e.param(), param) << e.what();
  EXPECT_NE(std::string(e.what()).find(in_message), std::string::npos) << e.what();
}

TEST(OllamaRequest, ChatOptionsMapToTheSampler) {
  const auto r = weft::serve::parse_ollama(Json::parse(R"({"model":"m:latest","messages":[
      {"role":"system","content":"Be terse."},{"role":"user","content":"hi"}],
      "options":{"temperature":0.25,"top_k":7,"top_p":0.5,"min_p":0.125,"seed":42,"num_predict":5,
                 "stop":["END","\n\n"],"repeat_penalty":1.5,"repeat_last_n":10,"presence_penalty":0.5,
                 "frequency_penalty":-0.5,"num_ctx":8192,"mirostat":2}})"),
                                           true, ctx());
  EXPECT_TRUE(r.chat);
  EXPECT_TRUE(r.stream);  // Ollama streams by default
  EXPECT_FALSE(r.load_only);
  EXPECT_EQ(r.model, "m:latest");
  EXPECT_EQ(r.job.prompt, rendered("<s>[system] Be terse.</s>[user] hi</s>[assistant]"));
  const auto& s = r.job.sampler;
  EXPECT_EQ(s.temperature, 0.25f);
  EXPECT_EQ(s.top_k, 7);
  EXPECT_EQ(s.top_p, 0.5f);
  EXPECT_EQ(s.min_p, 0.125f);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.repetition_penalty, 1.5f);
  EXPECT_EQ(s.repetition_window, 10);
  EXPECT_EQ(s.presence_penalty, 0.5f);
  EXPECT_EQ(s.frequency_penalty, -0.5f);
  EXPECT_EQ(r.job.max_tokens, 5);
  EXPECT_EQ(r.job.stop, (std::vector<std::string>{"END", "\n\n"}));
}

TEST(OllamaRequest, SameJobAsTheOpenAIMapping) {
  const auto o = weft::serve::parse_ollama(
      Json::parse(R"({"messages":[{"role":"user","content":"hello"}],"stream":false,"options":{"temperature":0}})"),
      true, ctx());
  const auto oa = weft::serve::parse_completion(
      Json::parse(R"({"messages":[{"role":"user","content":"hello"}],"temperature":0})"), true, ctx());
  EXPECT_FALSE(o.stream);
  EXPECT_EQ(o.job.prompt, oa.job.prompt);
  EXPECT_EQ(o.job.max_tokens, oa.job.max_tokens);  // what the context holds
  EXPECT_EQ(o.job.sampler.temperature, 0.f);
  EXPECT_EQ(o.job.sampler.top_k, oa.job.sampler.top_k);
  EXPECT_EQ(o.job.sampler.top_p, oa.job.sampler.top_p);
  // num_predict -1 (no limit) and -2 (fill the context): the context's room.
  for (const char* n : {"-1", "-2"}) {
    const auto u = weft::serve::parse_ollama(
        Json::parse(std::string(R"({"messages":[{"role":"user","content":"hello"}],"options":{"num_predict":)") + n +
                    "}}"),
        true, ctx());
    EXPECT_EQ(u.job.max_tokens, oa.job.max_tokens) << n;
  }
  const auto w = weft::serve::parse_ollama(
      Json::parse(R"({"messages":[{"role":"user","content":"x"}],"options":{"repeat_last_n":-1}})"), true, ctx());
  EXPECT_EQ(w.job.sampler.repetition_window, 256);
}

TEST(OllamaRequest, GenerateTemplatedOrRaw) {
  const auto t = weft::serve::parse_ollama(Json::parse(R"({"prompt":"Why?","system":"Sys."})"), false, ctx());
  EXPECT_FALSE(t.chat);
  EXPECT_EQ(t.job.prompt, rendered("<s>[system] Sys.</s>[user] Why?</s>[assistant]"));
  const auto raw = weft::serve::parse_ollama(Json::parse(R"({"prompt":"Once upon","raw":true})"), false, ctx());
  EXPECT_EQ(raw.job.prompt, model().tok->encode("Once upon", model().tok->add_bos()));
  // No prompt, or no messages: Ollama's "load the model" call.
  EXPECT_TRUE(weft::serve::parse_ollama(Json::parse(R"({"model":"m"})"), false, ctx()).load_only);
  EXPECT_TRUE(weft::serve::parse_ollama(Json::parse(R"({"prompt":""})"), false, ctx()).load_only);
  EXPECT_TRUE(weft::serve::parse_ollama(Json::parse(R"({"messages":[]})"), true, ctx()).load_only);
}

TEST(OllamaRequest, ErrorsNameTheFieldAsOllamaDoes) {
  expect_bad(ollama_error(R"({"messages":[{"role":"user","content":"x"}],"options":{"temperature":"hot"}})"),
             "options.temperature", "'options.temperature' must be a number");
  expect_bad(ollama_error(R"({"messages":[{"role":"user","content":"x"}],"options":{"num_predict":1e30}})"),
             "options.num_predict", "'options.num_predict' must be an integer");
  expect_bad(ollama_error(R"({"messages":[{"role":"user","content":"x"}],"options":{"num_predict":"5"}})"),
             "options.num_predict", "options.num_predict");
  expect_bad(ollama_error(R"({"messages":[{"role":"user","content":"x"}],"options":{"top_k":-3}})"), "options.top_k",
             "'options.top_k'");
  expect_bad(ollama_error(R"({"messages":[{"role":"user","content":"x"}],"options":{"stop":[1]}})"), "options.stop",
             "'options.stop'");
  expect_bad(ollama_error(R"({"messages":[{"role":"user","content":"x"}],"options":{"repeat_last_n":1.5}})"),
             "options.repeat_last_n", "options.repeat_last_n");
  expect_bad(ollama_error(R"({"messages":[{"role":"user","content":"x"}],"options":[1]})"), "options", "'options'");
  expect_bad(ollama_error(R"({"messages":[{"role":"user","content":5}]})"), "messages", "messages[0].content");
  expect_bad(ollama_error(R"({"messages":[{"role":"user","content":"x","images":["AAAA"]}]})"), "messages", "images");
  expect_bad(ollama_error(R"({"messages":[{"content":"x"}]})"), "messages", "'role'");
  expect_bad(ollama_error(R"({"messages":{"role":"user"}})"), "messages", "must be an array");
  expect_bad(ollama_error(R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})"), "stream", "'stream'");
  expect_bad(ollama_error(R"({"messages":[{"role":"user","content":"x"}],"format":"yaml"})"), "format",
             "'format' must be \"json\" or a JSON schema object");
  expect_bad(ollama_error(R"({"messages":[{"role":"user","content":"x"}],"format":{"type":"strin"}})"), "format",
             "unknown type 'strin'");
  expect_bad(ollama_error(R"({"model":7,"messages":[]})"), "model", "'model'");
  expect_bad(ollama_error(R"([1,2])"), "", "JSON object");
  expect_bad(ollama_error(R"({"prompt":["x"]})", false), "prompt", "'prompt' must be a string");
  expect_bad(ollama_error(R"({"prompt":"x","system":3})", false), "system", "'system'");
  expect_bad(ollama_error(R"({"prompt":"x","suffix":"y"})", false), "suffix", "'suffix'");
  std::string longer(2000, 'a');
  for (char& c : longer) c = static_cast<char>('a' + (&c - longer.data()) % 26);
  const ApiError too_long = ollama_error(R"({"prompt":")" + longer + R"(","raw":true})", false);
  EXPECT_EQ(too_long.status(), 400);
  EXPECT_EQ(too_long.param(), "prompt") << too_long.what();
}

TEST(OllamaResponse, FieldsAsDocumented) {
  weft::serve::OllamaRequest chat;
  chat.chat = true;
  const weft::serve::OllamaMeta meta{"m:latest", "2026-01-02T03:04:05.000000006Z"};
  const Json piece = weft::serve::ollama_piece(chat, meta, "Hel");
  EXPECT_EQ(piece, Json::parse(R"({"model":"m:latest","created_at":"2026-01-02T03:04:05.000000006Z",
                                  "message":{"role":"assistant","content":"Hel"},"done":false})"));
  weft::serve::Event end;
  end.finished = true;
  end.finish_reason = "length";
  end.prompt_tokens = 12;
  end.completion_tokens = 5;
  end.prompt_seconds = 0.25;
  end.decode_seconds = 1.5;
  weft::serve::OllamaRequest gen;
  const Json done = weft::serve::ollama_done(gen, meta, "lo", end, 2.0);
  EXPECT_EQ(done["response"], "lo");
  EXPECT_FALSE(done.contains("message"));
  EXPECT_EQ(done["done"], true);
  EXPECT_EQ(done["done_reason"], "length");
  EXPECT_EQ(done["total_duration"], 2000000000);
  EXPECT_EQ(done["prompt_eval_count"], 12);
  EXPECT_EQ(done["prompt_eval_duration"], 250000000);
  EXPECT_EQ(done["eval_count"], 5);
  EXPECT_EQ(done["eval_duration"], 1500000000);
  end.finish_reason = "stop";
  EXPECT_EQ(weft::serve::ollama_done(gen, meta, "", end, 1)["done_reason"], "stop");
  end.finish_reason = "timeout";
  EXPECT_EQ(weft::serve::ollama_done(gen, meta, "", end, 1)["done_reason"], "length");
  EXPECT_EQ(weft::serve::ollama_loaded(gen, meta)["done_reason"], "load");
  EXPECT_EQ(weft::serve::ollama_error(ApiError(400, "x", "bad")), Json::parse(R"({"error":"bad"})"));
  EXPECT_TRUE(std::regex_match(weft::serve::ollama_time(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z)")))
      << weft::serve::ollama_time();
}

TEST(MessagesRequest, MapsSystemBlocksAndSampler) {
  const auto r = weft::serve::parse_messages(Json::parse(R"({"model":"claude-x","max_tokens":9,
      "system":[{"type":"text","text":"Be "},{"type":"text","text":"terse."}],
      "messages":[{"role":"user","content":[{"type":"text","text":"hel"},{"type":"text","text":"lo"}]},
                  {"role":"assistant","content":"ok"},{"role":"user","content":"again"}],
      "stop_sequences":["END"],"temperature":0.5,"top_p":0.75,"top_k":3,"stream":true,"metadata":{"user_id":"u"}})"),
                                             ctx());
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.model, "claude-x");
  EXPECT_EQ(r.job.prompt, rendered("<s>[system] Be terse.</s>[user] hello</s>[assistant] ok</s>[user] again</s>"
                                   "[assistant]"));
  EXPECT_EQ(r.job.max_tokens, 9);
  EXPECT_EQ(r.job.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.job.sampler.temperature, 0.5f);
  EXPECT_EQ(r.job.sampler.top_p, 0.75f);
  EXPECT_EQ(r.job.sampler.top_k, 3);
  const auto plain = weft::serve::parse_messages(
      Json::parse(R"({"max_tokens":1,"system":"S","messages":[{"role":"user","content":"x"}]})"), ctx());
  EXPECT_FALSE(plain.stream);
  EXPECT_EQ(plain.job.prompt, rendered("<s>[system] S</s>[user] x</s>[assistant]"));
}

TEST(MessagesRequest, ErrorsNameTheField) {
  const std::string user = R"("messages":[{"role":"user","content":"x"}])";
  expect_bad(messages_error("{" + user + "}"), "max_tokens", "'max_tokens' is required");
  expect_bad(messages_error(R"({"max_tokens":1e300,)" + user + "}"), "max_tokens", "'max_tokens' must be an integer");
  expect_bad(messages_error(R"({"max_tokens":"5",)" + user + "}"), "max_tokens", "'max_tokens'");
  expect_bad(messages_error(R"({"max_tokens":5,"temperature":1.5,)" + user + "}"), "temperature", "[0, 1]");
  expect_bad(messages_error(R"({"max_tokens":5,"temperature":-1,)" + user + "}"), "temperature", "[0, 1]");
  expect_bad(messages_error(R"({"max_tokens":5,"temperature":"warm",)" + user + "}"), "temperature", "'temperature'");
  expect_bad(messages_error(R"({"max_tokens":5,"top_k":"many",)" + user + "}"), "top_k", "'top_k'");
  expect_bad(messages_error(R"({"max_tokens":5,"stop_sequences":"END",)" + user + "}"), "stop_sequences",
             "'stop_sequences'");
  expect_bad(messages_error(R"({"max_tokens":5,"stop_sequences":[5],)" + user + "}"), "stop_sequences",
             "'stop_sequences'");
  expect_bad(messages_error(R"({"max_tokens":5,"messages":[]})"), "messages", "non-empty");
  expect_bad(messages_error(R"({"max_tokens":5,"messages":[{"role":"system","content":"x"}]})"), "messages",
             "messages[0].role");
  expect_bad(messages_error(R"({"max_tokens":5,"messages":[{"role":"user"}]})"), "messages", "content is required");
  expect_bad(messages_error(R"({"max_tokens":5,"messages":[{"role":"user","content":7}]})"), "messages",
             "messages[0].content");
  expect_bad(
      messages_error(R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})"),
      "messages", "messages[0].content[0] is a block of type 'image'");
  expect_bad(messages_error(R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]})"),
             "messages", "tool use is not yet served");
  expect_bad(messages_error(R"({"max_tokens":5,"system":{"a":1},)" + user + "}"), "system", "system");
  expect_bad(messages_error(R"({"max_tokens":5,"tools":{},)" + user + "}"), "tools", "'tools'");
  expect_bad(messages_error(R"("text")"), "", "JSON object");
}

// stop_reason: the model's own end, a stop sequence (which one: the first
// in the generated text), or the budget.
TEST(MessagesResponse, StopReasonAndSequence) {
  const auto& tok = *model().tok;
  weft::serve::Job job;
  job.stop = {"there", "END"};
  const std::vector<int32_t> generated = tok.encode("hello END there", false);
  ASSERT_NE(weft::serve::decoded_text(generated, tok).find("END"), std::string::npos);
  weft::serve::Event end;
  end.finished = true;
  end.finish_reason = "stop";
  auto info = weft::serve::stop_info(job, end, generated, tok);
  EXPECT_EQ(info.reason, "stop_sequence");
  EXPECT_EQ(info.sequence, "END");
  info = weft::serve::stop_info(job, end, tok.encode("hello", false), tok);
  EXPECT_EQ(info.reason, "end_turn");
  EXPECT_EQ(info.sequence, "");
  end.finish_reason = "length";
  EXPECT_EQ(weft::serve::stop_info(job, end, generated, tok).reason, "max_tokens");

  weft::serve::MessagesRequest r;
  r.job = job;
  weft::serve::Collected c;
  c.text = "hello ";
  c.tokens = generated;
  end.finish_reason = "stop";
  end.prompt_tokens = 4;
  end.completion_tokens = 3;
  c.finish = end;
  EXPECT_EQ(weft::serve::message_response(r, {"msg_1", "m"}, c, tok), Json::parse(R"({"id":"msg_1","type":"message",
      "role":"assistant","model":"m","content":[{"type":"text","text":"hello "}],"stop_reason":"stop_sequence",
      "stop_sequence":"END","usage":{"input_tokens":4,"output_tokens":3}})"));
}

// The server-sent events of one streamed reply, as (event name, data).
std::vector<std::pair<std::string, Json>> parse_sse(const std::string& text) {
  std::vector<std::pair<std::string, Json>> out;
  std::regex one(R"(event: ([a-z_]+)\ndata: ([^\n]*)\n\n)");
  size_t consumed = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), one), end; it != end; ++it) {
    EXPECT_EQ(static_cast<size_t>(it->position()), consumed) << "stray bytes in " << text;
    consumed = it->position() + it->length();
    out.emplace_back((*it)[1], Json::parse((*it)[2].str()));
  }
  EXPECT_EQ(consumed, text.size()) << text;
  return out;
}

TEST(MessagesResponse, StreamEventsInOrder) {
  const auto& tok = *model().tok;
  weft::serve::MessagesRequest r;
  r.job.prompt = {1, 2, 3};
  weft::serve::MessagesStream stream(r, {"msg_2", "m"}, tok);
  weft::serve::Event a;
  a.text = "Hi";
  a.tokens = tok.encode("Hi", false);
  weft::serve::Event end;
  end.finished = true;
  end.finish_reason = "length";
  end.prompt_tokens = 3;
  end.completion_tokens = 2;
  end.text = "!";
  std::string text = stream.events(a);
  text += stream.events(end);
  const auto events = parse_sse(text);
  std::vector<std::string> names;
  for (const auto& [name, data] : events) {
    names.push_back(name);
    EXPECT_EQ(data["type"], name);  // each data names its event
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(events[0].second["message"]["usage"]["input_tokens"], 3);
  EXPECT_EQ(events[0].second["message"]["content"], Json::array());
  EXPECT_EQ(events[1].second["content_block"], Json::parse(R"({"type":"text","text":""})"));
  EXPECT_EQ(events[2].second["delta"], Json::parse(R"({"type":"text_delta","text":"Hi"})"));
  EXPECT_EQ(events[3].second["delta"]["text"], "!");
  EXPECT_EQ(events[5].second["delta"], Json::parse(R"({"stop_reason":"max_tokens","stop_sequence":null})"));
  EXPECT_EQ(events[5].second["usage"]["output_tokens"], 2);

  weft::serve::MessagesStream failing(r, {"msg_3", "m"}, tok);
  end.finish_reason = "error";
  end.error = "worker lost";
  end.text = "";
  const auto failed = parse_sse(failing.events(end));
  ASSERT_EQ(failed.size(), 3u);
  EXPECT_EQ(failed[2].first, "error");
  EXPECT_EQ(failed[2].second["error"]["type"], "api_error");
  EXPECT_NE(failed[2].second["error"]["message"].get<std::string>().find("worker lost"), std::string::npos);
}

TEST(MessagesResponse, ErrorShape) {
  EXPECT_EQ(weft::serve::anthropic_error(ApiError(400, "invalid_request_error", "bad", "max_tokens")),
            Json::parse(R"({"type":"error","error":{"type":"invalid_request_error","message":"bad"}})"));
  EXPECT_EQ(weft::serve::anthropic_error(ApiError(401, "x", "key"))["error"]["type"], "authentication_error");
  EXPECT_EQ(weft::serve::anthropic_error(ApiError(404, "x", "no"))["error"]["type"], "not_found_error");
  EXPECT_EQ(weft::serve::anthropic_error(ApiError(429, "x", "busy"))["error"]["type"], "rate_limit_error");
  EXPECT_EQ(weft::serve::anthropic_error(ApiError(503, "x", "loading"))["error"]["type"], "overloaded_error");
  EXPECT_EQ(weft::serve::anthropic_error(ApiError(500, "x", "boom"))["error"]["type"], "api_error");
}

}  // namespace
