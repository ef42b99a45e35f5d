// A chat's messages into prompt tokens (openai_api.h, chat_prompt): checked,
// rendered by the model's template, and encoded so that only the template's
// own markup can become control tokens.
#include <algorithm>
#include <chrono>
#include <random>
#include <string_view>

#include "serve/openai_api.h"
#include "weft/core/error.h"

namespace weft::serve {

namespace {

constexpr size_t kMaxMessages = 4096;

// A message's content as text: a string, null, or text parts.
std::string content_text(const Json& content) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (content.is_array()) {
    std::string text;
    for (const Json& part : content) {
      if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
          !part["text"].is_string())
        bad_request("messages", "content parts must be {\"type\": \"text\", \"text\": \"...\"} (this model reads text only)");
      text += part["text"].get<std::string>();
    }
    return text;
  }
  bad_request("messages", "a message's content must be a string, an array of text parts, or null");
}

// The messages as the template reads them: role and content strings, and
// the tool fields templates use passed through as given.
Json normalize(const Json& messages, std::vector<std::string>& contents) {
  if (!messages.is_array() || messages.empty()) bad_request("messages", "'messages' must be a non-empty array");
  if (messages.size() > kMaxMessages)
    bad_request("messages", "at most " + std::to_string(kMaxMessages) + " messages per request");
  Json out = Json::array();
  for (const Json& m : messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      bad_request("messages", "each message must be an object with a string 'role'");
    Json n = Json::object();
    // OpenAI's newer "developer" role is what templates call "system".
    n["role"] = m["role"] == "developer" ? Json("system") : m["role"];
    n["content"] = content_text(m.contains("content") ? m["content"] : Json(nullptr));
    contents.push_back(n["content"].get<std::string>());
    for (const char* key : {"name", "tool_calls", "tool_call_id", "reasoning_content"})
      if (m.contains(key) && !m[key].is_null()) n[key] = m[key];
    out.push_back(std::move(n));
  }
  return out;
}

// The template's text for vars, its failures answered as OpenAI errors: a
// render limit 413; the request's deadline, or its client gone, 503 (the
// template stops at either: Error(disconnected)); the template raising 400.
std::string render_prompt(const ChatTemplate& tpl, const Json& vars, const RenderControl& control) {
  try {
    return tpl.render(vars, control);
  } catch (const Error& e) {
    const std::string what = std::string("the chat template: ") + e.what();
    if (e.kind() == ErrorKind::disconnected && std::chrono::steady_clock::now() >= control.deadline)
      throw ApiError(503, "unavailable_error",
                     "the chat template did not finish rendering within the request's timeout (" + what + ")",
                     "messages", "timeout");
    if (e.kind() == ErrorKind::disconnected)
      throw ApiError(503, "unavailable_error",
                     "the request was cancelled while rendering: its client left (" + what + ")", "messages");
    throw ApiError(e.kind() == ErrorKind::out_of_memory ? 413 : 400, "invalid_request_error", what, "messages");
  }
}

}  // namespace

std::vector<int32_t> chat_prompt(const Json& messages, const ApiContext& ctx, const Json& extra,
                                 const RenderControl& render_control) {
  std::vector<std::string> contents;
  Json vars = Json::object();
  vars["messages"] = normalize(messages, contents);
  tool_history_for_template(vars["messages"], ctx.tool_family);
  vars["add_generation_prompt"] = true;
  vars["bos_token"] = ctx.bos_token;
  vars["eos_token"] = ctx.eos_token;
  if (extra.contains("tools")) vars["tools"] = extra["tools"];
  if (extra.contains("tool_choice")) vars["tool_choice"] = extra["tool_choice"];
  if (extra.contains("chat_template_kwargs")) {
    if (!extra["chat_template_kwargs"].is_object())
      bad_request("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    for (const auto& [k, v] : extra["chat_template_kwargs"].items())
      if (k != "messages") vars[k] = v;
  }
  std::string text = render_prompt(*ctx.chat_template, vars, render_control);
  const model::Tokenizer& tok = *ctx.tokenizer;
  std::vector<int32_t> ids;
  const std::string_view bos = ctx.bos_token;
  const bool starts_with_bos = !bos.empty() && std::string_view(text).substr(0, bos.size()) == bos;
  if (tok.add_bos() && !starts_with_bos && tok.bos() >= 0) ids.push_back(tok.bos());
  // Most chats: no content spells a special token, and the rendered text
  // encodes in one piece with the template's markup recognised.
  std::vector<bool> spells_special;
  for (const std::string& c : contents)
    spells_special.push_back(!c.empty() && tok.encode(c, false, true) != tok.encode(c, false, false));
  if (std::find(spells_special.begin(), spells_special.end(), true) == spells_special.end()) {
    const std::vector<int32_t> all = tok.encode(text, false, true);
    ids.insert(ids.end(), all.begin(), all.end());
    if (ids.empty()) bad_request("messages", "the chat template rendered an empty prompt");
    return ids;
  }
  // Else render again with each content that spells a special token
  // replaced by a marker no text contains, and encode the template's text
  // with special tokens recognised and those contents, where their markers
  // are, as plain text. A marker the template changed or dropped (it
  // rewrote the content) is refused: such a content cannot be placed safely.
  Json marked = vars;
  std::vector<std::string> markers(contents.size());
  std::random_device rd;
  for (size_t i = 0; i < contents.size(); ++i) {
    if (!spells_special[i]) continue;
    // Appended in place: GCC 12 misreads "\x1f" + std::string&& as an
    // overlapping copy (-Wrestrict, GCC bug 105329).
    std::string& m = markers[i];
    m.append("\x1f").append(std::to_string(rd())).append("-").append(std::to_string(rd()));
    m.append("-").append(std::to_string(i)).append("\x1f");
    marked["messages"][i]["content"] = markers[i];
  }
  text = render_prompt(*ctx.chat_template, marked, render_control);
  std::vector<std::pair<size_t, size_t>> at;  // (position, message) of each marker
  for (size_t i = 0; i < contents.size(); ++i) {
    if (markers[i].empty()) continue;
    const size_t p = text.find(markers[i]);
    if (p == std::string::npos || text.find(markers[i], p + 1) != std::string::npos)
      bad_request("messages", "message " + std::to_string(i) +
                                  " spells a special token in text the chat template rewrites or repeats");
    at.emplace_back(p, i);
  }
  std::sort(at.begin(), at.end());
  size_t cursor = 0;
  auto append = [&](std::string_view part, bool special) {
    if (part.empty()) return;
    const std::vector<int32_t> p = tok.encode(part, false, special);
    ids.insert(ids.end(), p.begin(), p.end());
  };
  for (const auto& [p, i] : at) {
    append(std::string_view(text).substr(cursor, p - cursor), true);
    append(contents[i], false);
    cursor = p + markers[i].size();
  }
  append(std::string_view(text).substr(cursor), true);
  if (ids.empty()) bad_request("messages", "the chat template rendered an empty prompt");
  return ids;
}

}  // namespace weft::serve
