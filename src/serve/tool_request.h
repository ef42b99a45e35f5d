// OpenAI's tool fields of a chat request -- `tools`, `tool_choice`,
// `parallel_tool_calls` -- checked and turned into what the chat template
// reads and what the reply's parser needs; and the tool calls of earlier
// assistant turns shaped as the family's template reads them
// (docs/serve.md, "Tool calls").
//
//   Json extra = Json::object();                       // the template's extra variables
//   ToolOptions t = read_tool_options(body, family, extra);   // throws ApiError (400)
//   ... render with extra; if (t.parse) parse_tool_calls(family, reply, t.names, t.parallel)
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/tool_calls.h"

namespace weft::serve {

using Json = nlohmann::ordered_json;

// At most this many tools per request (OpenAI's limit).
constexpr size_t kMaxTools = 128;

struct ToolOptions {
  // Replies are parsed for calls: tools were offered, tool_choice is not
  // "none", and the template's family is known.
  bool parse = false;
  std::vector<std::string> names;  // the functions a call may name (tool_choice's alone when it names one)
  bool parallel = true;            // parallel_tool_calls: false keeps only a reply's first call
};

// Checks body's tools (an array of at most kMaxTools {"type": "function",
// "function": {"name", ...}} with distinct names of 1-64 letters, digits,
// '_', '-' or '.'), tool_choice ("none", "auto", "required", or
// {"type": "function", "function": {"name": N}} naming one of the tools)
// and parallel_tool_calls (a boolean); throws ApiError(400) naming the
// field. Sets extra["tools"] (absent with "none"; only the named one when
// tool_choice names one) and extra["tool_choice"] for the template.
ToolOptions read_tool_options(const Json& body, ToolFamily family, Json& extra);

// Earlier assistant turns' tool_calls as the family's template reads them:
// OpenAI sends each call's function.arguments as JSON text; the published
// templates of Llama 3.x, Qwen, Mistral and gpt-oss apply tojson to an
// object (as Hugging Face's chat format has it), DeepSeek's concatenates
// the text. Text that is a JSON object becomes that object for all
// families but deepseek; anything else is left as sent. For deepseek, an
// assistant message with tool_calls and empty content gets content null:
// DeepSeek-R1's template renders the calls only when content is none.
void tool_history_for_template(Json& messages, ToolFamily family);

}  // namespace weft::serve
