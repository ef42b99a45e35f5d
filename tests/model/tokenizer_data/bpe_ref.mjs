// Shared by make_llama3.js and make_qwen2.js: byte-level BPE over the full
// vocabulary and merges of a reference package, trimmed to what the cases
// use, checked against the package's ids, and written as one record a line
// (the format is described in each script).
//
// Trimming: each pre-tokenized piece is encoded here again with the full
// merges (lowest rank first, leftmost on ties; with ignoreMerges a piece that
// is a token as a whole is taken directly), recording every merge applied and
// every token reached. Keeping exactly those merges, the 256 byte-level base
// tokens and the special tokens gives the same encodings: each applied merge
// had the lowest rank among the candidate pairs in the full set, so it still
// has in any subset that contains it, and a piece stops merging when no
// candidate is in the full set, so none is in the subset. writeReference
// checks that the trimmed data re-encodes every case to the package's ids
// before it writes anything.

// The GPT-2 byte -> printable character table.
export const byteToChar = [];
{
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    byteToChar.push(String.fromCodePoint(printable ? b : next++));
  }
}
const utf8 = new TextEncoder();
const byteMapped = (s) => Array.from(utf8.encode(s), (b) => byteToChar[b]).join("");

// BPE over one piece: returns the token strings; adds applied merges to used.
function bpe(piece, ranks, ids, ignoreMerges, used) {
  const mapped = byteMapped(piece);
  if (ignoreMerges && ids.has(mapped)) return [mapped];
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

// Writes to stdout the reference for cases ([text, parseSpecial] pairs), or
// exits with status 1 when the trimmed data encodes a case otherwise than the
// package. The options:
//   vocab[id]: token text; types[id]: token_type where not 1 (normal)
//   merges: "a b" strings in rank order; ignoreMerges: as above
//   pretokenize(text): the pieces; specialRe: a regex with one capture group
//     splitting text at special token strings (a captured part that is a
//     token encodes as that token when parseSpecial); plainRe (optional): the
//     same for the strings split out of any text (user-defined tokens)
//   alwaysKeep: ids written whether used or not (special tokens)
//   reference(text, parseSpecial): the package's ids; decode(ids, parseSpecial): its text
//   extraLines: records written between the merges and the cases (bos, eos, ...)
export function writeReference(o) {
  const fullIds = new Map(o.vocab.map((t, id) => [t, id]));
  const fullRank = new Map(o.merges.map((m, i) => [m, i]));

  // Encodes text; splits on the special token strings first (without
  // parseSpecial, only on plainRe's: user-defined tokens).
  const encode = (text, ranks, ids, parseSpecial, used, reached) => {
    const out = [];
    const re = parseSpecial ? o.specialRe : o.plainRe;
    const parts = re ? text.split(re) : [text];
    parts.forEach((part, k) => {
      if (part === "") return;
      if (k % 2 === 1 && ids.has(part)) return void out.push(ids.get(part));
      for (const piece of o.pretokenize(part))
        for (const t of bpe(piece, ranks, ids, o.ignoreMerges, used)) {
          if (!ids.has(t)) throw new Error(`no token for ${t}`);
          if (reached) reached.add(ids.get(t));
          out.push(ids.get(t));
        }
    });
    return out;
  };

  const used = new Set();
  const keep = new Set(o.alwaysKeep);
  for (const [c, sp] of o.cases) encode(c, fullRank, fullIds, sp, used, keep);

  // Trim, then check the trimmed data against the package.
  for (let b = 0; b < 256; b++) keep.add(fullIds.get(byteToChar[b]));
  for (const m of used) keep.add(fullIds.get(m.replace(" ", "")));  // intermediate merge results
  const merges = [...used].sort((a, b) => fullRank.get(a) - fullRank.get(b));
  const trimRank = new Map(merges.map((m, i) => [m, i]));
  const trimIds = new Map([...keep].map((id) => [o.vocab[id], id]));
  for (const m of merges) {
    const [a, b] = m.split(" ");
    if (!trimIds.has(a) || !trimIds.has(b) || !trimIds.has(a + b)) throw new Error(`merge ${m} outside the kept tokens`);
  }

  const lines = [`vocab\t${o.vocab.length}`];
  for (const id of [...keep].sort((a, b) => a - b)) lines.push(`token\t${id}\t${o.types[id] ?? 1}\t${o.vocab[id]}`);
  for (const m of merges) lines.push(`merge\t${m}`);
  lines.push(...o.extraLines);
  let bad = 0;
  for (const [c, sp] of o.cases) {
    const want = o.reference(c, sp);
    const got = encode(c, trimRank, trimIds, sp);
    if (want.join(",") !== got.join(",")) {
      console.error(`mismatch for ${JSON.stringify(c)}: package ${want} trimmed ${got}`);
      bad++;
    }
    if (o.decode(want, sp) !== c) console.error(`package does not round-trip ${JSON.stringify(c)}`);
    lines.push(`${sp ? "special" : "case"}\t${want.join(",")}\t${JSON.stringify(c)}`);
  }
  if (bad) process.exit(1);
  process.stdout.write(lines.join("\n") + "\n");
}
