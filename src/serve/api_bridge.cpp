// Foreign API bodies through the OpenAI mapping (api_bridge.h).
#include "serve/api_bridge.h"

namespace weft::serve {

namespace {

// text with every "'from'" replaced by "'to'".
std::string rename_quoted(std::string text, const std::string& from, const std::string& to) {
  const std::string quoted_from = "'" + from + "'", quoted_to = "'" + to + "'";
  for (size_t at = text.find(quoted_from); at != std::string::npos; at = text.find(quoted_from, at + quoted_to.size()))
    text.replace(at, quoted_from.size(), quoted_to);
  return text;
}

}  // namespace

CompletionRequest parse_bridged(const Json& openai_body, bool chat, const FieldNames& names, const ApiContext& ctx,
                                const RenderControl& render_control) {
  try {
    return parse_completion(openai_body, chat, ctx, render_control);
  } catch (const ApiError& e) {
    std::string param = e.param(), message = e.what();
    for (const auto& [openai, theirs] : names) {
      if (param == openai) param = theirs;
      message = rename_quoted(message, openai, theirs);
    }
    throw ApiError(e.status(), e.type(), message, param, e.code());
  }
}

const Json* field_of(const Json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::string decoded_text(const std::vector<int32_t>& tokens, const model::Tokenizer& tok) {
  std::string text;
  for (int32_t t : tokens) text += tok.decode_token(t);
  return text;
}

std::string matched_stop(const std::vector<std::string>& stops, const std::string& decoded) {
  std::string found;
  size_t first = std::string::npos;
  for (const std::string& s : stops) {
    const size_t at = s.empty() ? std::string::npos : decoded.find(s);
    if (at != std::string::npos && (first == std::string::npos || at < first)) {
      first = at;
      found = s;
    }
  }
  return found;
}

}  // namespace weft::serve
