#!/usr/bin/env python3
"""Opens N keep-alive connections to HOST:PORT, sends one request on each, waits (at most 60 s)
until every response head has arrived, and holds the connections open until stdin closes. Prints
one line when done. Loopback only."""
import selectors
import socket
import sys
import time

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if not host.startswith("127."):
    sys.exit("loopback targets only")
request = b"GET / HTTP/1.1\r\nHost: bench.local\r\n\r\n"
sel = selectors.DefaultSelector()
received = {}


def pump(timeout):
    for key, _ in sel.select(timeout=timeout):
        sock = key.fileobj
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            continue
        received[sock] += data
        if not data or b"\r\n\r\n" in received[sock]:
            sel.unregister(sock)


socks = []
for _ in range(n):
    s = socket.create_connection((host, port))
    s.setblocking(False)
    s.sendall(request)
    received[s] = b""
    sel.register(s, selectors.EVENT_READ)
    socks.append(s)
    pump(0)
deadline = time.monotonic() + 60
while sel.get_map() and time.monotonic() < deadline:
    pump(0.2)
ok = sum(1 for s in socks if received[s].startswith(b"HTTP/1.1 200"))
others = {}
for s in socks:
    if not received[s].startswith(b"HTTP/1.1 200"):
        key = received[s][:12].decode(errors="replace") or "(nothing)"
        others[key] = others.get(key, 0) + 1
detail = f" (others: {others})" if others else ""
print(f"held {len(socks)} connections, {ok} answered 200{detail}", flush=True)
sys.stdin.read()
