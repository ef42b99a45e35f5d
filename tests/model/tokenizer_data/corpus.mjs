// The varied text that make_gemma.js, make_phi3.js and make_qwen3.js encode
// as plain text (each adds strings of its own). None holds U+2581 itself (a
// GGUF converter writes user-defined tokens with spaces where tokenizer.json
// has U+2581, so such text encodes differently by design), U+0085 or U+FEFF
// (where JavaScript's \s differs from Unicode White_Space), and all of it is
// NFC (Qwen's normalizer, which llama.cpp and weft do not apply, leaves it
// alone).
export const commonCases = [
  // Latin text, spaces, newlines, tabs.
  "Hello world", "Hello, world!", "The quick brown fox jumps over the lazy dog.", " leading space",
  "  two leading spaces", "trailing space ", "trailing spaces   ", "multiple   spaces inside", "a  b   c    d",
  " ".repeat(40) + "forty spaces", "tabs\tand\ttabs", "\tindented\n\t\tdouble", "\n", "\n\n", "\n\n\n",
  "\n".repeat(35) + "many newlines", "line one\nline two\n\nline four\n", "a\r\nb\r\n", "  \n  \n  x",
  "ends with newlines\n\n", " \n ", " \t \n", "a", " ", "   ", "x ", "\t", "\t\t", "\u00a0nbsp",
  "full\u3000width\u3000space",
  // Digits and punctuation.
  "1234567", "3.14159 and 2,718,281,828", "x=1234567890;", "phone: +1 (555) 123-4567", "v1.2.3-rc4",
  "!!!???...", "Wait... what?!", "a -- b --- c", "https://example.com/path?q=1&r=2#frag", "email@example.com",
  "$100.00 €50 £20 ¥1000", "(parens) [brackets] {braces}", "½ ¾ ² ³ ①②",
  "don't I'm we'll THEY'RE you've he'd it's", "rock 'n' roll", "O'Reilly's",
  // Code and markup.
  "def f(x):\n    return x ** 2\n", "int main() {\n\treturn 0;\n}\n", "    if (a && b) { c(); }  // comment",
  "for i in range(10):\n        print(i)\n", "const x = {a: 1, b: [2, 3]};", "#include <stdio.h>",
  "<html><body><table><tr><td>hi</td></tr></table></body></html>", "<h1>Title</h1>\n<b>bold</b> <i>it</i>",
  "SELECT * FROM users WHERE id = 42;", "snake_case_name camelCaseName CONSTANT_NAME",
  // Scripts other than Latin, combining marks, emoji.
  "Ünïcödé façade naïve", "Größe straße", "Tiếng Việt có dấu", "Привет, мир!", "Γειά σου κόσμε",
  "שלום עולם", "مرحبا بالعالم ١٢٣٤", "नमस्ते दुनिया", "สวัสดีชาวโลก", "日本語のテキストです。",
  "你好，世界！", "我爱自然语言处理。今天天气很好。", "한국어 텍스트입니다", "mixed English 和 中文 and русский",
  "x\u0301 q\u0303 combining", "Z\u0335a\u0336l\u0337g\u0334o", "emoji 😀🎉", "🦙 llama", "👨‍👩‍👧 family",
  "👍🏽 ok", "🇨🇳🇯🇵", "🤖🧠🚀🌍🔥✨", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕿𝖊𝖝𝖙", "\u{10FFFD} private use",
  // Long words: many merges inside one piece.
  "antidisestablishmentarianism", "Donaudampfschifffahrtsgesellschaftskapitän", "aaaaaaaaaaaaaaaaaaaaaaaaa",
  "----------------------------------------", "ThisIsAVeryLongCamelCaseIdentifierName", "qzxvbnmlkjhgf xkcd",
];
