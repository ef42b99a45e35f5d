"""What the recovery tests share (recovery_faults_test.py, rejoin_test.py,
recovery_times.py): a child process that announces "listening on
HOST:PORT", the fault proxy's path, their command line and the small model
they generate with."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROXY = os.path.join(HERE, "fault_proxy.py")


def parse_args(doc):
    """(WEFT_BINARY, WRITE_TEST_MODEL_BINARY) from the command line, or None
    after printing doc (the usage) when there are not exactly two."""
    if len(sys.argv) != 3:
        print(doc, flush=True)
        return None
    return sys.argv[1], sys.argv[2]


def write_small_model(writer, path):
    """The random-weight model the fault tests generate with: 3 layers, 64
    wide, 4 query heads over 2 kv heads, 600 tokens, 512 positions."""
    subprocess.run([writer, path, "--layers", "3", "--embd", "64", "--heads", "4", "--heads-kv", "2", "--ff", "128",
                    "--vocab", "600", "--ctx", "512"], check=True, stdout=subprocess.DEVNULL)


class Listening:
    """A process that prints "listening on HOST:PORT"; its output lines are kept, timed."""

    def __init__(self, argv, log):
        self.log = open(log, "w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.lines = []  # (time.monotonic(), line)
        self.endpoint = None
        ready = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                m = re.search(r"listening on (127\.0\.0\.1:\d+)", line)
                if m and not self.endpoint:
                    self.endpoint = m.group(1)
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(15) or not self.endpoint:
            self.stop()
            raise RuntimeError(f"{argv[0]} did not start listening (log: {log})")

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGCONT)
                self.proc.kill()
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.log.close()
