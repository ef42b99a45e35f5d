// The chat page `weft serve` answers at "/": one self-contained HTML document
// (inline CSS and JavaScript, no external assets) that talks to the server's
// own OpenAI API — /health while the model loads, /v1/models for the model's
// name, and streamed /v1/chat/completions — with Stop, New chat, the speed of
// each reply, and settings (temperature, max tokens, system prompt, API key).
// tests/serve/chat_page.test.mjs drives it in headless Chromium.
#pragma once

#include <string_view>

namespace weft::serve {

// The page's HTML (UTF-8, static storage: the view stays valid for the
// program's lifetime).
std::string_view chat_page_html();
// The pool view's script, served at /pool.js and loaded by the page
// (pool_view.cpp): this host and the workers from GET /v1/pool, polled.
std::string_view pool_view_script();

}  // namespace weft::serve
