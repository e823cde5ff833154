#!/usr/bin/env python3
"""First handshakes for new names against an on-demand TLS server (bench/acme.sh).

Each name is connected to once, with SNI, verifying the served chain against --root: the time from
the TCP connect to a finished, verified handshake is the time to a served certificate for a name
the server had none for (ordered from the ACME CA within the handshake).  Prints one JSON line:
count, ok, failed, p50_ms, p99_ms, max_ms, wall_s, names_per_min.
"""
import argparse
import json
import socket
import ssl
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--prefix", required=True, help="names are PREFIX-N.DOMAIN")
    ap.add_argument("--domain", default="bench.test")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0)
    a = ap.parse_args()
    ctx = ssl.create_default_context(cafile=a.root)
    names = [f"{a.prefix}-{i}.{a.domain}" for i in range(a.count)]
    times, failed, lock = [], [], threading.Lock()
    it = iter(names)

    def worker():
        while True:
            with lock:
                name = next(it, None)
            if name is None:
                return
            start = time.perf_counter()
            try:
                with socket.create_connection(("127.0.0.1", a.port), timeout=a.timeout) as raw:
                    with ctx.wrap_socket(raw, server_hostname=name):
                        took = time.perf_counter() - start
                with lock:
                    times.append(took)
            except Exception as e:  # a refused or failed handshake counts as failed
                with lock:
                    failed.append(f"{name}: {e}")

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    times.sort()

    def pct(p):
        if not times:
            return None
        return round(times[min(len(times) - 1, int(p / 100 * len(times)))] * 1000, 1)

    print(json.dumps({
        "count": a.count, "ok": len(times), "failed": len(failed), "first_failures": failed[:3],
        "p50_ms": pct(50), "p99_ms": pct(99), "max_ms": round(times[-1] * 1000, 1) if times else None,
        "wall_s": round(wall, 2), "names_per_min": round(len(times) / wall * 60, 1) if wall else None,
    }))


if __name__ == "__main__":
    main()
