// What the foreign APIs (Ollama's, Anthropic's) share: a request in another
// API's words is rewritten into an OpenAI body and checked by the one
// OpenAI mapping (openai_api.h), so that every API takes the same sampling
// options with the same ranges and builds the same engine Job; an error
// then names the field as the client wrote it.
//
//   Json openai = {{"messages", ...}, {"max_tokens", 16}};
//   CompletionRequest r = parse_bridged(openai, /*chat=*/true,
//                                       {{"max_tokens", "options.num_predict"}}, ctx, render);
//
// Pure: no sockets, no threads (unit-tested through its callers).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "serve/openai_api.h"

namespace weft::serve {

// OpenAI's parameter name -> the client's name for it.
using FieldNames = std::vector<std::pair<std::string, std::string>>;

// parse_completion(openai_body, chat, ctx, render_control), its ApiErrors
// rethrown with each OpenAI name in names replaced by the client's (in the
// error's param and in its message's 'quoted' names).
CompletionRequest parse_bridged(const Json& openai_body, bool chat, const FieldNames& names, const ApiContext& ctx,
                                const RenderControl& render_control = {});

// The value of body[name] when present and not null, else nullptr.
const Json* field_of(const Json& body, const char* name);

// The bytes tokens decode to, one token after another: the text the
// engine matched a request's stop strings against.
std::string decoded_text(const std::vector<int32_t>& tokens, const model::Tokenizer& tok);

// Which stop string ended a request: the one found first in the decoded
// text of every token it generated ("" when none is there, e.g. the model
// ended its reply itself).
std::string matched_stop(const std::vector<std::string>& stops, const std::string& decoded);

}  // namespace weft::serve
