#!/usr/bin/env python3
"""`weft run`'s sampling and context flags end to end, on a tiny model with
random weights (whose greedy text repeats itself, so penalties show):

- each filter at its extreme gives the greedy text at temperature 1 (top-k 1,
  top-p 1e-6, min-p 1), as the sampler's contract says;
- each penalty changes the greedy text, and --repeat-last-n 0 turns them off;
- -c/--ctx-size bounds the KV cache: a long -n stops at the context's end;
- an impossible value is refused before loading, naming the flag and value;
- --model-draft (docs/speculative.md): the greedy text with a draft (another
  model of the same vocabulary, and the model itself) is byte for byte the
  text without one, penalties included; --stats reports the acceptance
  (every token kept with the model as its own draft, in fewer target steps);
  with --grammar-file the text is the grammar's greedy text without a draft;
  a draft of another vocabulary is refused naming both sizes before the
  target loads, by `weft run` and by `weft serve` (which exits).

Usage: run_flags_test.py WEFT_BINARY WRITE_TEST_MODEL_BINARY
"""
import os
import re
import subprocess
import sys
import tempfile

WEFT, WRITER = sys.argv[1], sys.argv[2]


def die(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(model, *flags, check=True):
    r = subprocess.run([WEFT, "run", "-m", model, "-t", "1", "-p", "The quick brown fox", *flags],
                       capture_output=True, timeout=120)
    if check and r.returncode != 0:
        die(f"weft run {' '.join(flags)}: status {r.returncode}\n{r.stderr.decode('latin-1')}")
    return r


def check_draft(d, target):
    """--model-draft's text, acceptance and refusal (the module docstring)."""
    draft, other = os.path.join(d, "draft.gguf"), os.path.join(d, "other.gguf")
    subprocess.run([WRITER, draft, "--layers", "1", "--embd", "32", "--heads", "2", "--heads-kv", "1", "--ff", "64",
                    "--seed", "9"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([WRITER, other, "--vocab", "520"], check=True, stdout=subprocess.DEVNULL)
    for flags in (["-n", "40"], ["-n", "40", "--repeat-penalty", "1.5", "--presence-penalty", "0.5"]):
        plain = run(target, *flags).stdout
        for d_model, d_max in ((draft, "3"), (target, "5")):
            got = run(target, *flags, "--model-draft", d_model, "--draft-max", d_max, "--stats")
            if got.stdout != plain:
                die(f"{' '.join(flags)} with draft {os.path.basename(d_model)}: {got.stdout!r} vs {plain!r}")
            m = re.search(r"draft: (\d+) of (\d+) drafted tokens kept .*; (\d+) target steps after the prompt "
                          r"for (\d+) tokens", got.stderr.decode("latin-1"))
            if not m:
                die(f"--stats printed no acceptance:\n{got.stderr.decode('latin-1')}")
            kept, drafted, steps, tokens = map(int, m.groups())
            if d_model == target and (kept != drafted or steps >= tokens - 1):
                die(f"the model as its own draft: {kept} of {drafted} kept, {steps} steps for {tokens} tokens")
    print("--model-draft: the same greedy text with either draft, penalties or not; the model as its own draft keeps all")
    grammar = os.path.join(d, "words.gbnf")
    with open(grammar, "w") as f:
        f.write("root ::= [a-z ]+\n")
    plain = run(target, "-n", "24", "--grammar-file", grammar).stdout
    if plain == run(target, "-n", "24").stdout:
        die("the grammar did not change the text: the check below would be vacuous")
    for d_model in (draft, target):
        got = run(target, "-n", "24", "--grammar-file", grammar, "--model-draft", d_model, "--draft-max", "4")
        if got.stdout != plain:
            die(f"--grammar-file with draft {os.path.basename(d_model)}: {got.stdout!r} vs {plain!r}")
    print("--model-draft --grammar-file: the grammar's greedy text with either draft")
    r = run(target, "-n", "4", "--model-draft", other, check=False)
    err = r.stderr.decode("latin-1")
    if r.returncode != 1 or "520 tokens, the target's 600" not in err or "loaded" in err:
        die(f"a draft of another vocabulary: status {r.returncode}\n{err}")
    print("--model-draft: a draft of another vocabulary refused before loading")
    # `weft serve` takes the same draft and refuses the same one, exiting.
    r = subprocess.run([WEFT, "serve", "-m", target, "-t", "1", "--port", "0", "-q", "--model-draft", other],
                       capture_output=True, timeout=60)
    err = r.stderr.decode("latin-1")
    if r.returncode != 1 or "loading failed" not in err or "520 tokens, the target's 600" not in err:
        die(f"weft serve with a draft of another vocabulary: status {r.returncode}\n{err}")
    r = subprocess.run([WEFT, "serve", "-m", target, "--draft-max", "4"], capture_output=True, timeout=60)
    if r.returncode == 0 or "--model-draft" not in r.stderr.decode("latin-1"):
        die(f"weft serve --draft-max without --model-draft: status {r.returncode}")
    print("weft serve --model-draft: a draft of another vocabulary refused; --draft-max needs it")


def main():
    d = tempfile.mkdtemp()
    try:
        model = os.path.join(d, "m.gguf")
        subprocess.run([WRITER, model], check=True, stdout=subprocess.DEVNULL)
        greedy = run(model, "-n", "24").stdout
        if len(greedy) < 10:
            die(f"no greedy text: {greedy!r}")
        for flags in (["--temp", "1", "--top-k", "1"], ["--temp", "1", "--top-k", "0", "--top-p", "0.000001"],
                      ["--temp", "1", "--top-k", "0", "--top-p", "1", "--min-p", "1"],
                      ["--repeat-penalty", "3", "--presence-penalty", "5", "--repeat-last-n", "0"]):
            for seed in ("1", "2"):
                got = run(model, "-n", "24", "--seed", seed, *flags).stdout
                if got != greedy:
                    die(f"{' '.join(flags)} (seed {seed}) is not greedy: {got!r} vs {greedy!r}")
        free = run(model, "-n", "24", "--temp", "1", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", "1")
        if free.stdout == greedy:
            die("temperature 1 without a filter gives the greedy text")
        for flags in (["--repeat-penalty", "3"], ["--presence-penalty", "5"], ["--frequency-penalty", "5"]):
            got = run(model, "-n", "24", *flags).stdout
            if got == greedy:
                die(f"{' '.join(flags)} leaves the greedy text unchanged: {got!r}")
        print("filters at their extremes are greedy; each penalty changes the text; --repeat-last-n 0 disables them")

        r = run(model, "-n", "200", "-c", "24", "--stats")
        err = r.stderr.decode("latin-1")
        if "stopped by context_full" not in err or "(24 positions)" not in err:
            die(f"-c 24 with -n 200 did not stop at a 24-position context:\n{err}")
        print("-c 24: the KV cache holds 24 positions and generation stops at its end")

        for flag, value, why in (("--top-p", "1.5", r"is outside \(0, 1\]"), ("--top-p", "0", r"is outside \(0, 1\]"),
                                 ("--top-k", "-1", "is negative"), ("--min-p", "2", r"is outside \[0, 1\]"),
                                 ("--repeat-penalty", "0", "is not a positive number"),
                                 ("--repeat-last-n", "-2", "is below -1"), ("--temp", "-1", "is not a number >= 0"),
                                 ("--presence-penalty", "inf", "is not finite"), ("-c", "-5", "--ctx-size -5")):
            r = run(model, flag, value, check=False)
            err = r.stderr.decode("latin-1")
            want = rf"\[run\] {re.escape(flag)} {re.escape(value)} {why}" if flag != "-c" else re.escape(why)
            if r.returncode != 1 or not re.search(want, err) or "loaded" in err:
                die(f"{flag} {value}: status {r.returncode}, wanted a refusal matching {want!r} before loading:\n{err}")
        r = subprocess.run([WEFT, "chat", "-m", model, "--min-p", "-0.5"], capture_output=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        if r.returncode != 1 or b"[chat] --min-p -0.5 is outside [0, 1]" not in r.stderr:
            die(f"weft chat --min-p -0.5: status {r.returncode}\n{r.stderr.decode('latin-1')}")
        print("impossible values refused before loading, naming the flag and the value")
        check_draft(d, model)
    finally:
        subprocess.run(["rm", "-rf", d])
    print("PASS")


main()
