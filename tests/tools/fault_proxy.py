#!/usr/bin/env python3
"""A fault-injecting TCP proxy for the recovery tests (docs/recovery.md).

Listens on 127.0.0.1, forwards every connection to a target, and at a
trigger turns to a fault:

  delay      every chunk waits --delay-ms before it is forwarded
  rate       forwarding is capped at --rate bytes per second (each way)
  stall      nothing is read any more; the connections stay open (the
             peers' writes block once the kernel buffers are full)
  cut        every connection is closed, both sides (a peer that ended)
  half-open  everything is read and dropped, nothing forwarded, nothing
             closed: a peer gone without FIN, a cable pulled
  pass       forward as usual (the default; also how a fault is lifted)

Triggers: --mode applies from the start unless --after-bytes N (once N
bytes came back from the target, all connections together; a chunk that
crosses N is cut there and its rest dropped, so the fault falls at a fixed
point of the byte stream), --after-seconds S, or SIGUSR1 is given; SIGUSR2
goes back to pass; a --control FILE, polled every 20 ms, switches to the
mode it names whenever its content changes. Connections accepted while
faulty are treated alike (half-open: accepted and ignored; cut: closed).

On start it prints "listening on 127.0.0.1:PORT" on stdout; each switch
prints "fault MODE at BYTES bytes, T s" (T: time.monotonic()) on stdout, so
a test can measure from the moment a fault began.

Usage: fault_proxy.py --target HOST:PORT [--port P] [--mode M]
                      [--after-bytes N | --after-seconds S] [--delay-ms D]
                      [--rate BYTES_PER_S] [--control FILE]
"""
import argparse
import os
import signal
import socket
import sys
import threading
import time

MODES = ("pass", "delay", "rate", "stall", "cut", "half-open")
CHUNK = 64 * 1024
POLL = 0.02  # seconds: how often a pump looks at the mode while it waits


class Proxy:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.mode = "pass"
        self.armed = args.mode  # the fault a trigger switches to
        self.down_bytes = 0     # bytes from the target, forwarded
        self.sockets = []       # every socket of every connection, for cut

    def switch(self, mode):
        with self.lock:
            if mode == self.mode:
                return
            self.mode = mode
            at = self.down_bytes
            socks = list(self.sockets) if mode == "cut" else []
        print(f"fault {mode} at {at} bytes, {time.monotonic():.6f} s", flush=True)
        for s in socks:
            close_both(s)

    def current(self):
        with self.lock:
            return self.mode

    def pump(self, src, dst, down):
        """Forwards src to dst by the mode in force; returns when either ends."""
        src.settimeout(POLL)
        rate_start, rate_sent = time.monotonic(), 0
        while True:
            mode = self.current()
            if mode == "cut":
                break
            if mode == "stall":
                time.sleep(POLL)
                continue
            try:
                data = src.recv(CHUNK)
            except socket.timeout:
                continue
            except OSError:
                break
            if not data:
                break  # half-open: the other side is not told (see below)
            mode = self.current()
            if mode == "half-open":
                continue
            if down and self.args.after_bytes is not None:
                with self.lock:
                    before = self.down_bytes
                    self.down_bytes += len(data)
                left = self.args.after_bytes - before
                if 0 <= left < len(data):  # this chunk crosses the trigger: its rest is the fault's
                    data = data[:left]
                    send_all(dst, data)
                    self.switch(self.armed)
                    continue
            elif down:
                with self.lock:
                    self.down_bytes += len(data)
            if mode == "delay":
                time.sleep(self.args.delay_ms / 1000.0)
            elif mode == "rate" and self.args.rate > 0:
                rate_sent += len(data)
                ahead = rate_sent / self.args.rate - (time.monotonic() - rate_start)
                if ahead > 0:
                    time.sleep(ahead)
            if not send_all(dst, data):
                break
        if self.current() != "half-open":
            close_both(src)
            close_both(dst)

    def serve(self, client):
        mode = self.current()
        if mode == "cut":
            close_both(client)
            return
        target = None
        if mode not in ("half-open", "stall"):
            try:
                host, port = self.args.target.rsplit(":", 1)
                target = socket.create_connection((host, int(port)), timeout=5)
                target.settimeout(None)
                target.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                close_both(client)
                return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.lock:
            self.sockets.append(client)
            if target:
                self.sockets.append(target)
        if target is None:  # accepted while faulty: held open and ignored
            return
        threading.Thread(target=self.pump, args=(client, target, False), daemon=True).start()
        threading.Thread(target=self.pump, args=(target, client, True), daemon=True).start()


def send_all(sock, data):
    try:
        sock.sendall(data)
        return True
    except OSError:
        return False


def close_both(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


def watch_control(proxy, path):
    last = None
    while True:
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            text = None
        if text and text != last:
            last = text
            if text in MODES:
                proxy.switch(text)
            else:
                print(f"fault_proxy: control file names no mode: {text!r}", file=sys.stderr, flush=True)
        time.sleep(0.02)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", required=True, help="HOST:PORT to forward to")
    p.add_argument("--port", type=int, default=0, help="port to listen on (0: a free one)")
    p.add_argument("--mode", choices=MODES, default="pass", help="the fault a trigger turns on")
    p.add_argument("--after-bytes", type=int, help="trigger once this many bytes came back from the target")
    p.add_argument("--after-seconds", type=float, help="trigger this long after start")
    p.add_argument("--delay-ms", type=float, default=50.0)
    p.add_argument("--rate", type=float, default=1 << 20, help="bytes per second in rate mode")
    p.add_argument("--control", help="a file naming the mode to switch to")
    args = p.parse_args()
    if args.after_bytes is not None and args.after_bytes < 0:
        p.error("--after-bytes must be >= 0")

    proxy = Proxy(args)
    triggered = args.after_bytes is not None or args.after_seconds is not None
    if not triggered and args.mode in ("delay", "rate"):
        proxy.mode = args.mode  # shaping from the start
    signal.signal(signal.SIGUSR1, lambda *_: threading.Thread(target=proxy.switch, args=(proxy.armed,)).start())
    signal.signal(signal.SIGUSR2, lambda *_: threading.Thread(target=proxy.switch, args=("pass",)).start())
    if args.after_seconds is not None:
        threading.Timer(args.after_seconds, proxy.switch, args=(args.mode,)).start()
    if args.control:
        threading.Thread(target=watch_control, args=(proxy, args.control), daemon=True).start()

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(64)
    print(f"listening on 127.0.0.1:{listener.getsockname()[1]}", flush=True)
    while True:
        try:
            client, _ = listener.accept()
        except InterruptedError:
            continue
        proxy.serve(client)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        os._exit(0)
