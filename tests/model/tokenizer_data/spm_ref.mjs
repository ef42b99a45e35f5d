// Shared by make_gemma.js and make_phi3.js: SentencePiece-style (`llama`)
// references built from a package's tokenizer.json, laid out as llama.cpp's
// converter writes the GGUF vocabulary, trimmed to what the cases use,
// checked, and written one record a line (the format is described below).
//
// Scores: a GGUF file takes them from tokenizer.model, which the packages do
// not ship; as in make.js, a merged piece scores minus one minus the rank of
// the first merge in tokenizer.json that makes it, so weft's highest score
// first follows the package's lowest rank first. A piece no merge makes
// scores below every merge.
//
// The algorithm weft implements is written out again here (encodeSpm) and
// run over the trimmed data: user-defined tokens are split out of the text
// first (control and unknown ones too when special tokens are parsed),
// leftmost and longest, dropping the ASCII whitespace after a token marked
// rstrip; each text part has its spaces replaced by U+2581 (and one put in
// front with add_space_prefix) and is merged highest score first, leftmost
// on ties, into normal or user-defined tokens only; a symbol that is not
// such a token becomes its UTF-8 bytes as <0xXX> tokens. Trimming keeps the
// normal tokens that occur inside some text part as the encoder sees it (no
// other can be reached, so the result is unchanged), the byte tokens and
// the tokens the caller names; writeSpmReference checks that the trimmed
// data encodes every case to the package's ids before it writes anything.
//
// Format (UTF-8, one record per line, fields split by tabs):
//   vocab <n>
//   token <id> <token_type> <score> <text as JSON>   1 normal, 3 control, 4 user-defined, 5 unused, 6 byte
//   bos <id> / eos <id> / unk <id> / eot <id>         as the converter writes them (eot: the end of turn)
//   add_space_prefix <0|1> / rstrip <id>              rstrip: whitespace after the token is dropped
//   case <ids> <text as JSON>                         special token strings are plain text
//   decoded <text as JSON>                            the package's decoding of the case
//                                                     before, where it is not the text
//   special <ids> <text as JSON>                      special token strings are parsed
// Ids outside the trimmed set are unreachable; the C++ test fills them with
// placeholders.

export const kSpace = "\u2581";

// --- the algorithm ----------------------------------------------------------

const isAsciiSpace = (c) => c === " " || c === "\t" || c === "\n" || c === "\v" || c === "\f" || c === "\r";
const utf8 = new TextEncoder();

// m: { ids: Map text -> id (mergeable tokens: normal and user-defined),
//      scores: Map text -> score, byteIds[256], unk,
//      specials: [{ text, id, control, rstrip }] longest first, addSpacePrefix }
// Returns the ids; pushes each text part as the merger sees it to parts.
export function encodeSpm(m, text, parseSpecial, parts) {
  const out = [];
  const plain = (part) => {
    if (part === "") return;
    const s = (m.addSpacePrefix ? kSpace : "") + part.replaceAll(" ", kSpace);
    if (parts) parts.push(s);
    const sym = Array.from(s);
    for (;;) {
      let best = -Infinity, at = -1;
      for (let k = 0; k + 1 < sym.length; k++) {
        const sc = m.scores.get(sym[k] + sym[k + 1]);
        if (sc !== undefined && sc > best) best = sc, at = k;
      }
      if (at < 0) break;
      sym.splice(at, 2, sym[at] + sym[at + 1]);
    }
    for (const t of sym) {
      if (m.ids.has(t)) out.push(m.ids.get(t));
      else for (const b of utf8.encode(t)) out.push(m.byteIds[b] ?? m.unk);
    }
  };
  let start = 0;
  for (let pos = 0; pos < text.length;) {
    const s = m.specials.find((x) => (parseSpecial || !x.control) && text.startsWith(x.text, pos));
    if (!s) {
      pos++;
      continue;
    }
    plain(text.slice(start, pos));
    out.push(s.id);
    pos += s.text.length;
    if (s.rstrip) while (pos < text.length && isAsciiSpace(text[pos])) pos++;
    start = pos;
  }
  plain(text.slice(start));
  return out;
}

// Scores from merges ("a b" strings or [a, b] pairs) in rank order.
export function scoresFromMerges(merges) {
  const score = new Map();
  merges.forEach((m, rank) => {
    const t = Array.isArray(m) ? m[0] + m[1] : m.replace(" ", "");
    if (!score.has(t)) score.set(t, -1 - rank);
  });
  return score;
}

// Writes to stdout the reference for cases ([text, parseSpecial] pairs), or
// exits with status 1 when the trimmed data encodes a case otherwise than the
// package. The options:
//   vocab[id]: token text as the GGUF file holds it; types[id]: token_type
//   mergeScore: Map text -> score (scoresFromMerges); noMergeScore: for the rest
//   addSpacePrefix; rstrip: ids whose following whitespace is dropped
//   keep: ids written whether used or not (besides bytes and non-normal tokens)
//   reference(text, parseSpecial): the package's ids; decode(ids, parseSpecial): its text
//   unk: the unknown token's id
//   lines: records written before the cases (bos, eos, ...)
export function writeSpmReference(o) {
  const n = o.vocab.length;
  const score = (id) =>
    o.types[id] === 1 ? o.mergeScore.get(o.vocab[id]) ?? o.noMergeScore : o.types[id] === 6 ? 0 : -1000;
  const maps = (keepId) => {
    const m = { ids: new Map(), scores: new Map(), byteIds: [], unk: o.unk, specials: [], addSpacePrefix: o.addSpacePrefix };
    for (let id = 0; id < n; id++) {
      if (!keepId(id)) continue;
      const t = o.vocab[id], type = o.types[id];
      if ((type === 1 || type === 4) && !m.ids.has(t)) {
        m.ids.set(t, id);
        m.scores.set(t, score(id));
      }
      const byte = /^<0x([0-9A-F]{2})>$/.exec(t);
      if (type === 6 && byte) m.byteIds[parseInt(byte[1], 16)] = id;
      if ((type === 2 || type === 3 || type === 4) && t !== "")
        m.specials.push({ text: t, id, control: type !== 4, rstrip: o.rstrip.includes(id) });
    }
    m.specials.sort((a, b) => b.text.length - a.text.length);  // stable: the first id wins among equals
    return m;
  };

  // Every text part the encoder merges, over the full vocabulary.
  const full = maps(() => true);
  const parts = [];
  for (const [c, sp] of o.cases) encodeSpm(full, c, sp, parts);
  const keep = new Set(o.keep);
  for (let id = 0; id < n; id++) {
    if (o.types[id] === 6) keep.add(id);
    else if (o.types[id] === 1 && o.vocab[id] !== "" && parts.some((p) => p.includes(o.vocab[id]))) keep.add(id);
  }
  const trimmed = maps((id) => keep.has(id));

  const lines = [`vocab\t${n}`];
  for (const id of [...keep].sort((a, b) => a - b))
    lines.push(`token\t${id}\t${o.types[id]}\t${score(id)}\t${JSON.stringify(o.vocab[id])}`);
  lines.push(...o.lines, `add_space_prefix\t${o.addSpacePrefix ? 1 : 0}`, ...o.rstrip.map((id) => `rstrip\t${id}`));
  let bad = 0;
  for (const [c, sp] of o.cases) {
    const want = o.reference(c, sp);
    const got = encodeSpm(trimmed, c, sp);
    if (want.join(",") !== got.join(",")) {
      console.error(`mismatch for ${JSON.stringify(c)} (special ${sp}):\n  package ${want}\n  weft's  ${got}`);
      bad++;
    }
    lines.push(`${sp ? "special" : "case"}\t${want.join(",")}\t${JSON.stringify(c)}`);
    const decoded = o.decode(want, sp);
    if (!sp && decoded !== c) lines.push(`decoded\t${JSON.stringify(decoded)}`);
  }
  if (bad) process.exit(1);
  process.stdout.write(lines.join("\n") + "\n");
}
