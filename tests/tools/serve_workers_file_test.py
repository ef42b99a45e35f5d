#!/usr/bin/env python3
"""`weft serve --workers-file` and SIGHUP (docs/recovery.md "Workers added
while serving"), through the real binary.

Two `weft worker` processes; the workers file names the first. The server
starts over this host and it (/v1/pool: 2 devices). A malformed line
appended and SIGHUP: the server says which line and keeps its devices.
The line replaced by the second worker and SIGHUP again: the server says
it added one, and once idle takes it in (/v1/pool: 3 devices, none
joining, the new worker holding layers), and a greedy completion then gives
the text it gave before. SIGHUP with nothing new: "no new worker". The
first worker's line removed and SIGHUP: the server takes it out when idle
("[removed]", /v1/pool: 2 devices, this host and the second worker, none
leaving), and the completion's text is still the same.

Usage: serve_workers_file_test.py WEFT_BINARY WRITE_TEST_MODEL_BINARY
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fault_run_common import Listening, parse_args, write_small_model  # noqa: E402

BODY = {"prompt": "The quick brown fox", "max_tokens": 12, "temperature": 0, "ignore_eos": True}


def get(base, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def wait_for(cond, seconds, what):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"not within {seconds} s: {what}")


def main():
    args = parse_args(__doc__)
    if args is None:
        return 2
    weft, writer = args
    folder = tempfile.mkdtemp(prefix="weft_workers_file_")
    procs = []
    server = None
    try:
        model = os.path.join(folder, "small.gguf")
        write_small_model(writer, model)
        for name in ("a", "b"):
            procs.append(Listening([weft, "worker", "--host", "127.0.0.1", "--port", "0", "--threads", "1"],
                                   os.path.join(folder, name + ".worker.log")))
        a, b = procs[0].endpoint, procs[1].endpoint
        workers = os.path.join(folder, "workers.txt")
        with open(workers, "w") as f:
            f.write(f"# the pool\n{a}\n")
        port_file = os.path.join(folder, "port")
        log_path = os.path.join(folder, "serve.log")
        log = open(log_path, "w")
        server = subprocess.Popen([weft, "serve", "-m", model, "-t", "1", "--workers-file", workers,
                                   "--placement", "memory", "--port", "0", "--port-file", port_file, "--quiet",
                                   "-c", "512"], stdout=log, stderr=log)
        wait_for(lambda: os.path.exists(port_file), 30, "the server's port")
        base = "http://127.0.0.1:" + open(port_file).read().strip()

        def health():
            try:
                return get(base, "/health").get("status") == "ok"
            except Exception:  # 503 while loading
                return False

        wait_for(health, 60, "the server ready")
        pool = get(base, "/v1/pool")
        assert len(pool["devices"]) == 2, pool["devices"]
        before = get(base, "/v1/completions", BODY)["choices"][0]["text"]

        def said(text):
            return lambda: text in open(log_path).read()

        with open(workers, "a") as f:
            f.write("10.0.0.1\n")  # no port: refused, naming the line
        server.send_signal(signal.SIGHUP)
        wait_for(said("workers.txt:3"), 30, "the bad line named")
        assert len(get(base, "/v1/pool")["devices"]) == 2

        with open(workers, "w") as f:
            f.write(f"# the pool\n{a}\n{b}   # the second\n")
        server.send_signal(signal.SIGHUP)
        wait_for(said("1 new worker(s)"), 30, "the new worker acknowledged")

        def three():
            p = get(base, "/v1/pool")
            return p if len(p["devices"]) == 3 and not p["engine"]["devices_joining"] else None

        pool = wait_for(three, 30, f"{b} taken in")
        assert pool["engine"]["rejoins"] == 1, pool["engine"]
        assert get(base, "/health")["status"] == "ok"
        after = get(base, "/v1/completions", BODY)["choices"][0]["text"]
        assert after == before, f"{after!r} != {before!r}"
        server.send_signal(signal.SIGHUP)
        wait_for(said("no new worker"), 30, "a SIGHUP with nothing new")

        with open(workers, "w") as f:
            f.write(f"{b}\n")
        server.send_signal(signal.SIGHUP)
        wait_for(said("1 worker(s) removed"), 30, "the removal acknowledged")

        def two():
            p = get(base, "/v1/pool")
            return p if len(p["devices"]) == 2 and not p["engine"]["devices_leaving"] else None

        left = wait_for(two, 30, f"{a} taken out")
        labels = [d.get("label") for d in left["devices"]]
        assert a not in labels and b in labels, labels
        wait_for(said(f"[removed] {a}; now"), 10, "the [removed] notice")
        assert get(base, "/health")["status"] == "ok"
        last = get(base, "/v1/completions", BODY)["choices"][0]["text"]
        assert last == before, f"{last!r} != {before!r}"
        print(f"serve_workers_file: {b} taken in after SIGHUP; devices {[d.get('label') for d in pool['devices']]}; "
              f"{a} taken out after another; devices {labels}; the same text: {after!r}")
        return 0
    except Exception:
        for name in ("serve.log", "a.worker.log", "b.worker.log"):
            path = os.path.join(folder, name)
            if os.path.exists(path):
                print(f"--- {name}\n" + open(path).read()[-3000:])
        raise
    finally:
        if server is not None and server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                server.kill()
        for p in procs:
            p.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
