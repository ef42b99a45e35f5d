// ChatTemplate: parse once (lexer + parser), render many times (a fresh
// Evaluator per render, so renders share nothing mutable).
#include "weft/serve/chat_template.h"

#include "serve/template/jinja_eval.h"

namespace weft::serve {

ChatTemplate::ChatTemplate(std::unique_ptr<detail::TemplateBody> body) : body_(std::move(body)) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

ChatTemplate ChatTemplate::parse(std::string_view source) {
  auto body = std::make_unique<detail::TemplateBody>(detail::parse_template(detail::lex(source)));
  return ChatTemplate(std::move(body));
}

template <class Json>
std::string ChatTemplate::render_json(const Json& variables, const RenderControl& control) const {
  if (!variables.is_object() && !variables.is_null()) fail(ErrorKind::invalid_input, "chat_template", "render() takes a JSON object of variables");
  detail::Value vars = detail::Value::from_json(variables, limits_.max_depth);
  auto now = clock_ ? clock_() : std::chrono::system_clock::now();
  detail::Evaluator evaluator(limits_, now, control);
  return evaluator.render(*body_, vars);
}

std::string ChatTemplate::render(const nlohmann::json& variables) const {
  return render_json(variables, RenderControl{});
}
std::string ChatTemplate::render(const nlohmann::ordered_json& variables) const {
  return render_json(variables, RenderControl{});
}
std::string ChatTemplate::render(const nlohmann::json& variables, const RenderControl& control) const {
  return render_json(variables, control);
}
std::string ChatTemplate::render(const nlohmann::ordered_json& variables, const RenderControl& control) const {
  return render_json(variables, control);
}

}  // namespace weft::serve
