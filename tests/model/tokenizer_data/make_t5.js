// Writes t5_ugm.txt: a Unigram model trained here by SentencePiece itself
// (Debian's sentencepiece package: spm_train, spm_encode), laid out as a T5
// GGUF file holds it, and SentencePiece's own ids for varied strings.
//
//   apt-get install sentencepiece
//   cd $WEFT/tests/model/tokenizer_data && node make_t5.js > t5_ugm.txt
//
// The model: unigram, 700 pieces, trained on the licence texts in
// /usr/share/common-licenses plus this folder's corpus.mjs strings, with T5's
// special ids (pad 0, eos 1, unk 2, no bos) and a normalization rule set of
// its own (make_t5_rules below: full-width letters and digits, ligatures,
// no-break spaces, circled digits, a few sequences of several code points)
// compiled by spm_train into the model's precompiled charsmap, so the test
// reads a real charsmap without carrying the ~240 KB of nmt_nfkc's. Strings
// hold no newline (spm_encode reads one per line).
//
// Format (UTF-8, one record per line, tab-separated):
//   vocab <n>
//   token <id> <type> <score> <text as JSON>   type as GGUF's token_type
//   charsmap <hex bytes>                       tokenizer.ggml.precompiled_charsmap
//   add_space_prefix <0|1>; remove_extra_whitespaces <0|1>
//   case <ids> <text as JSON>                  spm_encode's ids (no eos)
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { commonCases } from "./corpus.mjs";

const dir = mkdtempSync(join(tmpdir(), "weft_t5_"));
const hex = (s) => Array.from(s, (c) => c.codePointAt(0).toString(16).toUpperCase()).join(" ");
const rules = [];
for (let c = 0; c < 26; c++) rules.push([String.fromCodePoint(0xff21 + c), String.fromCodePoint(0x41 + c)]);
for (let c = 0; c < 26; c++) rules.push([String.fromCodePoint(0xff41 + c), String.fromCodePoint(0x61 + c)]);
for (let c = 0; c < 10; c++) rules.push([String.fromCodePoint(0xff10 + c), String(c)]);
for (let c = 0; c < 9; c++) rules.push([String.fromCodePoint(0x2460 + c), String(c + 1)]);
rules.push(["\ufb01", "fi"], ["\ufb02", "fl"], ["\u00a0", " "], ["\u3000", " "], ["\t", " "], ["\u2026", "..."],
  ["\u00bd", "1/2"], ["a\u0308", "\u00e4"], ["o\u0308", "\u00f6"], ["\u2116", "No"], ["\u00b2", "2"]);
writeFileSync(join(dir, "rules.tsv"), rules.map(([a, b]) => `${hex(a)}\t${hex(b)}`).join("\n") + "\n");

const cases = [
  ...commonCases.filter((c) => !/[\n\r]/.test(c)),
  "ＦＵＬＬ ｗｉｄｔｈ ＡＢＣ １２３", "ﬁne ﬂow", "①②③ ½ № 5²", "a\u0308 o\u0308 ä", "ellipsis… done", "x\u00a0y\u3000z",
  "The licence is free software.", "  many   spaces   here  ", "UNKNOWN ☃ snowman 🦙", "zzzz qqqq",
];
let train = cases.join("\n") + "\n";
for (const f of readdirSync("/usr/share/common-licenses").sort()) {
  try {
    train += readFileSync(join("/usr/share/common-licenses", f), "utf8");
  } catch {}
}
writeFileSync(join(dir, "train.txt"), train);
execFileSync("spm_train", [`--input=${join(dir, "train.txt")}`, `--model_prefix=${join(dir, "m")}`, "--vocab_size=700",
  "--model_type=unigram", `--normalization_rule_tsv=${join(dir, "rules.tsv")}`, "--character_coverage=0.9995",
  "--pad_id=0", "--eos_id=1", "--unk_id=2", "--bos_id=-1", "--num_threads=1", "--minloglevel=2",
  "--seed_sentencepiece_size=20000"], { stdio: ["ignore", "ignore", "inherit"] });

// ModelProto: 1 pieces (1 piece, 2 score, 3 type), 3 normalizer_spec
// (2 precompiled_charsmap, 3 add_dummy_prefix, 4 remove_extra_whitespaces).
function fieldsOf(buf) {
  const out = [];
  let i = 0;
  const varint = () => {
    let v = 0n, shift = 0n;
    for (;;) {
      const b = buf[i++];
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const key = Number(varint()), no = key >> 3, wire = key & 7;
    if (wire === 0) out.push([no, varint()]);
    else if (wire === 5) out.push([no, buf.readFloatLE(i)]), (i += 4);
    else if (wire === 1) i += 8;
    else if (wire === 2) {
      const n = Number(varint());
      out.push([no, buf.subarray(i, i + n)]);
      i += n;
    } else throw new Error("wire type " + wire);
  }
  return out;
}
const model = fieldsOf(readFileSync(join(dir, "m.model")));
const pieces = model.filter(([no]) => no === 1).map(([, b]) => {
  const f = Object.fromEntries(fieldsOf(b));
  return { text: f[1].toString("utf8"), score: f[2] ?? 0, type: Number(f[3] ?? 1n) };
});
const norm = Object.fromEntries(fieldsOf(model.find(([no]) => no === 3)[1]));
const bool = (v, dflt) => (v === undefined ? dflt : v !== 0n);

const lines = [`vocab\t${pieces.length}`];
pieces.forEach((p, id) => lines.push(`token\t${id}\t${p.type}\t${p.score}\t${JSON.stringify(p.text)}`));
lines.push(`charsmap\t${Buffer.from(norm[2]).toString("hex")}`);
lines.push(`add_space_prefix\t${bool(norm[3], true) ? 1 : 0}`, `remove_extra_whitespaces\t${bool(norm[4], true) ? 1 : 0}`);
const ids = execFileSync("spm_encode", [`--model=${join(dir, "m.model")}`, "--output_format=id"],
  { input: cases.join("\n") + "\n" }).toString().split("\n");
cases.forEach((c, k) => lines.push(`case\t${ids[k].trim().split(/\s+/).filter(Boolean).join(",")}\t${JSON.stringify(c)}`));
process.stdout.write(lines.join("\n") + "\n");
