#!/usr/bin/env python3
"""`weft run --model-draft` end to end on tiny models with random weights
(docs/speculative.md):

- greedy text with a draft (another model of the same vocabulary, and the
  model itself) is byte for byte the text without one, penalties included;
- --stats reports the acceptance: every token kept with the model as its own
  draft, and fewer target steps than tokens;
- a draft of another vocabulary is refused, naming both sizes, before the
  target is loaded; --draft-max without --model-draft is refused.

Usage: run_draft_test.py WEFT_BINARY WRITE_TEST_MODEL_BINARY
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
    r = subprocess.run([WEFT, "run", "-m", model, "-t", "1", "-p", "The quick brown fox jumps", *flags],
                       capture_output=True, timeout=120)
    if check and r.returncode != 0:
        die(f"weft run {' '.join(flags)}: status {r.returncode}\n{r.stderr.decode('latin-1')}")
    return r


def main():
    d = tempfile.mkdtemp()
    try:
        target, draft, other = (os.path.join(d, n) for n in ("target.gguf", "draft.gguf", "other.gguf"))
        subprocess.run([WRITER, target, "--layers", "3"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([WRITER, draft, "--layers", "1", "--embd", "32", "--heads", "2", "--heads-kv", "1",
                        "--ff", "64", "--seed", "9"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([WRITER, other, "--vocab", "520"], check=True, stdout=subprocess.DEVNULL)
        for flags in (["-n", "40"], ["-n", "40", "--repeat-penalty", "1.5", "--presence-penalty", "0.5"]):
            plain = run(target, *flags).stdout
            if len(plain) < 10:
                die(f"no text: {plain!r}")
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
        print("greedy text identical with both drafts, with and without penalties; the model as its own draft keeps all")

        r = run(target, "-n", "4", "--model-draft", other, check=False)
        err = r.stderr.decode("latin-1")
        if r.returncode != 1 or "520 tokens, the target's 600" not in err or "loaded" in err:
            die(f"another vocabulary: status {r.returncode}\n{err}")
        r = run(target, "-n", "4", "--draft-max", "3", check=False)
        if r.returncode == 0 or "--draft-max requires --model-draft" not in r.stderr.decode("latin-1") + r.stdout.decode("latin-1"):
            die(f"--draft-max alone: status {r.returncode}")
        print("a draft of another vocabulary and --draft-max alone refused")
    finally:
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        os.rmdir(d)


if __name__ == "__main__":
    main()
