// The templates weft ships for --chat-template NAME, for models whose file
// carries none. Each is written for weft and checked against the real
// template of its family on the fixture conversations
// (tests/serve/test_chat_template.cpp, BuiltinsMatchRealTemplates): the same
// text where the real one renders, an error where it raises.
#include <array>
#include <utility>

#include "weft/serve/chat_template.h"

namespace weft::serve {
namespace {

// ChatML: <|im_start|>role\ncontent<|im_end|>\n per message.
constexpr const char* kChatml = R"({%- for m in messages -%}
<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%})";

// Llama 2: [INST] turns, the system prompt folded into the first one in <<SYS>>.
constexpr const char* kLlama2 = R"({%- set sys = messages[0].content if messages and messages[0].role == 'system' else none -%}
{%- for m in (messages[1:] if sys is not none else messages) -%}
  {%- if (m.role == 'user') != loop.index0 is even -%}
    {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}
  {%- endif -%}
  {%- set text = ('<<SYS>>\n' ~ sys ~ '\n<</SYS>>\n\n' ~ m.content) if loop.first and sys is not none else m.content -%}
  {%- if m.role == 'user' -%}
    {{- bos_token ~ '[INST] ' ~ text | trim ~ ' [/INST]' -}}
  {%- elif m.role == 'assistant' -%}
    {{- ' ' ~ text | trim ~ ' ' ~ eos_token -}}
  {%- endif -%}
{%- endfor -%})";

// Llama 3: header blocks, contents trimmed, <|begin_of_text|> once.
constexpr const char* kLlama3 = R"({{- bos_token -}}
{%- for m in messages -%}
  {{- '<|start_header_id|>' ~ m.role ~ '<|end_header_id|>\n\n' ~ m.content | trim ~ '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%})";

// Mistral Instruct (v0.1/v0.2): strictly alternating [INST] user turns; no system role.
constexpr const char* kMistral = R"({{- bos_token -}}
{%- for m in messages -%}
  {%- if (m.role == 'user') != loop.index0 is even -%}
    {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}
  {%- elif m.role == 'user' -%}
    {{- '[INST] ' ~ m.content ~ ' [/INST]' -}}
  {%- elif m.role == 'assistant' -%}
    {{- m.content ~ eos_token ~ ' ' -}}
  {%- else -%}
    {{- raise_exception('Only user and assistant roles are supported!') -}}
  {%- endif -%}
{%- endfor -%})";

// Gemma (2 and 3): user/model turns; a system message becomes the first turn's preamble.
constexpr const char* kGemma = R"({{- bos_token -}}
{%- set preamble = (messages[0].content ~ '\n\n') if messages and messages[0].role == 'system' else '' -%}
{%- for m in (messages[1:] if preamble else messages) -%}
  {%- if (m.role == 'user') != loop.index0 is even -%}
    {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}
  {%- endif -%}
  {{- '<start_of_turn>' ~ ('model' if m.role == 'assistant' else m.role) ~ '\n' -}}
  {{- (preamble if loop.first else '') ~ m.content | trim ~ '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<start_of_turn>model\n' -}}
{%- endif -%})";

// Phi-3: <|role|>\ncontent<|end|>\n; without a generation prompt the text ends with eos.
constexpr const char* kPhi3 = R"({%- for m in messages if m.role in ['system', 'user', 'assistant'] -%}
  {{- '<|' ~ m.role ~ '|>\n' ~ m.content ~ '<|end|>\n' -}}
{%- endfor -%}
{{- '<|assistant|>\n' if add_generation_prompt else eos_token -}})";

constexpr std::array<std::pair<const char*, const char*>, 6> kBuiltins = {{
    {"chatml", kChatml},
    {"gemma", kGemma},
    {"llama2", kLlama2},
    {"llama3", kLlama3},
    {"mistral", kMistral},
    {"phi3", kPhi3},
}};

}  // namespace

std::optional<std::string> builtin_chat_template(std::string_view name) {
  for (const auto& [n, source] : kBuiltins)
    if (name == n) return std::string(source);
  return std::nullopt;
}

std::string builtin_chat_template_names() {
  std::string out;
  for (const auto& [n, source] : kBuiltins) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

}  // namespace weft::serve
