// Anthropic's Messages API bodies into engine Jobs, and events into its
// message and stream events (anthropic_api.h). Facts from Anthropic's
// public Messages API reference.
#include "serve/anthropic_api.h"

#include "serve/api_bridge.h"

namespace weft::serve {

namespace {

constexpr size_t kMaxStopSequences = 16;  // as the OpenAI mapping's 'stop'

// The parameter a place in the body belongs to: "messages" for
// "messages[2].content".
std::string param_of(const std::string& where) {
  return where.substr(0, where.find_first_of("[."));
}

// Text blocks' text joined; any other block is refused naming where it is.
std::string text_blocks(const Json& blocks, const std::string& where) {
  const std::string param = param_of(where);
  std::string text;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Json& b = blocks[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!b.is_object() || !field_of(b, "type") || !b["type"].is_string())
      bad_request(param, at + " must be a content block with a string 'type'");
    const std::string type = b["type"].get<std::string>();
    if (type != "text")
      bad_request(param, at + " is a block of type '" + type + "': this server takes text blocks only (" +
                             (type == "tool_use" || type == "tool_result" ? "tool use is not yet served"
                                                                          : "it reads text only") +
                             ")");
    if (!field_of(b, "text") || !b["text"].is_string()) bad_request(param, at + ".text must be a string");
    text += b["text"].get<std::string>();
  }
  return text;
}

// A string, or an array of text blocks, as text.
std::string content_of(const Json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) return text_blocks(v, where);
  bad_request(param_of(where), where + " must be a string or an array of content blocks");
}

// Anthropic's tools ({name, description, input_schema}) as the OpenAI
// functions chat templates render.
Json openai_tools(const Json& tools) {
  if (!tools.is_array()) bad_request("tools", "'tools' must be an array");
  Json out = Json::array();
  for (const Json& t : tools) {
    if (!t.is_object() || !field_of(t, "name") || !t["name"].is_string())
      bad_request("tools", "each tool must be an object with a string 'name'");
    Json fn = {{"name", t["name"]}};
    if (const Json* d = field_of(t, "description")) fn["description"] = *d;
    if (const Json* s = field_of(t, "input_schema")) fn["parameters"] = *s;
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

std::string sse(const char* event, const Json& data) {
  return std::string("event: ") + event + "\ndata: " + dump_json(data) + "\n\n";
}

Json usage(int input_tokens, int output_tokens) {
  return Json{{"input_tokens", input_tokens}, {"output_tokens", output_tokens}};
}

Json stop_fields(Json out, const StopInfo& s) {
  out["stop_reason"] = s.reason;
  out["stop_sequence"] = s.sequence.empty() ? Json(nullptr) : Json(s.sequence);
  return out;
}

}  // namespace

MessagesRequest parse_messages(const Json& body, const ApiContext& ctx, const RenderControl& render_control) {
  if (!body.is_object()) bad_request("", "the request body must be a JSON object");
  MessagesRequest r;
  if (const Json* m = field_of(body, "model")) {
    if (!m->is_string()) bad_request("model", "'model' must be a string");
    r.model = m->get<std::string>();
  }
  if (!field_of(body, "max_tokens")) bad_request("max_tokens", "'max_tokens' is required");
  // Anthropic's range, narrower than OpenAI's [0, 2].
  if (const Json* t = field_of(body, "temperature");
      t && t->is_number() && !(t->get<double>() >= 0.0 && t->get<double>() <= 1.0))
    bad_request("temperature", "'temperature' must be a number in [0, 1]");

  Json oa = Json::object();
  Json messages = Json::array();
  if (const Json* system = field_of(body, "system")) {
    const std::string text = content_of(*system, "system");
    if (!text.empty()) messages.push_back({{"role", "system"}, {"content", text}});
  }
  const Json* turns = field_of(body, "messages");
  if (!turns || !turns->is_array() || turns->empty()) bad_request("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < turns->size(); ++i) {
    const Json& m = (*turns)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !field_of(m, "role") || !(m["role"] == "user" || m["role"] == "assistant"))
      bad_request("messages", where + ".role must be \"user\" or \"assistant\"");
    if (!field_of(m, "content")) bad_request("messages", where + ".content is required");
    messages.push_back({{"role", m["role"]}, {"content", content_of(m["content"], where + ".content")}});
  }
  oa["messages"] = std::move(messages);
  if (const Json* tools = field_of(body, "tools")) oa["tools"] = openai_tools(*tools);
  if (const Json* stops = field_of(body, "stop_sequences")) {
    if (!stops->is_array()) bad_request("stop_sequences", "'stop_sequences' must be an array of strings");
    if (stops->size() > kMaxStopSequences)
      bad_request("stop_sequences", "at most " + std::to_string(kMaxStopSequences) + " stop sequences");
    oa["stop"] = *stops;
  }
  for (const char* key : {"max_tokens", "temperature", "top_p", "top_k", "stream"})
    if (const Json* v = field_of(body, key)) oa[key] = *v;
  // Anthropic's default temperature is 1, as the OpenAI mapping's.
  CompletionRequest c = parse_bridged(oa, true, {{"stop", "stop_sequences"}}, ctx, render_control);
  r.stream = c.stream;
  r.job = std::move(c.job);
  return r;
}

StopInfo stop_info(const Job& job, const Event& finish, const std::vector<int32_t>& generated,
                   const model::Tokenizer& tok) {
  if (finish.finish_reason != "stop") return {"max_tokens", ""};
  std::string sequence = job.stop.empty() ? "" : matched_stop(job.stop, decoded_text(generated, tok));
  return {sequence.empty() ? "end_turn" : "stop_sequence", sequence};
}

Json message_response(const MessagesRequest& r, const MessagesMeta& meta, const Collected& c,
                      const model::Tokenizer& tok) {
  Json out = {{"id", meta.id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", meta.model},
              {"content", Json::array({{{"type", "text"}, {"text", c.text}}})}};
  out = stop_fields(std::move(out), stop_info(r.job, c.finish, c.tokens, tok));
  out["usage"] = usage(c.finish.prompt_tokens, c.finish.completion_tokens);
  return out;
}

std::string MessagesStream::events(const Event& e) {
  std::string out;
  if (!started_) {
    started_ = true;
    Json message = {{"id", meta_.id},           {"type", "message"},
                    {"role", "assistant"},      {"model", meta_.model},
                    {"content", Json::array()}, {"stop_reason", nullptr},
                    {"stop_sequence", nullptr}, {"usage", usage(static_cast<int>(job_.prompt.size()), 0)}};
    out += sse("message_start", {{"type", "message_start"}, {"message", message}});
    out += sse("content_block_start",
               {{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}});
  }
  generated_.insert(generated_.end(), e.tokens.begin(), e.tokens.end());
  if (!e.text.empty())
    out += sse("content_block_delta",
               {{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", e.text}}}});
  if (!e.finished) return out;
  if (e.finish_reason == "error" || e.finish_reason == "cancelled") {
    const ApiError err = e.finish_reason == "error"
                             ? ApiError(500, "server_error", "generation failed: " + e.error)
                             : ApiError(503, "unavailable_error", "the request was cancelled: the server is stopping");
    return out + sse("error", anthropic_error(err));
  }
  out += sse("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
  Json delta = stop_fields(Json::object(), stop_info(job_, e, generated_, tok_));
  out += sse("message_delta",
             {{"type", "message_delta"}, {"delta", delta}, {"usage", usage(e.prompt_tokens, e.completion_tokens)}});
  out += sse("message_stop", {{"type", "message_stop"}});
  return out;
}

Json anthropic_error(const ApiError& e) {
  const int s = e.status();
  const char* type = s == 400   ? "invalid_request_error"
                     : s == 401 ? "authentication_error"
                     : s == 403 ? "permission_error"
                     : s == 404 ? "not_found_error"
                     : s == 413 ? "request_too_large"
                     : s == 429 ? "rate_limit_error"
                     : s == 503 ? "overloaded_error"
                     : s >= 500 ? "api_error"
                                : "invalid_request_error";
  return Json{{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

}  // namespace weft::serve
