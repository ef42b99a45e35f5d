#!/usr/bin/env python3
"""A worker killed (kill -9) and started again at its port during
`weft run --recover` (docs/recovery.md "Rejoin").

A 96-token greedy generation over this host and two `weft worker`
processes (--split 1,1,1), each behind tests/tools/fault_proxy.py. At
about token 8 the last stage's worker is killed; once the host has
recovered onto the other two, a new worker process is started at the
killed one's port. Two runs:

  back, and worth it   after the recovery, the link to the surviving
                       worker turns slow (its proxy delays every chunk
                       30 ms), so each token now takes longer than it did
                       with three stages: the rule moves the model back.
                       Must say "[rejoined] <the worker>" and
                       "recovery: 1 recoveries, 1 rejoins"; the placement
                       in the notice names all three.
  back, not worth it   nothing slows down: two stages are faster than
                       three, so no move pays. Must say "[rejoin
                       declined] <the worker>" and "0 rejoins".
  back, worth it, three sequences
                       as the first, with `--parallel 3` (the batched
                       engine weighs the move per round while the three
                       run: BatchEngine::rejoin_running); the kill comes
                       once the last stage sent back 6000 bytes (the
                       prompt and about six rounds). Must say "[rejoined]" and
                       "1 rejoins", and print the uninterrupted sequences.

Each must exit 0 with the text of the uninterrupted run, and the restarted
worker must have been probed (its log shows a session).

WEFT_RECOVERY_SOAK=SECONDS runs, instead, random faults for that long
(not part of `make test`): `weft run --recover --parallel 3` over two
workers behind proxies; at a random moment after loading, a kill -9 or a
SIGSTOP of a random stage, and the killed or stopped worker replaced by a
new process at its port once the host recovered. Every run must exit 0
with the uninterrupted run's sequences; prints a summary of the runs and
their recovery notices. WEFT_RECOVERY_SEED seeds it (default 1).

Usage: rejoin_test.py WEFT_BINARY WRITE_TEST_MODEL_BINARY
"""
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fault_run_common import PROXY, Listening, parse_args, write_small_model  # noqa: E402

TOKENS = 96
PARALLEL_TOKENS = 48  # each of the three sequences
PARALLEL_KILL_BYTES = 6000
PROMPT = "The quick brown fox jumps over the lazy dog"


def worker(weft, folder, name, port=0):
    return Listening([weft, "worker", "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
                     os.path.join(folder, name + ".worker.log"))


def proxy(folder, name, target, mode, delay_ms, after_bytes=None):
    """A fault proxy in mode (switched through its control file), or with
    after_bytes, in pass until that many bytes came back, then in mode."""
    control = os.path.join(folder, name + ".control")
    with open(control, "w") as f:
        f.write(mode)
    argv = [sys.executable, PROXY, "--target", target, "--delay-ms", str(delay_ms)]
    argv += ["--control", control] if after_bytes is None else ["--mode", mode, "--after-bytes", str(after_bytes)]
    return Listening(argv, os.path.join(folder, name + ".proxy.log")), control


def set_mode(control, mode):
    with open(control + ".new", "w") as f:
        f.write(mode)
    os.replace(control + ".new", control)


def one_run(weft, model, folder, slow_survivor, kill_at_chars, parallel=0):
    """Returns (problem or None, text, stderr). parallel: --parallel N, the
    kill after PARALLEL_KILL_BYTES came back from the last stage."""
    w0, w1 = worker(weft, folder, "w0"), worker(weft, folder, "w1")
    port1 = int(w1.endpoint.rsplit(":", 1)[1])
    # Paced, so that the restart lands mid-generation; the survivor's link
    # carries no delay before the loss when it is to turn slow after it.
    p0, c0 = proxy(folder, "p0", w0.endpoint, "pass" if slow_survivor else "delay", 30 if slow_survivor else 8)
    # With --parallel the sequences print at the end: the kill follows the
    # bytes the last stage sent back (about 0.8 KB a round of the three
    # sequences' hidden states), PARALLEL_KILL_BYTES of them: the prompt
    # and a few rounds measured, most of the rounds still to come, however
    # fast the build runs.
    p1, _ = proxy(folder, "p1", w1.endpoint, "delay", 8, PARALLEL_KILL_BYTES if parallel else None)
    restarted = []
    argv = [weft, "run", "-m", model, "-p", PROMPT, "-n", str(PARALLEL_TOKENS if parallel else TOKENS), "-t", "1",
            "--recover", "--stats",
            "--worker", p0.endpoint, "--worker", p1.endpoint, "--split", "1,1,1"]
    if parallel:
        argv += ["--parallel", str(parallel)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killer = threading.Timer(90, proc.kill)
    killer.start()
    err = []
    killed_at_bytes = []

    def kill_at_bytes():
        while proc.poll() is None and not any("fault delay at" in line for _, line in p1.lines):
            time.sleep(0.01)
        if proc.poll() is None:
            w1.proc.kill()
            killed_at_bytes.append(True)

    if parallel:
        threading.Thread(target=kill_at_bytes, daemon=True).start()

    def read_err():
        for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            err.append(line)
            if line.startswith("[recovered]") and not restarted:
                if slow_survivor:
                    set_mode(c0, "delay")
                restarted.append(worker(weft, folder, "w1-again", port1))

    t = threading.Thread(target=read_err, daemon=True)
    t.start()
    out = bytearray()
    killed = False
    try:
        while True:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            out += chunk
            if not parallel and not killed and len(out) >= kill_at_chars:
                w1.proc.kill()
                killed = True
        proc.wait()
        t.join(10)
        killed = killed or bool(killed_at_bytes)
    finally:
        killer.cancel()
        for p in [p0, p1, w0, w1] + restarted:
            p.stop()
    stderr = "\n".join(err)
    if proc.returncode != 0:
        return f"exit status {proc.returncode}", bytes(out), stderr
    if not killed or "[recovered]" not in stderr:
        return "no recovery (the kill came after the text?)", bytes(out), stderr
    if not restarted:
        return "the worker was not started again", bytes(out), stderr
    with open(os.path.join(folder, "w1-again.worker.log")) as f:
        if "session" not in f.read():
            return "the restarted worker was never probed (no session in its log)", bytes(out), stderr
    back = re.escape(p1.endpoint)
    if slow_survivor:
        m = re.search(r"\[rejoined\] " + back + r" back; now (.*); reloaded", stderr)
        if not m:
            return "no [rejoined] notice naming " + p1.endpoint, bytes(out), stderr
        if p0.endpoint not in m.group(1) or p1.endpoint not in m.group(1) or "host" not in m.group(1):
            return "the placement after the rejoin does not hold all three: " + m.group(1), bytes(out), stderr
        if "recovery: 1 recoveries, 1 rejoins" not in stderr:
            return "--stats does not count the rejoin", bytes(out), stderr
    else:
        if not re.search(r"\[rejoin declined\] " + back + r" answers again; stays out", stderr):
            return "no [rejoin declined] notice naming " + p1.endpoint, bytes(out), stderr
        if "[rejoined]" in stderr or "recovery: 1 recoveries, 0 rejoins" not in stderr:
            return "moved back though the move could not pay", bytes(out), stderr
    return None, bytes(out), stderr


def soak_run(weft, model, folder, rng, want):
    """One soak run; returns (problem or None, what happened)."""
    w = [worker(weft, folder, "s0"), worker(weft, folder, "s1")]
    ports = [int(x.endpoint.rsplit(":", 1)[1]) for x in w]
    proxies = [proxy(folder, f"sp{i}", w[i].endpoint, "delay", 3)[0] for i in range(2)]
    victim, fault = rng.randrange(2), rng.choice(["kill", "sigstop"])
    delay = rng.uniform(0.0, 0.6)
    argv = [weft, "run", "-m", model, "-p", PROMPT, "-n", "48", "-t", "1", "--recover", "--parallel", "3",
            "--worker", proxies[0].endpoint, "--worker", proxies[1].endpoint, "--split", "1,1,1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killer = threading.Timer(120, proc.kill)
    killer.start()
    err, extra = [], []

    def read_err():
        for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            err.append(line)
            if line.startswith("loaded "):
                threading.Timer(delay, lambda: w[victim].proc.kill() if fault == "kill"
                                else w[victim].proc.send_signal(signal.SIGSTOP)).start()
            if line.startswith("[recovered]") and not extra:
                w[victim].stop()  # a stopped one is ended: its port is taken again
                extra.append(worker(weft, folder, "s-again", ports[victim]))

    t = threading.Thread(target=read_err, daemon=True)
    t.start()
    try:
        out = proc.stdout.read()
        proc.wait()
        t.join(10)
    finally:
        killer.cancel()
        for p in proxies + w + extra:
            p.stop()
    what = f"{fault} of stage {victim} {delay:.2f} s after loading"
    if proc.returncode != 0:
        return f"exit status {proc.returncode}\n" + "\n".join(err), what
    if out != want:
        return f"text differs:\n  want {want!r}\n  got  {out!r}", what
    recovered = [l for l in err if l.startswith("[recovered]")]
    return None, what + (": recovered" if recovered else ": done before the fault")


def soak(weft, model, folder, seconds):
    rng = random.Random(int(os.environ.get("WEFT_RECOVERY_SEED", "1")))
    want = subprocess.run([weft, "run", "-m", model, "-p", PROMPT, "-n", "48", "-t", "1", "--parallel", "3"],
                          capture_output=True, check=True).stdout
    end = time.monotonic() + seconds
    runs = failures = recovered = 0
    while time.monotonic() < end:
        runs += 1
        problem, what = soak_run(weft, model, folder, rng, want)
        recovered += what.endswith(": recovered")
        if problem:
            failures += 1
            print(f"FAIL soak {runs}: {what}: {problem}", flush=True)
        else:
            print(f"ok   soak {runs}: {what}", flush=True)
    print(f"soak: {runs} runs in {seconds} s, {recovered} recovered, {failures} failures", flush=True)
    return failures


def main():
    args = parse_args(__doc__)
    if args is None:
        return 2
    weft, writer = args
    folder = tempfile.mkdtemp(prefix="weft_rejoin_")
    failures = 0
    try:
        model = os.path.join(folder, "model.gguf")
        write_small_model(writer, model)
        want = subprocess.run([weft, "run", "-m", model, "-p", PROMPT, "-n", str(TOKENS), "-t", "1"],
                              capture_output=True, check=True).stdout
        soak_seconds = float(os.environ.get("WEFT_RECOVERY_SOAK", "0") or 0)
        if soak_seconds > 0:
            return 1 if soak(weft, model, folder, soak_seconds) else 0
        want_parallel = subprocess.run([weft, "run", "-m", model, "-p", PROMPT, "-n", str(PARALLEL_TOKENS), "-t", "1",
                                        "--parallel", "3"], capture_output=True, check=True).stdout
        at_token_8 = max(1, len(want) * 8 // TOKENS)
        for name, slow, parallel in (("back, and worth it", True, 0), ("back, not worth it", False, 0),
                                     ("back, worth it, three sequences", True, 3)):
            problem, text, stderr = one_run(weft, model, folder, slow, at_token_8, parallel)
            if problem is None and text != (want_parallel if parallel else want):
                problem = f"text differs:\n  want {want!r}\n  got  {text!r}"
            if problem:
                failures += 1
                print(f"FAIL {name}: {problem}\n{stderr}", flush=True)
            else:
                notice = [l for l in stderr.splitlines() if l.startswith("[rejoin")]
                print(f"ok   {name}: identical text; {notice[0] if notice else ''}", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
