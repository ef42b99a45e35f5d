// Request bodies of /v1/completions and /v1/chat/completions into engine
// Jobs (openai_api.h). Every field is checked for type and range before
// use: a body is a stranger's.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "serve/openai_api.h"
#include "weft/core/error.h"

namespace weft::serve {

Json ApiError::body() const {
  Json e = Json::object();
  e["message"] = what();
  e["type"] = type_;
  e["param"] = param_.empty() ? Json(nullptr) : Json(param_);
  e["code"] = code_.empty() ? Json(nullptr) : Json(code_);
  return Json{{"error", e}};
}

void bad_request(const std::string& param, const std::string& message) {
  throw ApiError(400, "invalid_request_error", message, param);
}

namespace {

constexpr size_t kMaxStops = 16;
constexpr size_t kMaxStopBytes = 256;
constexpr int kMaxTopLogprobs = 20;

const Json* field(const Json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

// 2, 0.5, -2: a bound as people write it.
std::string bound(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

double number(const Json& body, const char* name, double fallback, double lo, double hi) {
  const Json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) bad_request(name, std::string("'") + name + "' must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    bad_request(name, std::string("'") + name + "' must be a number in [" + bound(lo) + ", " + bound(hi) + "]");
  return d;
}

int64_t integer(const Json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const Json* v = field(body, name);
  if (!v) return fallback;
  // Appended in place: GCC 12 misreads "[" + std::string&& as an
  // overlapping copy (-Wrestrict, GCC bug 105329).
  const std::string range = std::string("[").append(std::to_string(lo)).append(", ").append(std::to_string(hi)) + "]";
  if (v->is_number_integer() && !v->is_number_unsigned()) {
    const int64_t i = v->get<int64_t>();
    if (i < lo || i > hi) bad_request(name, std::string("'") + name + "' must be an integer in " + range);
    return i;
  }
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();  // (JSON's non-negative integers parse as unsigned)
    if (u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo))) bad_request(name, std::string("'") + name + "' must be an integer in " + range);
    return static_cast<int64_t>(u);
  }
  if (v->is_number_float()) {  // 5.0 is 5 (converted only when it fits an int64_t)
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= -0x1p63 && d < 0x1p63) {
      const auto i = static_cast<int64_t>(d);
      if (i >= lo && i <= hi) return i;
    }
  }
  bad_request(name, std::string("'") + name + "' must be an integer in " + range);
}

bool boolean(const Json& body, const char* name, bool fallback) {
  const Json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) bad_request(name, std::string("'") + name + "' must be true or false");
  return v->get<bool>();
}

std::vector<std::string> stops(const Json& body) {
  const Json* v = field(body, "stop");
  std::vector<std::string> out;
  if (!v) return out;
  auto add = [&](const Json& s) {
    if (!s.is_string()) bad_request("stop", "'stop' must be a string or an array of strings");
    std::string text = s.get<std::string>();
    if (text.size() > kMaxStopBytes)
      bad_request("stop", "a stop string is longer than " + std::to_string(kMaxStopBytes) + " bytes");
    if (!text.empty()) out.push_back(std::move(text));
  };
  if (v->is_array()) {
    if (v->size() > kMaxStops) bad_request("stop", "at most " + std::to_string(kMaxStops) + " stop strings");
    for (const Json& s : *v) add(s);
  } else {
    add(*v);
  }
  return out;
}

// A completion's prompt: a string, or an array of token ids, or an array
// holding one of either (OpenAI's batch form with one element).
std::vector<int32_t> completion_prompt(const Json& body, const ApiContext& ctx) {
  const Json* p = field(body, "prompt");
  if (!p) bad_request("prompt", "'prompt' is required");
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    const std::string& text = p->get_ref<const std::string&>();
    if (text.empty()) bad_request("prompt", "'prompt' is empty");
    return ctx.tokenizer->encode(text, ctx.tokenizer->add_bos());
  }
  if (p->is_array()) {
    std::vector<int32_t> ids;
    for (const Json& t : *p) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= ctx.n_vocab)
        bad_request("prompt", "a prompt token must be an id in [0, " + std::to_string(ctx.n_vocab) + ")");
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    if (ids.empty()) bad_request("prompt", "'prompt' is empty");
    return ids;
  }
  bad_request("prompt", "'prompt' must be a string or an array of token ids (one prompt per request)");
}

// The sampler's fields, in OpenAI's names (and llama.cpp's where it has
// its own), each within its range.
model::SamplerOptions read_sampler(const Json& body, const ApiContext& ctx) {
  model::SamplerOptions s;
  s.temperature = static_cast<float>(number(body, "temperature", 1.0, 0.0, 2.0));
  s.top_p = static_cast<float>(number(body, "top_p", 1.0, 0.0, 1.0));
  if (s.top_p <= 0.f) s.top_p = std::numeric_limits<float>::min();  // the most likely token alone
  s.top_k = static_cast<int>(integer(body, "top_k", 0, 0, ctx.n_vocab));
  s.min_p = static_cast<float>(number(body, "min_p", 0.0, 0.0, 1.0));
  const double repeat_penalty = number(body, "repeat_penalty", 1.0, 0.01, 10.0);  // llama.cpp's name
  s.repetition_penalty = static_cast<float>(number(body, "repetition_penalty", repeat_penalty, 0.01, 10.0));
  s.repetition_window = 64;
  if (const Json* seed = field(body, "seed")) {
    if (seed->is_number_unsigned()) s.seed = seed->get<uint64_t>();
    else s.seed = static_cast<uint64_t>(integer(body, "seed", 0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  } else {
    s.seed = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
  }
  s.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", 0.0, -2.0, 2.0));
  s.presence_penalty = static_cast<float>(number(body, "presence_penalty", 0.0, -2.0, 2.0));
  return s;
}

// logprobs: chat takes a boolean and top_logprobs; completions an integer.
void read_logprobs(const Json& body, bool chat, CompletionRequest& r) {
  Job& job = r.job;
  if (chat) {
    r.logprobs = boolean(body, "logprobs", false);
    const int64_t top = integer(body, "top_logprobs", 0, 0, kMaxTopLogprobs);
    if (field(body, "top_logprobs") && !r.logprobs) bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (r.logprobs) job.top_logprobs = static_cast<int>(top);
  } else {
    if (field(body, "logprobs")) {
      r.logprobs = true;
      job.top_logprobs = static_cast<int>(integer(body, "logprobs", 0, 0, kMaxTopLogprobs));
    }
  }
  if (field(body, "n_probs")) {  // llama.cpp's name
    r.logprobs = true;
    job.top_logprobs = static_cast<int>(integer(body, "n_probs", 0, 0, kMaxTopLogprobs));
  }
}

}  // namespace

CompletionRequest parse_completion(const Json& body, bool chat, const ApiContext& ctx,
                                   const RenderControl& render_control) {
  if (!body.is_object()) bad_request("", "the request body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  if (const Json* m = field(body, "model")) {
    if (!m->is_string()) bad_request("model", "'model' must be a string");
    r.model = m->get<std::string>();
  }
  if (const Json* n = field(body, "n"); n && n->is_number() && n->get<double>() > ctx.max_choices)
    bad_request("n", "'n' must be at most " + std::to_string(ctx.max_choices) + " (this server's --max-choices)");
  r.n = static_cast<int>(integer(body, "n", 1, 1, std::max(1, ctx.max_choices)));
  r.stream = boolean(body, "stream", false);
  if (const Json* so = field(body, "stream_options")) {
    if (!so->is_object()) bad_request("stream_options", "'stream_options' must be an object");
    r.include_usage = boolean(*so, "include_usage", false);
  }

  Job& job = r.job;
  if (chat) {
    const Json* messages = field(body, "messages");
    if (!messages) bad_request("messages", "'messages' is required");
    Json extra = Json::object();
    if (const Json* v = field(body, "chat_template_kwargs")) extra["chat_template_kwargs"] = *v;
    r.tools = read_tool_options(body, ctx.tool_family, extra);
    r.tool_family = ctx.tool_family;
    if (r.tools.parse) job.text_tokens = ctx.tool_marker_tokens;
    job.prompt = chat_prompt(*messages, ctx, extra, render_control);
  } else {
    job.prompt = completion_prompt(body, ctx);
  }
  const int64_t room = ctx.slot_context - static_cast<int64_t>(job.prompt.size());
  if (room < 0)
    throw ApiError(400, "invalid_request_error",
                   "the prompt's " + std::to_string(job.prompt.size()) + " tokens do not fit the context of " +
                       std::to_string(ctx.slot_context) + " tokens per request",
                   chat ? "messages" : "prompt", "context_length_exceeded");
  // The operator's limit (--max-tokens) is a hard one; beyond the context
  // a request ends with "length" where the context is full. Absent: as
  // much as the context holds (OpenAI's legacy completions default to 16,
  // which no chat client expects).
  const int64_t limit = ctx.max_tokens_limit > 0 ? ctx.max_tokens_limit : int64_t{1} << 30;
  const char* max_key = field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  const int64_t asked = integer(body, max_key, std::min<int64_t>(limit, room + 1), 0, limit);
  job.max_tokens = static_cast<int>(std::min<int64_t>(asked, room + 1));

  job.sampler = read_sampler(body, ctx);
  job.stop = stops(body);
  job.ignore_eos = boolean(body, "ignore_eos", false);
  job.grammar = read_output_constraint(body);

  read_logprobs(body, chat, r);
  return r;
}

}  // namespace weft::serve
