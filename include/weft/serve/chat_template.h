// Chat templates: the Jinja2 template a model file carries as
// `tokenizer.chat_template`, which turns a list of chat messages into the
// prompt text. ChatTemplate interprets the subset of Jinja2 that real chat
// templates use, configured as Hugging Face transformers configures Jinja2
// for them (trim_blocks, lstrip_blocks, loop controls, a json.dumps-style
// tojson, raise_exception, strftime_now), so that a template renders here as
// it does in Python.
//
// Deliberate differences from Jinja2: an attribute or item of an undefined
// value is undefined (Jinja2 raises); upper/lower/title change ASCII letters
// only; lists cannot be modified (as in transformers' immutable sandbox).
//
// Message contents are hostile input: they are only ever values, never parsed
// as template text. Every render is bounded (steps, output bytes, loop
// iterations, work, nesting depth, and the caller's deadline and cancel check)
// and fails with a weft::Error, never a crash or a render that runs on.
//
//   auto tpl = weft::serve::ChatTemplate::parse(gguf_chat_template);  // once per model
//   nlohmann::ordered_json vars = {{"messages", messages}, {"add_generation_prompt", true},
//                                  {"bos_token", "<s>"}, {"eos_token", "</s>"}};
//   std::string prompt = tpl.render(vars);  // (a braced list in the call would be ambiguous)
//
// A parsed template is immutable: render() is const and may run on several
// threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace weft::serve {

namespace detail {
struct TemplateBody;
}

// Caps on one render; exceeding one throws Error(out_of_memory, ...). Sizes
// are checked before a string or list is built, so a render holds little more
// than max_output_bytes + max_work_bytes however hostile its template.
struct ChatTemplateLimits {
  std::size_t max_output_bytes = std::size_t{16} << 20;   // the rendered text, and any one string
  std::size_t max_loop_iterations = 1'000'000;            // all for-loop iterations of a render together
  std::size_t max_work_bytes = std::size_t{256} << 20;    // bytes and items produced by string and list operations
  int max_depth = 64;  // nesting of statements, macro calls and values (also the parser's cap on expressions)
  // The render's time: a step per statement, expression, loop iteration and
  // call, and one per 64 bytes or items an operation touches. Measured: the
  // real templates of tests/serve/chat_templates take at most ~600 steps on
  // their fixture conversations (the builtins at most ~230), and ~60'000 on a
  // 200-message chat of 800 KB; a hostile template spends this budget in
  // 0.1-0.5 s (measured on the x86 machine that measured the steps).
  std::size_t max_steps = 20'000'000;
};

// What a caller adds to one render: when to give up, and whether anyone still
// wants the result. Both are looked at every few thousand steps (the cancel
// check is called there too: keep it cheap, or throttle it). Passing the
// deadline or a true cancel check throws Error(ErrorKind::disconnected,
// "[chat_template] line N: ... deadline ..." or "... cancelled ...").
struct RenderControl {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::function<bool()> cancelled;  // empty: never cancelled
};

// A parsed template. parse() throws weft::Error(ErrorKind::invalid_input,
// "[chat_template] line N: ...") for a syntax error, and
// Error(ErrorKind::unsupported, "[chat_template] line N: ... not supported: <construct>")
// for a construct outside the subset (unknown filters, tests and statements are
// found at parse time; unknown methods when called).
class ChatTemplate {
 public:
  static ChatTemplate parse(std::string_view source);

  // Renders with the given variables (a JSON object: "messages",
  // "add_generation_prompt", "bos_token", "eos_token", "tools", ... any keys).
  // Throws Error(invalid_input, "[chat_template] ...") when the template raises
  // (raise_exception("msg") puts msg in the error text) or on a runtime type
  // error naming what was wrong; Error(out_of_memory, ...) when a limit is
  // exceeded. Objects iterate in the json's order: nlohmann::json sorts keys,
  // so pass ordered_json to keep the caller's order (tojson of tool schemas).
  std::string render(const nlohmann::json& variables) const;
  std::string render(const nlohmann::ordered_json& variables) const;
  // The same, stopping at control's deadline or once control.cancelled() is
  // true: Error(disconnected, ...) as RenderControl says.
  std::string render(const nlohmann::json& variables, const RenderControl& control) const;
  std::string render(const nlohmann::ordered_json& variables, const RenderControl& control) const;

  void set_limits(const ChatTemplateLimits& limits) { limits_ = limits; }
  const ChatTemplateLimits& limits() const { return limits_; }
  // The clock strftime_now() reads (local time); tests pin it. Default: system_clock::now.
  void set_clock(std::function<std::chrono::system_clock::time_point()> clock) { clock_ = std::move(clock); }

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

 private:
  explicit ChatTemplate(std::unique_ptr<detail::TemplateBody> body);
  template <class Json>
  std::string render_json(const Json& variables, const RenderControl& control) const;

  std::unique_ptr<detail::TemplateBody> body_;  // the parsed statements; owned, immutable
  ChatTemplateLimits limits_;
  std::function<std::chrono::system_clock::time_point()> clock_;
};

// Templates weft ships for --chat-template NAME: "chatml", "llama2", "llama3",
// "mistral", "gemma", "phi3". Each renders the fixture conversations exactly as
// the real template of its family does (tests/serve/chat_templates). nullopt
// for an unknown name.
std::optional<std::string> builtin_chat_template(std::string_view name);
std::string builtin_chat_template_names();  // "chatml, gemma, llama2, llama3, mistral, phi3"

}  // namespace weft::serve
