#!/usr/bin/python3
"""Writes spm_trained.txt: a real SentencePiece BPE vocabulary, with the
scores SentencePiece's own trainer gave its pieces, and the ids its own
encoder (Google's C++ library behind Debian's python3-sentencepiece) gives a
varied set of texts. Nothing here re-implements an encoder: the test checks
weft's SentencePiece-style tokenizer against the library.

    apt-get install python3-sentencepiece   # 0.1.97 wrote the committed file
    /usr/bin/python3 tests/model/tokenizer_data/make_spm_trained.py \
        > tests/model/tokenizer_data/spm_trained.txt

The model is trained here, once, with the settings of Llama 2's
tokenizer.model (BPE, byte fallback, digits split, identity normalisation,
a dummy prefix, whitespace kept), on a text every Debian system has (the
GPL 3 in base-files) plus a few lines in other scripts, so that the vocabulary
holds merged pieces, some non-Latin characters, and leaves out others (they
fall back to bytes). Its 1,000 pieces are written whole: no trimming, no
placeholders. One thread: the trainer is then deterministic.

Format: spm_ref.mjs's (read by SpmRefData in tests/model/test_tokenizer_util.h):
  vocab <n> / token <id> <type> <score> <text as JSON> / bos, eos, unk <id> /
  add_space_prefix <0|1> / case <ids> <text as JSON> / decoded <text as JSON>
"""
import io
import json
import sys

import sentencepiece as spm

# Scripts and symbols beyond the licence's English, seen in training often
# enough that some merge; characters in the corpus below but not here are
# left out of the vocabulary (byte fallback).
EXTRA_TRAINING = [
    "日本語のテキストを書きます。日本語は難しいですが、テキストは短いです。",
    "Привет, мир! Это пример текста на русском языке. Привет ещё раз.",
    "Ünïcödé façade naïve café résumé über Straße Ärger Öl",
    "Γειά σου κόσμε, αυτό είναι ένα κείμενο.",
] * 20

CASES = [
    "Hello world", "The quick brown fox jumps over the lazy dog.", " leading space",
    "trailing space ", "multiple   spaces", "  two leading", "tabs\tand\nnewlines\n",
    "\n\n\n", "numbers 1234567890 3.14 -42", "int main() { return 0; }",
    "def f(x):\n    return x**2", "Ünïcödé façade naïve", "ÜNÏCÖDÉ", "日本語のテキスト",
    "中文文本不在词表里", "Привет, мир!", "Γειά σου κόσμε", "emoji 😀🎉 and 🦙",
    "ALL CAPS SHOUTING", "snake_case_name camelCaseName", "https://example.com/path?q=1&r=2",
    "a", " ", "   ", "grabbed", "\u00a0nbsp and ½ fractions", "e\u0301 combining accent",
    "zero\u200bwidth", "<s> and </s> are text here", "<unk>", "<0x41>",
    "This program is free software: you can redistribute it and/or modify it",
    "GNU General Public License, version 3 or (at your option) any later version.",
    "the the the the", "copyright copyrighted copyrightable", "Licensor's licensees",
    "\u0000nul and \u007fdel", "mixed日本English語", "tab\tseparated\tvalues", "x" * 40,
    "₀₁₂ subscripts, ∑∫ maths", "🏳️‍🌈 a zero-width-joined flag",
    # Runs of a doubled piece ("pp", "ll", "ff", "сс" are in the vocabulary):
    # equal scores side by side, where only merging leftmost first gives
    # SentencePiece's ids.
    "ppp", "lllll", "ffff fff", "ссс", "appple", "shelllfish", "offff",
]


def train():
    corpus = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read().splitlines()
    corpus = [line for line in corpus if line.strip()] + EXTRA_TRAINING
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus), model_writer=model, model_type="bpe", vocab_size=1000,
        byte_fallback=True, split_digits=True, normalization_rule_name="identity",
        add_dummy_prefix=True, remove_extra_whitespaces=False, character_coverage=0.995,
        num_threads=1, bos_id=1, eos_id=2, unk_id=0, minloglevel=2)
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def piece_type(sp, i):
    # SentencePiece's piece types; GGUF's tokenizer.ggml.token_type numbers them alike.
    if sp.is_unknown(i):
        return 2
    if sp.is_control(i):
        return 3
    if sp.is_byte(i):
        return 6
    if sp.is_unused(i):
        return 5
    return 1


def main():
    sp = train()
    out = [f"vocab\t{sp.get_piece_size()}"]
    for i in range(sp.get_piece_size()):
        score = float(sp.get_score(i))
        out.append(f"token\t{i}\t{piece_type(sp, i)}\t{score!r}\t{json.dumps(sp.id_to_piece(i), ensure_ascii=False)}")
    out += [f"bos\t{sp.bos_id()}", f"eos\t{sp.eos_id()}", f"unk\t{sp.unk_id()}", "add_space_prefix\t1"]
    for text in CASES:
        ids = sp.encode(text)
        out.append(f"case\t{','.join(map(str, ids))}\t{json.dumps(text, ensure_ascii=False)}")
        decoded = sp.decode(ids)
        if decoded != text:
            out.append(f"decoded\t{json.dumps(decoded, ensure_ascii=False)}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
