// Ollama's /api/chat and /api/generate bodies into engine Jobs, and events
// into its replies (ollama_api.h). Facts from Ollama's docs/api.md.
#include "serve/ollama_api.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "serve/api_bridge.h"

namespace weft::serve {

namespace {

// Ollama's option -> OpenAI's field of the same meaning (the OpenAI mapping
// checks their types and ranges).
constexpr std::pair<const char*, const char*> kOptions[] = {
    {"temperature", "temperature"},
    {"top_k", "top_k"},
    {"top_p", "top_p"},
    {"min_p", "min_p"},
    {"seed", "seed"},
    {"stop", "stop"},
    {"repeat_penalty", "repeat_penalty"},
    {"presence_penalty", "presence_penalty"},
    {"frequency_penalty", "frequency_penalty"},
    {"num_predict", "max_tokens"},
};

// A message of /api/chat as the OpenAI mapping reads it.
Json chat_message(const Json& m, size_t i) {
  const std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object() || !field_of(m, "role") || !m["role"].is_string())
    bad_request("messages", where + " must be an object with a string 'role'");
  if (const Json* images = field_of(m, "images"); images && !(images->is_array() && images->empty()))
    bad_request("messages", where + ".images: this server reads text only (no images)");
  Json out = Json::object();
  out["role"] = m["role"];
  if (const Json* content = field_of(m, "content")) {
    if (!content->is_string()) bad_request("messages", where + ".content must be a string");
    out["content"] = *content;
  } else {
    out["content"] = "";
  }
  for (const char* key : {"tool_calls", "tool_name"})
    if (const Json* v = field_of(m, key)) out[key == std::string("tool_name") ? "name" : key] = *v;
  return out;
}

// num_predict: -1 (no limit) and -2 (fill the context) both mean as much as
// the context holds, which is the OpenAI mapping's default.
bool unlimited(const Json& v) {
  return v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0;
}

}  // namespace

namespace {

// The fields beside the conversation: model, stream, format's form, and
// those this server refuses when they ask for something.
void read_envelope(const Json& body, OllamaRequest& r) {
  if (const Json* m = field_of(body, "model")) {
    if (!m->is_string()) bad_request("model", "'model' must be a string");
    r.model = m->get<std::string>();
  }
  if (const Json* s = field_of(body, "stream")) {
    if (!s->is_boolean()) bad_request("stream", "'stream' must be true or false");
    r.stream = s->get<bool>();
  }
  if (const Json* f = field_of(body, "format");
      f && !(f->is_string() && (f->get<std::string>().empty() || f->get<std::string>() == "json")) && !f->is_object())
    bad_request("format", "'format' must be \"json\" or a JSON schema object");
  for (const char* unsupported : {"suffix", "images", "context", "template"})
    if (const Json* v = field_of(body, unsupported);
        v && !(v->is_string() && v->get<std::string>().empty()) && !(v->is_array() && v->empty()))
      bad_request(unsupported, std::string("'") + unsupported + "' is not supported by this server");
}

}  // namespace

OllamaRequest parse_ollama(const Json& body, bool chat, const ApiContext& ctx, const RenderControl& render_control) {
  if (!body.is_object()) bad_request("", "the request body must be a JSON object");
  OllamaRequest r;
  r.chat = chat;
  read_envelope(body, r);

  Json oa = Json::object();
  bool as_chat = chat;
  if (chat) {
    const Json* messages = field_of(body, "messages");
    if (messages && !messages->is_array()) bad_request("messages", "'messages' must be an array");
    if (!messages || messages->empty()) {
      r.load_only = true;
      return r;
    }
    Json converted = Json::array();
    for (size_t i = 0; i < messages->size(); ++i) converted.push_back(chat_message((*messages)[i], i));
    oa["messages"] = std::move(converted);
    if (const Json* tools = field_of(body, "tools")) oa["tools"] = *tools;
  } else {
    const Json* prompt = field_of(body, "prompt");
    if (prompt && !prompt->is_string()) bad_request("prompt", "'prompt' must be a string");
    if (!prompt || prompt->get<std::string>().empty()) {
      r.load_only = true;
      return r;
    }
    const Json* system = field_of(body, "system");
    if (system && !system->is_string()) bad_request("system", "'system' must be a string");
    const Json* raw = field_of(body, "raw");
    if (raw && !raw->is_boolean()) bad_request("raw", "'raw' must be true or false");
    if (raw && raw->get<bool>()) {  // the prompt as is, no template
      as_chat = false;
      oa["prompt"] = *prompt;
    } else {  // one user turn, rendered by the chat template
      as_chat = true;
      Json messages = Json::array();
      if (system && !system->get<std::string>().empty()) messages.push_back({{"role", "system"}, {"content", *system}});
      messages.push_back({{"role", "user"}, {"content", *prompt}});
      oa["messages"] = std::move(messages);
    }
  }

  FieldNames names;
  if (!chat && as_chat) names.emplace_back("messages", "prompt");
  // format: "json" (any object) or a JSON schema, as OpenAI's response_format.
  if (const Json* f = field_of(body, "format"); f && (f->is_object() || *f == "json")) {
    oa["response_format"] = f->is_object() ? Json{{"type", "json_schema"}, {"json_schema", {{"schema", *f}}}}
                                           : Json{{"type", "json_object"}};
    names.emplace_back("response_format", "format");
  }
  const Json* options = field_of(body, "options");
  if (options && !options->is_object()) bad_request("options", "'options' must be an object");
  if (options) {
    for (const auto& [ollama, openai] : kOptions) {
      const Json* v = field_of(*options, ollama);
      names.emplace_back(openai, std::string("options.") + ollama);
      if (!v || (std::string(ollama) == "num_predict" && unlimited(*v))) continue;
      oa[openai] = *v;
    }
  }
  CompletionRequest c = parse_bridged(oa, as_chat, names, ctx, render_control);
  r.job = std::move(c.job);
  // repeat_last_n: the penalties' window (-1: the whole context).
  if (const Json* n = options ? field_of(*options, "repeat_last_n") : nullptr) {
    if (!n->is_number_integer() || (n->is_number_unsigned() && n->get<uint64_t>() > 1u << 30) ||
        (!n->is_number_unsigned() && (n->get<int64_t>() < -1 || n->get<int64_t>() > int64_t{1} << 30)))
      bad_request("options.repeat_last_n", "'options.repeat_last_n' must be an integer in [-1, 1073741824]");
    const int64_t w = n->get<int64_t>();
    r.job.sampler.repetition_window = static_cast<int>(w < 0 ? ctx.slot_context : w);
  }
  return r;
}

namespace {

Json envelope(const OllamaRequest& r, const OllamaMeta& meta, const std::string& text, bool done) {
  Json out = Json::object();
  out["model"] = meta.model;
  out["created_at"] = meta.created_at;
  if (r.chat)
    out["message"] = {{"role", "assistant"}, {"content", text}};
  else
    out["response"] = text;
  out["done"] = done;
  return out;
}

int64_t nanoseconds(double seconds) {
  return static_cast<int64_t>(seconds * 1e9);
}

}  // namespace

Json ollama_piece(const OllamaRequest& r, const OllamaMeta& meta, const std::string& text) {
  return envelope(r, meta, text, false);
}

Json ollama_done(const OllamaRequest& r, const OllamaMeta& meta, const std::string& text, const Event& finish,
                 double total_seconds) {
  Json out = envelope(r, meta, text, true);
  out["done_reason"] = finish.finish_reason == "stop" ? "stop" : "length";
  out["total_duration"] = nanoseconds(total_seconds);
  out["load_duration"] = 0;  // the model was loaded when the server started
  out["prompt_eval_count"] = finish.prompt_tokens;
  out["prompt_eval_duration"] = nanoseconds(finish.prompt_seconds);
  out["eval_count"] = finish.completion_tokens;
  out["eval_duration"] = nanoseconds(finish.decode_seconds);
  return out;
}

Json ollama_loaded(const OllamaRequest& r, const OllamaMeta& meta) {
  Json out = envelope(r, meta, "", true);
  out["done_reason"] = "load";
  return out;
}

Json ollama_error(const ApiError& e) {
  return Json{{"error", e.what()}};
}

std::string ollama_time() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  gmtime_r(&t, &utc);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count() % 1000000000;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<long long>(ns));
  return buf;
}

}  // namespace weft::serve
