// OpenAI's completion API as weft serves it: request bodies of
// /v1/completions and /v1/chat/completions checked and turned into an
// engine Job, and the engine's events turned into OpenAI's responses and
// stream chunks (docs/serve.md lists the fields taken and their ranges).
//
//   ApiContext ctx{...};                                  // tokenizer, template, limits
//   CompletionRequest r = parse_completion(body, /*chat=*/true, ctx);  // throws ApiError
//   ... engine.submit(r.job) ...
//   Json chunk = stream_chunk(r, meta, event);  // per event when r.stream
//   Json whole = full_response(r, meta, text, finished_event);
//
// Everything here is pure: no sockets, no threads (unit-tested directly).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/engine.h"
#include "serve/tool_request.h"
#include "weft/model/grammar.h"
#include "weft/model/tokenizer.h"
#include "weft/serve/chat_template.h"

namespace weft::serve {

// Request bodies keep their keys' order (tool schemas reach the template's
// tojson as the client wrote them). (Json: nlohmann::ordered_json, from
// tool_request.h.)

// An error answered in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)),
        code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  Json body() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 invalid_request_error naming the parameter.
[[noreturn]] void bad_request(const std::string& param, const std::string& message);

// What the parser needs from the server.
struct ApiContext {
  const model::Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;
  std::string bos_token, eos_token;  // the template's variables
  int64_t n_vocab = 0;
  int64_t slot_context = 0;  // a prompt and its completion fit this many tokens
  int max_tokens_limit = 0;  // the most tokens one request may ask for (0: no limit but the context)
  int max_choices = 1;       // the most choices (n) one request may ask for
  ToolFamily tool_family = ToolFamily::none;  // the template's (detect_tool_family)
  std::vector<int32_t> tool_marker_tokens;    // its markers that are control tokens (Job::text_tokens)
};

struct CompletionRequest {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  std::string model;
  int n = 1;           // choices, each job's copy with choice_seed(job.sampler.seed, i)
  ToolOptions tools;   // chat: replies parsed for calls when tools.parse
  ToolFamily tool_family = ToolFamily::none;
  Job job;
};

// The sampler seed of choice i of a request seeded with seed: seed itself
// for choice 0 (so n = 1 and choice 0 agree), else SplitMix64's output for
// seed + i, which scatters neighbouring seeds apart.
uint64_t choice_seed(uint64_t seed, int i);

// Checks body (a parsed JSON value) and builds the request. Throws ApiError
// (400) naming the first parameter out of range or of the wrong type, a
// prompt that does not fit the context, or a template that raised; for a
// chat, as chat_prompt() does, render_control bounding its template's render.
CompletionRequest parse_completion(const Json& body, bool chat, const ApiContext& ctx,
                                   const RenderControl& render_control = {});

// The request's output constraint, null when none: `response_format`
// {"type": "json_object"} (any JSON object; with a "schema", that schema's),
// {"type": "json_schema", "json_schema": {"schema": ...}} (the schema's
// values; "strict" is always so), or llama.cpp's `grammar` (GBNF text) or
// `json_schema` fields. Throws ApiError 400 naming the parameter and the
// fault (the schema's place, the grammar's line and column) for an
// invalid, unsupported or oversized schema or grammar, or two constraints.
std::shared_ptr<const model::Grammar> read_output_constraint(const Json& body);

// The prompt of a chat: messages rendered by the template, encoded with the
// template's own markup as special tokens and each message's content as
// plain text (so "<|im_end|>" typed by a user never becomes a control
// token). Throws ApiError: 400 for malformed messages or a template error,
// 413 for a template that passed a render limit, 503 when render_control's
// deadline passed or its cancel check said the client left while rendering.
std::vector<int32_t> chat_prompt(const Json& messages, const ApiContext& ctx, const Json& extra = Json::object(),
                                 const RenderControl& render_control = {});

// Identity of one response: its id, creation time and the model's name.
struct ResponseMeta {
  std::string id;
  int64_t created = 0;
  std::string model;
};

// The collected response of a non-streamed request: text, tokens and the
// finishing event's counts.
struct Collected {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> chosen;
  std::vector<std::vector<TokenLogprob>> top;
  Event finish;
  void add(const Event& e);
};

// The whole response: one choice per Collected (index i), usage over all
// of them (the prompt counted once). A chat reply of a request whose
// tools.parse is set, which ended with "stop" and whose calls parse, is a
// message with tool_calls and finish_reason "tool_calls".
Json full_response(const CompletionRequest& r, const ResponseMeta& meta, const std::vector<Collected>& choices,
                   const model::Tokenizer& tok);
// One stream chunk of choice index for an event's text (and, with
// finished, its finish_reason); the first chunk of a chat's choice also
// carries the role; tool_calls, when not null, is the delta's tool_calls.
Json stream_chunk(const CompletionRequest& r, const ResponseMeta& meta, const Event& e, bool first,
                  const model::Tokenizer& tok, int index = 0, const Json& tool_calls = Json());
// The usage-only chunk that stream_options.include_usage adds last: the
// prompt of choice 0 and the completions of all (finished: one per choice).
Json usage_chunk(const CompletionRequest& r, const ResponseMeta& meta, const std::vector<Event>& finished);

// calls as OpenAI's message.tool_calls; indexed: with each one's index, as
// a stream's delta carries them.
Json tool_calls_json(const std::vector<ToolCall>& calls, bool indexed);

// "stop", "tool_calls" or "length" as OpenAI names them (the engine's
// timeout and cancellation end a request as "length" did: the budget ran out).
std::string openai_finish_reason(const std::string& engine_reason);

// JSON text with invalid UTF-8 replaced by U+FFFD (generated bytes may be
// an incomplete character at the end of a request).
std::string dump_json(const Json& j);

}  // namespace weft::serve
