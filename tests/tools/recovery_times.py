#!/usr/bin/env python3
"""Recovery time against the tokens to re-prefill (docs/performance.md).

Writes a model of the demo's shape (12 layers of width 768, 12 heads, a
32000-token vocabulary; weft_write_test_model's weights, 111.7 MiB), then for
prompts of several lengths runs `weft run --recover -n 32` over this host
and two local `weft worker` processes (--split 1,1,1), kills the last
stage (kill -9) once the first tokens are out, and prints a Markdown row
per run: the tokens re-evaluated, detection (kill to the recovery notice,
less what the notice reports), reload (re-plan and upload) and re-prefill.

Usage: recovery_times.py WEFT_BINARY WRITE_TEST_MODEL_BINARY [REPEATS...]
(REPEATS: how many times the prompt sentence is repeated; default 1 10 20)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fault_run_common import Listening  # noqa: E402

SENTENCE = "A pooled machine can sleep, drop off the network or reboot at any token. "


def one(weft, model, folder, repeats):
    w = [Listening([weft, "worker", "--host", "127.0.0.1", "--port", "0", "--threads", "1"],
                   os.path.join(folder, f"w{i}.log")) for i in range(2)]
    try:
        argv = [weft, "run", "-m", model, "-p", SENTENCE * repeats, "-n", "32", "-t", "1", "--recover",
                "--worker", w[0].endpoint, "--worker", w[1].endpoint, "--split", "1,1,1"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.read(proc.stdout.fileno(), 1)  # the first token is out
        killed_at = time.monotonic()
        w[1].proc.kill()
        notice_at, notice = None, None
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            if line.startswith("[recovered]"):
                notice_at, notice = time.monotonic(), line
        proc.stdout.read()
        proc.wait()
    finally:
        for x in w:
            x.stop()
    m = notice and re.search(r"reloaded in ([0-9.]+) s, (\d+) tokens re-evaluated in ([0-9.]+) s", notice)
    if proc.returncode != 0 or not m:
        return f"| {repeats} repeats | failed (exit {proc.returncode}) | | | |"
    reload_s, tokens, reprefill_s = float(m.group(1)), int(m.group(2)), float(m.group(3))
    # the notice comes after the reload and the re-prefill; reload_seconds includes the detection's PINGs
    detect = max(0.0, notice_at - killed_at - reload_s - reprefill_s)
    return (f"| {tokens} | {detect:.2f} s | {reload_s:.2f} s | {reprefill_s:.2f} s | "
            f"{detect + reload_s + reprefill_s:.2f} s |")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    weft, writer = sys.argv[1], sys.argv[2]
    repeats = [int(a) for a in sys.argv[3:]] or [1, 10, 20]
    folder = tempfile.mkdtemp(prefix="weft_recovery_times_")
    try:
        model = os.path.join(folder, "demo-shaped.gguf")
        subprocess.run([writer, model, "--layers", "12", "--embd", "768", "--heads", "12", "--heads-kv", "12", "--ff",
                        "2048", "--vocab", "32000", "--ctx", "1024"], check=True, stdout=subprocess.DEVNULL)
        print("| tokens re-evaluated | detection | reload | re-prefill | total |")
        print("|---|---|---|---|---|")
        for r in repeats:
            print(one(weft, model, folder, r), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
