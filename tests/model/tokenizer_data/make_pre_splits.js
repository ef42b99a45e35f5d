// Writes pre_splits.txt: every pre-tokenizer rule of pre_rules.mjs (the
// rules of src/model/tokenizer_pre.cpp) run by JavaScript's own RegExp on
// varied strings, for the rules no npm tokenizer package covers.
//
//   cd $WEFT/tests/model/tokenizer_data
//   node make_pre_splits.js > pre_splits.txt
//
// Format (UTF-8, one record per line, tab-separated):
//   rule <name> <steps as a JSON array: patterns, or builtin:gpt2 ...>
//   builtin <name> <the pattern the hand-written matcher implements>
//   split <rule> <text as JSON> <pieces as a JSON array>
// JavaScript's \s is Unicode White_Space but for U+0085 and U+FEFF, which no
// string here holds.
import { builtins, rules, splitBy } from "./pre_rules.mjs";
import { commonCases } from "./corpus.mjs";

const cases = [
  ...commonCases,
  "I'M SURE IT'S FINE, WE'VE SEEN IT", "'s 't 'S 'T 'Re 'rE 'lL", "x'sy", "2024年12月31日", "٣٤٥ ١٢ ۱۲",
  "「引用」『二重』【括弧】", "通义千问是阿里云研发的大语言模型。", "カタカナとひらがな、日本語の漢字。", "안녕하세요, 반갑습니다!",
  "ＦＵＬＬ ｗｉｄｔｈ！？ １２３", "“quotes” ‘single’ — dash… ellipsis", "a\r\nb\rc\n\rd", "a \r\n b", "x  \n\n  y",
  "12345678901234", "1,234,567.89", "0x1F 0b101 1e-9", "<sentinel:42> and <sentinel:>", "IMGIMGABCZ IMGIMGAAAAAZ IMGIMGZ",
  "tab\t\tand  two  spaces    four", "\u1F7D\u1FBE\u2126\u212A ωΩK", "ǅungla ǈ ǋ Title", "ɐɑɒ ʰʲ ꜣꜥ", "𐐷𐑏 𞤀𞥃",
  "CamelCaseWORDSAnd lowerUPPER", "iPhone eBay McDonald's", "HTTPServer XMLHttpRequest", "a/b/c\n//x\n/\n",
  "don't/won't", "x\u0301\u0302y z\u20DD", "ελληνικά ΚΕΦΑΛΑΙΑ", "مرحبا، كيف حالك؟ ۔", "हिन्दी। पाठ", "x . , ! ? y",
  "…。，、।۔،", "a(b|c)d", "$5+3<4>2^1~0|x`y", "tab\ttab",
];

const lines = [];
for (const [name, pattern] of Object.entries(builtins)) lines.push(`builtin\t${name}\t${pattern}`);
for (const [rule, steps] of Object.entries(rules)) {
  lines.push(`rule\t${rule}\t${JSON.stringify(steps)}`);
  for (const c of cases) {
    if (/[\u0085\ufeff]/.test(c)) throw new Error(`${JSON.stringify(c)} holds U+0085 or U+FEFF`);
    const pieces = splitBy(rule, c);
    if (pieces.join("") !== c) throw new Error(`${rule} does not cover ${JSON.stringify(c)}`);
    lines.push(`split\t${rule}\t${JSON.stringify(c)}\t${JSON.stringify(pieces)}`);
  }
}
process.stdout.write(lines.join("\n") + "\n");
