#!/usr/bin/env python3
"""TLS connection load generator for bench/tls.sh: every request on a new TCP + TLS
connection, C connections in flight, a bounded number of connections in all.

Question it lets tls.sh answer: how fast does a server complete whole TLS connections
(connect, handshake, one GET, response) when each one carries a different SNI name, resumes
the previous session of its name, or resumes a session that another node made, which
neither ab nor h2load nor openssl s_time can do with concurrency.

Each connection: TCP connect, TLS handshake with the SNI name chosen for it, one
`GET PATH HTTP/1.1` with `Connection: close`, the response read to its Content-Length,
close.  Latency is measured from the connect call to the last body byte; the handshake
time from the connect call to the end of the handshake.
With --resume, each of the C connection slots offers the session its previous connection
to the same name got (ticket or session id, whatever the server gave), so a single-use
ticket is never offered twice; the result counts how many connections the server really
resumed (SSL_session_reused).
With --origin-port P (cross-node resumption, node A = P, node B = --port), every measured
connection to node B is preceded, in its slot, by a connection to node A that offers no
session; the B connection offers the session that A connection got.  So each B connection
offers a session B has never seen, made one response earlier on A, and a single-use TLS 1.3
ticket is offered once.  -n counts the B connections; the A connections are reported
apart under "origin".
With names that the certificate must carry (--check-name), the DER of the served
leaf must contain the name sent, else the connection counts as "wrong_certificate".

Output: one JSON object on stdout (connections, ok, errors by kind, resumed, elapsed_s,
conn_per_s, mean/p50/p90/p99 latency and p50 handshake time in ms, versions seen, and with
--origin-port the same figures for the A connections under "origin").  Exit code 0 when
every connection succeeded, 1 otherwise.  Standard library only; single thread, selectors.

Usage:
    tls_load.py --port P [--host 127.0.0.1] [--path /] -n N -c C
                [--sni NAME | --sni-pattern 'n{}.bench.test' --sni-count K]
                [--resume | --origin-port P2] [--tls 1.2|1.3] [--ciphers LIST] [--check-name]
                [--seed S] [--max-seconds T] [--timeout T]
"""

import argparse
import errno
import json
import random
import selectors
import socket
import ssl
import statistics
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", default="/")
    ap.add_argument("-n", type=int, required=True, help="connections in all (to --port)")
    ap.add_argument("-c", type=int, default=10, help="connections in flight")
    ap.add_argument("--sni", default="bench.test", help="one name for every connection")
    ap.add_argument("--sni-pattern", help="name pattern with {} for 0..K-1, e.g. n{}.bench.test")
    ap.add_argument("--sni-count", type=int, default=0, help="K: names drawn uniformly at random")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="offer the previous session of the same name")
    mode.add_argument("--origin-port", type=int,
                      help="node A: each connection to --port offers a session made there just before")
    ap.add_argument("--tls", choices=["1.2", "1.3", "any"], default="any")
    ap.add_argument("--ciphers", help="TLS 1.2 cipher list (OpenSSL syntax)")
    ap.add_argument("--check-name", action="store_true", help="the served leaf must carry the name sent")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=300.0, help="stop starting connections after this")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-connection time limit")
    a = ap.parse_args()
    if a.n < 1 or a.c < 1:
        ap.error("-n and -c must be at least 1")
    if a.sni_pattern and a.sni_count < 1:
        ap.error("--sni-pattern needs --sni-count >= 1")
    return a


def make_context(a):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the handshake signature is still checked by OpenSSL
    if a.tls == "1.2":
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    elif a.tls == "1.3":
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    else:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if a.ciphers:
        ctx.set_ciphers(a.ciphers)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


WAIT = object()  # Load.step: the operation did not complete


class Tally:
    """What one kind of connection (measured, or made on the origin node) came to."""

    def __init__(self):
        self.started = 0
        self.lat = []  # seconds, connect to last body byte
        self.handshake = []  # seconds, connect to the end of the handshake
        self.errors = {}
        self.resumed = 0
        self.versions = {}

    def error(self, kind):
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def report(self, elapsed):
        lat_ms = sorted(x * 1000.0 for x in self.lat)
        hs_ms = sorted(x * 1000.0 for x in self.handshake)

        def q(values, p):
            return round(values[min(len(values) - 1, int(p * len(values)))], 3) if values else None

        return {
            "connections": self.started,
            "ok": len(self.lat),
            "errors": sum(self.errors.values()),
            "error_kinds": self.errors,
            "resumed": self.resumed,
            "elapsed_s": round(elapsed, 4),
            "conn_per_s": round(len(self.lat) / elapsed, 1) if elapsed > 0 else None,
            "mean_ms": round(statistics.fmean(lat_ms), 3) if lat_ms else None,
            "p50_ms": q(lat_ms, 0.50),
            "p90_ms": q(lat_ms, 0.90),
            "p99_ms": q(lat_ms, 0.99),
            "handshake_p50_ms": q(hs_ms, 0.50),
            "versions": self.versions,
        }


class Conn:
    __slots__ = ("sock", "tls", "name", "slot", "state", "t0", "buf", "need", "deadline", "tally",
                 "session", "origin")


class Load:
    """The connections in flight, driven by one selector."""

    def __init__(self, a):
        self.a = a
        self.ctx = make_context(a)
        self.rng = random.Random(a.seed)
        self.sel = selectors.DefaultSelector()
        self.sessions = {}  # (slot, name) -> the session that slot's last connection to name got
        self.free_slots = list(range(a.c))
        self.measured = Tally()
        self.origin = Tally()
        self.units = 0  # measured connections begun (with --origin-port: pairs begun)

    # --------------------------------------------------------------- life cycle
    def begin_unit(self):
        self.units += 1
        slot = self.free_slots.pop()
        a = self.a
        name = a.sni_pattern.format(self.rng.randrange(a.sni_count)) if a.sni_pattern else a.sni
        if a.origin_port:
            self.connect(slot, name, a.origin_port, None, origin=True)
        else:
            self.connect(slot, name, a.port, self.sessions.get((slot, name)) if a.resume else None, origin=False)

    def connect(self, slot, name, port, session, origin):
        c = Conn()
        c.slot, c.name, c.session, c.origin = slot, name, session, origin
        c.tally = self.origin if origin else self.measured
        c.tally.started += 1
        c.tls = None
        c.buf = b""
        c.need = None
        c.t0 = time.perf_counter()
        c.deadline = c.t0 + self.a.timeout
        c.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.sock.setblocking(False)
        rc = c.sock.connect_ex((self.a.host, port))
        c.state = "connect"
        self.sel.register(c.sock, selectors.EVENT_WRITE, c)
        if rc not in (0, errno.EINPROGRESS):
            self.fail(c, "connect_" + errno.errorcode.get(rc, str(rc)))

    def close(self, c):
        try:
            self.sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        (c.tls or c.sock).close()

    def fail(self, c, kind):
        c.tally.error(kind)
        self.close(c)
        if c.origin:
            # The pair's B connection has no session to offer: it counts as failed too.
            self.measured.started += 1
            self.measured.error("origin_failed")
        self.free_slots.append(c.slot)

    def complete(self, c):
        t = c.tally
        t.lat.append(time.perf_counter() - c.t0)
        if c.tls.session_reused:
            t.resumed += 1
        v = c.tls.version()
        t.versions[v] = t.versions.get(v, 0) + 1
        # Taken after the response: TLS 1.3 tickets arrive after the handshake.
        session = c.tls.session
        self.close(c)
        if c.origin:
            self.connect(c.slot, c.name, self.a.port, session, origin=False)
            return
        if self.a.resume:
            self.sessions[(c.slot, c.name)] = session
        self.free_slots.append(c.slot)

    # --------------------------------------------------------------- events
    def want(self, c, ev):
        self.sel.modify(c.sock, ev, c)

    def step(self, c, what, op):
        """op()'s result, or WAIT when the TLS operation must wait for the socket or failed."""
        try:
            return op()
        except ssl.SSLWantReadError:
            self.want(c, selectors.EVENT_READ)
        except ssl.SSLWantWriteError:
            self.want(c, selectors.EVENT_WRITE)
        except (ssl.SSLError, OSError) as e:
            self.fail(c, f"{what}_{type(e).__name__}")
        return WAIT

    def on_connected(self, c):
        err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self.fail(c, "connect_" + errno.errorcode.get(err, str(err)))
            return
        try:
            c.tls = self.ctx.wrap_socket(c.sock, server_hostname=c.name,
                                         do_handshake_on_connect=False, session=c.session)
        except (ssl.SSLError, OSError, ValueError) as e:
            self.fail(c, "wrap_" + type(e).__name__)
            return
        self.sel.unregister(c.sock)
        c.sock = c.tls
        self.sel.register(c.sock, selectors.EVENT_WRITE, c)
        c.state = "handshake"
        self.handshake(c)

    def handshake(self, c):
        if self.step(c, "handshake", c.tls.do_handshake) is WAIT:
            return
        c.tally.handshake.append(time.perf_counter() - c.t0)
        if self.a.check_name and c.name.encode() not in (c.tls.getpeercert(binary_form=True) or b""):
            self.fail(c, "wrong_certificate")
            return
        req = f"GET {self.a.path} HTTP/1.1\r\nHost: {c.name}\r\nConnection: close\r\n\r\n".encode()
        try:
            c.tls.sendall(req)  # a few dozen bytes: fits the socket buffer
        except (ssl.SSLError, OSError) as e:
            self.fail(c, "send_" + type(e).__name__)
            return
        c.state = "read"
        self.want(c, selectors.EVENT_READ)

    def read(self, c):
        while True:
            chunk = self.step(c, "read", lambda: c.tls.recv(65536))
            if chunk is WAIT:
                return
            if not chunk:
                self.fail(c, "short_response")
                return
            c.buf += chunk
            if c.need is None:
                end = c.buf.find(b"\r\n\r\n")
                if end < 0:
                    continue
                head = c.buf[:end].decode("latin-1").split("\r\n")
                if not head[0].startswith("HTTP/1.1 200"):
                    self.fail(c, "status_" + (head[0].split(" ")[1:2] or ["?"])[0])
                    return
                length = 0
                for h in head[1:]:
                    k, _, v = h.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v.strip())
                c.need = end + 4 + length
            if len(c.buf) >= c.need:
                self.complete(c)
                return

    def on_event(self, c):
        if c.state == "connect":
            self.on_connected(c)
        elif c.state == "handshake":
            self.handshake(c)
        else:
            self.read(c)

    # --------------------------------------------------------------- run
    def run(self):
        a = self.a
        t_start = time.perf_counter()
        stop_starting = t_start + a.max_seconds
        last_sweep = t_start
        while True:
            now = time.perf_counter()
            while self.free_slots and self.units < a.n and now < stop_starting:
                self.begin_unit()
            if not self.sel.get_map():
                break
            for key, _ in self.sel.select(timeout=0.5):
                self.on_event(key.data)
            now = time.perf_counter()
            if now - last_sweep > 0.5:
                last_sweep = now
                for key in list(self.sel.get_map().values()):
                    if key.data.deadline < now:
                        self.fail(key.data, "timeout")
        return time.perf_counter() - t_start


def main():
    a = parse_args()
    load = Load(a)
    elapsed = load.run()
    out = load.measured.report(elapsed)
    out["names"] = a.sni_count if a.sni_pattern else 1
    if a.origin_port:
        out["origin"] = load.origin.report(elapsed)
    print(json.dumps(out))
    ok = out["errors"] == 0 and out["connections"] == a.n
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
