// Tool calls in generated text: which format a chat template's model writes
// its calls in (detected once from the template's text), and the calls
// parsed back out of a finished reply (docs/serve.md, "Tool calls").
//
//   ToolFamily f = detect_tool_family(template_source);     // once per model
//   ParsedReply p = parse_tool_calls(f, reply_text, {"get_weather"}, /*parallel=*/true);
//   if (p.calls.empty()) ...;  // plain text: p.content is the whole reply
//
// Parsing is all or nothing: a reply whose calls do not all parse (broken
// JSON, a call to a function not offered, a marker with nothing after it)
// comes back whole as text, never dropped. Pure functions: no state, safe
// on any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace weft::serve {

// The formats of the families' published chat templates:
//   llama3   {"name": N, "parameters": {...}} as the whole reply, optionally
//            after <|python_tag|>; several separated by ';' or whitespace
//   hermes   <tool_call>{"name": N, "arguments": {...}}</tool_call> blocks
//            (Qwen2.5, Qwen3, Hermes)
//   mistral  [TOOL_CALLS][{"name": N, "arguments": {...}}, ...]
//   gpt_oss  harmony: <|channel|>commentary to=functions.N <|constrain|>json<|message|>{...}<|call|>
//            (or the recipient in the header: <|start|>assistant to=functions.N<|channel|>commentary ...)
//   deepseek <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N
//            ```json {...} ```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//            (V3.1 drops "function" and the fence: N<｜tool▁sep｜>{...})
enum class ToolFamily { none, llama3, hermes, mistral, gpt_oss, deepseek };

// The family whose markers the template's text spells (checked in this
// order): "<|channel|>" with "<|call|>" → gpt_oss; "tool▁calls▁begin" →
// deepseek; "[TOOL_CALLS]" → mistral; "<tool_call>" → hermes;
// "<|start_header_id|>" with "<|python_tag|>" or "ipython" → llama3; else
// none (replies are never parsed for calls).
ToolFamily detect_tool_family(std::string_view template_source);
const char* tool_family_name(ToolFamily family);

// The marker strings a family's replies carry, as the vocabulary spells
// them. Where one is a control token (which decodes to ""), the request
// must receive its text for the parser to see it (Job::text_tokens).
std::vector<std::string> tool_call_markers(ToolFamily family);

struct ToolCall {
  std::string id;         // "call_" + 24 letters and digits; 9 of them for mistral (its template demands that)
  std::string name;
  std::string arguments;  // a JSON object's text
};

struct ParsedReply {
  std::string content;          // the text beside the calls; with no calls, the whole reply
  std::vector<ToolCall> calls;  // empty: the reply is plain text
  std::string reasoning;        // gpt-oss: the analysis channel's text of a reply with calls
};

// The calls in a finished reply. allowed: the function names offered (a
// call to any other name means the reply does not parse). parallel false:
// only the first call is kept. (A "<|constrain|>json" in a harmony header
// changes nothing: a call's body is read as JSON whatever it says.) The content of a reply with calls is the
// text before the first call (verbatim: a stream may have sent it already)
// and any text after the last one that is not only whitespace.
ParsedReply parse_tool_calls(ToolFamily family, std::string_view text, const std::vector<std::string>& allowed,
                             bool parallel);

// Where in text (a reply so far) a call may begin: a stream sends what is
// before as content and holds the rest until the reply ends. text.size()
// when no call can begin in it (a marker's first bytes at the end count).
size_t tool_call_hold_from(ToolFamily family, std::string_view text);

// A fresh id for a call of family's: unique with overwhelming probability.
std::string new_tool_call_id(ToolFamily family);

// Where the JSON value starting at text[0] ends (one past its last byte),
// scanning brackets and strings only; 0 when text does not start with a
// complete object or array. Exposed for tests.
size_t json_value_end(std::string_view text);

}  // namespace weft::serve
