#!/usr/bin/env python3
"""`weft chat` and `weft run -cnv` driven through a pseudo-terminal, as a
person types them, on a tiny model that carries a chat template:

- two turns: the first reply's text equals what `weft run` generates for the
  same rendered prompt (greedy), the second turn reuses the first from the
  KV cache (its --stats line: reused = the first turn's positions, and only
  a handful of tokens evaluated), and end of input (Ctrl-D) exits 0;
- the same split over a `weft worker --mem 64MiB` (its log states "64 MiB"),
  the same text;
- Ctrl-C during a long reply returns to the prompt, the next turn works, and
  Ctrl-C at the prompt exits 0;
- `weft worker --mem 64` and `--mem 64XB` are refused, naming the option.

Usage: chat_pty_test.py WEFT_BINARY WRITE_TEST_MODEL_BINARY
"""
import os
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

WEFT, WRITER = sys.argv[1], sys.argv[2]
TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}</s>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def die(msg, out=""):
    print("FAIL:", msg)
    if out:
        print("--- output ---\n" + out)
    sys.exit(1)


def terminal_text(raw):
    """Bytes a program wrote to the terminal as text to match: one character
    per byte (a reply from random weights need not be UTF-8), newlines as
    written (the terminal turns each into CR LF)."""
    return raw.decode("latin-1").replace("\r\n", "\n")


class Terminal:
    """A command on a pseudo-terminal: what it prints, what is typed."""

    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], argv)
        self.raw = b""
        self.out = ""

    def expect(self, pattern, timeout=60, since=0):
        """Waits until pattern matches the output from index since; the match."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern, re.S)
        while True:
            m = rx.search(self.out, since)
            if m:
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                die(f"no {pattern!r} within {timeout} s", self.out)
            r, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:  # the child closed the terminal
                    data = b""
                if not data:
                    m = rx.search(self.out, since)
                    if m:
                        return m
                    die(f"the program ended before {pattern!r}", self.out)
                self.raw += data
                self.out = terminal_text(self.raw)

    def type(self, text):
        os.write(self.fd, text.encode())

    def wait(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:  # drain, so the child never blocks on a full terminal
                if select.select([self.fd], [], [], 0.1)[0]:
                    data = os.read(self.fd, 65536)
                    self.raw += data
                self.out = terminal_text(self.raw)
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, signal.SIGKILL)
        die("the program did not exit", self.out)


def prompt_count(t):
    return len(re.findall(r"(?m)^> ", t.out))


def turn(t, text, timeout=60):
    """Types a line at the prompt; returns the reply text and its stats line."""
    n = prompt_count(t)
    start = len(t.out)
    t.type(text + "\n")
    m = t.expect(r"\[turn: (\d+) new tokens evaluated, (\d+) reused from the cache[^\n]*; (\d+) reply tokens "
                 r"[^\n]*stopped by (\w+)[^\n]*\]\n", timeout, start)
    deadline = time.monotonic() + timeout
    while prompt_count(t) <= n:
        t.expect(r"(?m)^> ", max(0.1, deadline - time.monotonic()), start)
    # The echo of the line, then the reply up to the stats line.
    body = t.out[start:m.start()]
    echo = body.find(text + "\n")
    if echo < 0:
        die(f"the terminal did not echo {text!r}", t.out)
    reply = body[echo + len(text) + 1:]
    return reply.rstrip("\n"), int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)


def two_turns(argv, reference):
    t = Terminal(argv)
    t.expect(r"(?m)^> ")
    reply1, eval1, reused1, n1, stop1 = turn(t, "Hello there")
    if reply1 != reference:
        die(f"the first reply {reply1!r} is not what weft run generates for the same prompt: {reference!r}", t.out)
    if reused1 != 0:
        die(f"the first turn reused {reused1} positions", t.out)
    reply2, eval2, reused2, _, _ = turn(t, "And again")
    if not reply2.strip():
        die("no text in the second reply", t.out)
    # Turn 1 left its prompt and its reply tokens in the cache, but for the
    # last when -n stopped it (not evaluated); turn 2 evaluates that one and
    # "</s><|user|>And again</s><|assistant|>" (at most a token per
    # character), never turn 1 again.
    kept = n1 if stop1 in ("end_of_generation", "stop_token") else n1 - 1
    if reused2 != eval1 + kept:
        die(f"turn 2 reused {reused2} positions, expected turn 1's {eval1} + {kept}", t.out)
    delta = "</s><|user|>And again</s><|assistant|>"
    if not 1 <= eval2 <= 1 + len(delta) or eval2 >= eval1:
        die(f"turn 2 evaluated {eval2} tokens (turn 1: {eval1}): it re-evaluated earlier turns", t.out)
    t.type("\x04")  # Ctrl-D at an empty line: end of input
    status = t.wait()
    if status != 0:
        die(f"exit status {status} after end of input", t.out)
    print(f"two turns ({' '.join(argv[1:3])}): reply {reply1!r}; turn 2 evaluated {eval2}, reused {reused2}")
    return reply2


def main():
    d = tempfile.mkdtemp()
    model = os.path.join(d, "chat.gguf")
    subprocess.run([WRITER, model, "--ctx", "65536", "--chat-template", TEMPLATE], check=True,
                   stdout=subprocess.DEVNULL)
    procs = []
    try:
        # The reference: the first turn's rendered prompt through `weft run`.
        rendered = "<|system|>Be brief.</s><|user|>Hello there</s><|assistant|>"
        ref = subprocess.run([WEFT, "run", "-m", model, "-t", "1", "-c", "512", "-n", "16", "--special",
                              "-p", rendered], capture_output=True, timeout=120)
        if ref.returncode != 0:
            die("weft run failed", ref.stderr.decode("latin-1"))
        reference = terminal_text(ref.stdout.replace(b"\n", b"\r\n")).rstrip("\n")

        common = ["-m", model, "-t", "1", "-c", "512", "-n", "16", "--system", "Be brief.", "--stats"]
        local2 = two_turns([WEFT, "run", "-cnv", *common], reference)

        # A worker with a budget in units; the same chat split over it.
        log = open(os.path.join(d, "worker.log"), "w+")
        w = subprocess.Popen([WEFT, "worker", "--host", "127.0.0.1", "--port", "0", "--threads", "1",
                              "--mem", "64MiB"], stdout=log, stderr=subprocess.STDOUT)
        procs.append(w)
        endpoint = None
        for _ in range(200):
            log.seek(0)
            text = log.read()
            m = re.search(r"listening on (127\.0\.0\.1:\d+)", text)
            if m:
                endpoint = m.group(1)
                break
            time.sleep(0.05)
        if not endpoint:
            die("the worker did not start", text)
        if "memory budget 64 MiB;" not in text:
            die("the worker's log does not state its budget as 64 MiB", text)
        split2 = two_turns([WEFT, "chat", *common, "--worker", endpoint, "--split", "1,1"], reference)
        if split2 != local2:
            die(f"split over a worker, turn 2 differs: {split2!r} vs {local2!r}")

        # Ctrl-C during a long reply (no -n: it runs until the context's end).
        t = Terminal([WEFT, "chat", "-m", model, "-t", "1", "-c", "60000", "--stats"])
        t.expect(r"(?m)^> ")
        for line in ("Tell me a long story", "Another one"):
            start = len(t.out)
            n = prompt_count(t)
            t.type(line + "\n")
            t.expect(re.escape(line) + r"\n.{40}", 60, start)  # the reply is streaming
            t.type("\x03")
            t.expect(r"\[reply stopped by Ctrl-C\]", 20, start)
            m = t.expect(r"stopped by callback", 20, start)
            deadline = time.monotonic() + 20
            while prompt_count(t) <= n:
                t.expect(r"(?m)^> ", max(0.1, deadline - time.monotonic()), start)
        t.type("\x03")  # at the prompt: the chat ends
        status = t.wait()
        if status != 0:
            die(f"exit status {status} after Ctrl-C at the prompt", t.out)
        print("Ctrl-C: two replies stopped, back at the prompt each time; Ctrl-C at the prompt exits 0")

        # Byte options: a plain small number is refused, as is an unknown unit.
        for mem, want in (("64", r"--mem 64 is 64 B, below the smallest useful budget, 1 MiB"),
                          ("64XB", r"--mem.*'64XB' is not a size: unknown unit 'xb'")):
            try:
                r = subprocess.run([WEFT, "worker", "--port", "0", "--mem", mem], capture_output=True, text=True,
                                   timeout=10)
            except subprocess.TimeoutExpired:
                die(f"weft worker --mem {mem} was accepted: the worker started and kept running")
            if r.returncode == 0 or not re.search(want, r.stderr + r.stdout):
                die(f"weft worker --mem {mem}: status {r.returncode}", r.stderr + r.stdout)
        print("weft worker --mem 64 and --mem 64XB refused with the option named")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["rm", "-rf", d])
    print("PASS")


main()
