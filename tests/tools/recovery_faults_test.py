#!/usr/bin/env python3
"""`weft run --recover` through faults no TCP close reveals (docs/recovery.md).

A 64-token greedy generation over this host and two `weft worker`
processes (layers 1,1,1), each worker behind tests/tools/fault_proxy.py,
with no --worker-timeout. At a fixed point of the text, one fault:

  sigstop    the last stage's process is stopped (SIGSTOP): TCP still
             sees it alive; only the missing heartbeats tell
  sigstop-1  the middle stage is stopped while the last one waits for its
             push (the host waits on a live worker)
  half-open  the last stage's proxy drops everything and closes nothing
             (a peer gone without FIN)
  stall      the last stage's proxy reads nothing more and closes nothing
             (a link that hangs: writes block once the buffers fill)
  prompt-kill  the middle stage is killed (SIGKILL) while a 251-token
             prompt goes through the stages in micro-batches
  prompt-stop  the middle stage is stopped (SIGSTOP) in the same place

Each run must finish with exit status 0 and the text of the uninterrupted
run, and say "[recovered]" on stderr; the detection time (fault to the
recovery notice, less the notice's reload and re-evaluation times) is
printed and must be under 5 s.

WEFT_RECOVERY_LONG=N adds N random runs (kill -9, SIGSTOP, half-open or cut
of either stage at a random token), with a summary of detection times;
WEFT_RECOVERY_SEED seeds them (default 1).

Usage: recovery_faults_test.py WEFT_BINARY WRITE_TEST_MODEL_BINARY
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

TOKENS = 64
PROMPT = "The quick brown fox jumps over the lazy dog"
LONG_PROMPT = " ".join(["A pooled machine can sleep, drop off the network or reboot at any token."] * 5)
DETECT_LIMIT_S = 5.0
# A run whose text was complete before the fault began (this script was not
# scheduled in time on a loaded machine): it proves nothing, and is run again.
LATE = "late"


class Stage:
    """A worker and the proxy in front of it; the host dials the proxy."""

    def __init__(self, weft, folder, name):
        self.control = os.path.join(folder, name + ".control")
        with open(self.control, "w") as f:
            f.write("delay")  # paced, so that a fault lands mid-generation
        self.worker = Listening([weft, "worker", "--host", "127.0.0.1", "--port", "0", "--threads", "1"],
                                os.path.join(folder, name + ".worker.log"))
        self.proxy = Listening([sys.executable, PROXY, "--target", self.worker.endpoint, "--delay-ms", "3",
                                "--control", self.control], os.path.join(folder, name + ".proxy.log"))
        self.endpoint = self.proxy.endpoint

    def fault(self, kind):
        """Starts the fault; returns its time.monotonic()."""
        if kind == "kill":
            t = time.monotonic()
            self.worker.proc.kill()
            return t
        if kind == "sigstop":
            t = time.monotonic()
            self.worker.proc.send_signal(signal.SIGSTOP)
            return t
        n = len(self.proxy.lines)
        with open(self.control + ".new", "w") as f:
            f.write(kind)
        os.replace(self.control + ".new", self.control)
        for _ in range(500):  # the proxy prints "fault MODE at ..., T s" when it switched
            for _, line in self.proxy.lines[n:]:
                m = re.match(r"fault (\S+) at \d+ bytes, ([0-9.]+) s", line)
                if m and m.group(1) == kind:
                    return float(m.group(2))
            time.sleep(0.01)
        raise RuntimeError(f"the proxy did not switch to {kind}")

    def stop(self):
        self.proxy.stop()
        self.worker.stop()


def run_weft(argv, trigger_chars=None, on_trigger=None, trigger_on_stderr=None, timeout=60):
    """Runs weft; calls on_trigger() once stdout has trigger_chars characters
    (or a stderr line matches trigger_on_stderr). Returns (rc, stdout,
    [(time, stderr line)], on_trigger's result or None, time of stdout's first
    byte or None, whether the text was complete when the fault began)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = bytearray()
    first_out = [None]  # when stdout's first byte came
    err_lines = []
    fired = [None]
    fired_at_chars = [None]  # how much of stdout had come when the fault began
    lock = threading.Lock()

    def fire():
        with lock:
            if fired[0] is None and on_trigger is not None:
                fired_at_chars[0] = len(out)
                fired[0] = on_trigger()

    def read_err():
        for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            err_lines.append((time.monotonic(), line))
            if trigger_on_stderr and re.search(trigger_on_stderr, line):
                fire()

    t = threading.Thread(target=read_err, daemon=True)
    t.start()
    deadline = time.monotonic() + timeout
    killer = threading.Timer(timeout, proc.kill)  # a hung run ends the reads below
    killer.start()
    while True:
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        if first_out[0] is None:
            first_out[0] = time.monotonic()
        out += chunk
        if trigger_chars is not None and len(out) >= trigger_chars:
            fire()
    proc.wait()
    killer.cancel()
    if time.monotonic() >= deadline:
        err_lines.append((time.monotonic(), f"(killed after {timeout} s)"))
    t.join(5)
    late = fired_at_chars[0] is not None and fired_at_chars[0] >= len(out.rstrip(b"\n"))
    return proc.returncode, bytes(out), err_lines, fired[0], first_out[0], late


def detection_seconds(err_lines, fault_at):
    """Fault to the recovery notice, less the reload and re-evaluation it reports."""
    for t, line in err_lines:
        m = re.search(r"\[recovered\].*reloaded in ([0-9.]+) s(?:, \d+ tokens re-evaluated in ([0-9.]+) s)?", line)
        if m:
            return max(0.0, t - fault_at - float(m.group(1)) - float(m.group(2) or 0))
    return None


def one_run(weft, model, folder, prompt, fault, victim, at_chars=None, on_stderr=None, in_prompt=False):
    """A recovering run with `fault` on stage `victim` (0 or 1); returns
    (problem or None, detection seconds, text). in_prompt: the fault must
    come before the first token (during prompt processing)."""
    stages = []
    try:
        stages = [Stage(weft, folder, "w0"), Stage(weft, folder, "w1")]
        argv = [weft, "run", "-m", model, "-p", prompt, "-n", str(TOKENS), "-t", "1", "--recover",
                "--worker", stages[0].endpoint, "--worker", stages[1].endpoint, "--split", "1,1,1"]
        def trigger():
            if in_prompt:
                time.sleep(0.03)  # into the prompt's micro-batches
            return stages[victim].fault(fault)

        rc, text, err, fault_at, first_out, late = run_weft(argv, at_chars, trigger, on_stderr)
        stderr = "\n".join(line for _, line in err)
        if late and "[recovered]" not in stderr:
            return LATE, None, text
        if fault_at is None:
            return "the fault was never triggered (the run ended first?)\n" + stderr, None, text
        if in_prompt and first_out is not None and first_out < fault_at:
            return "the prompt was done before the fault (the first token came first)", None, text
        if rc != 0:
            return f"exit status {rc}\n{stderr}", None, text
        if "[recovered]" not in stderr:
            return "no [recovered] notice\n" + stderr, None, text
        return None, detection_seconds(err, fault_at), text
    finally:
        for s in stages:
            s.stop()


def main():
    args = parse_args(__doc__)
    if args is None:
        return 2
    weft, writer = args
    folder = tempfile.mkdtemp(prefix="weft_recovery_faults_")
    failures = 0
    late_runs = 0  # runs again because the fault came after the text
    try:
        model = os.path.join(folder, "model.gguf")
        write_small_model(writer, model)
        reference = {}
        for p in (PROMPT, LONG_PROMPT):
            r = subprocess.run([weft, "run", "-m", model, "-p", p, "-n", str(TOKENS), "-t", "1"], capture_output=True,
                               check=True)  # bytes: a test model's tokens need not be UTF-8
            reference[p] = r.stdout
        at_token_20 = max(1, len(reference[PROMPT]) * 20 // TOKENS)

        def check(name, prompt, fault, victim, **kw):
            nonlocal failures, late_runs
            for _ in range(3):
                problem, detect, text = one_run(weft, model, folder, prompt, fault, victim, **kw)
                if problem != LATE:
                    break
                late_runs += 1
                print(f"     {name}: the text was complete before the fault began: run again", flush=True)
            if problem == LATE:
                problem = "the fault came after the end of the text, three times"
            if problem is None and text != reference[prompt]:
                problem = f"text differs:\n  want {reference[prompt]!r}\n  got  {text!r}"
            if problem is None and (detect is None or detect > DETECT_LIMIT_S):
                problem = f"detection took {detect} s (limit {DETECT_LIMIT_S} s)"
            if problem:
                failures += 1
                print(f"FAIL {name}: {problem}", flush=True)
            else:
                print(f"ok   {name}: identical text, detected in {detect:.2f} s", flush=True)
            return detect

        # The fixed sample: each fault at about token 20 of 64.
        check("sigstop of the last stage", PROMPT, "sigstop", 1, at_chars=at_token_20)
        check("sigstop of the middle stage", PROMPT, "sigstop", 0, at_chars=at_token_20)
        check("half-open cut of the last stage", PROMPT, "half-open", 1, at_chars=at_token_20)
        check("stalled link of the last stage", PROMPT, "stall", 1, at_chars=at_token_20)
        # Killed 30 ms after loading, while the paced micro-batches of the prompt go through.
        check("kill -9 during prompt processing", LONG_PROMPT, "kill", 0, on_stderr=r"^loaded ", in_prompt=True)
        # The host waits on the last stage's logits while the stopped middle
        # one holds micro-batches back: found by the probe, then given up.
        check("sigstop of the middle stage during prompt processing", LONG_PROMPT, "sigstop", 0,
              on_stderr=r"^loaded ", in_prompt=True)

        runs = int(os.environ.get("WEFT_RECOVERY_LONG", "0") or 0)
        if runs > 0:
            rng = random.Random(int(os.environ.get("WEFT_RECOVERY_SEED", "1")))
            times = {}
            for i in range(runs):
                fault = rng.choice(["kill", "sigstop", "half-open", "cut"])
                victim = rng.randrange(2)
                token = rng.randrange(2, TOKENS - 4)
                chars = max(1, len(reference[PROMPT]) * token // TOKENS)
                d = check(f"long {i + 1}/{runs}: {fault} of stage {victim} at token ~{token}", PROMPT, fault, victim,
                          at_chars=chars)
                if d is not None:
                    times.setdefault(fault, []).append(d)
            for fault, ds in sorted(times.items()):
                ds.sort()
                print(f"long mode: {fault}: {len(ds)} runs, detection median {ds[len(ds) // 2]:.2f} s, "
                      f"max {ds[-1]:.2f} s")
            print(f"long mode: {runs - failures} of {runs} runs identical (with the fixed sample: {failures} failures; "
                  f"{late_runs} runs again for a fault after the text)", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
