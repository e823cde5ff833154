#!/usr/bin/env python3
"""Opens N keep-alive connections to HOST:PORT, sends one request on each, reads the response, and
holds them open until stdin closes. Prints one line when all are established. Loopback only."""
import selectors
import socket
import sys

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if not host.startswith("127."):
    sys.exit("loopback targets only")
request = f"GET / HTTP/1.1\r\nHost: bench.local\r\n\r\n".encode()
socks = []
sel = selectors.DefaultSelector()
pending = {}
for i in range(n):
    s = socket.create_connection((host, port))
    s.sendall(request)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    pending[s] = b""
    socks.append(s)
    # Read answers as they come so the server's send buffers never fill.
    for key, _ in sel.select(timeout=0):
        data = key.fileobj.recv(65536)
        pending[key.fileobj] += data
        if b"\r\n\r\n" in pending[key.fileobj]:
            sel.unregister(key.fileobj)
ok = 0
deadline_rounds = 600
while sel.get_map() and deadline_rounds:
    deadline_rounds -= 1
    for key, _ in sel.select(timeout=0.1):
        data = key.fileobj.recv(65536)
        pending[key.fileobj] += data
        if b"\r\n\r\n" in pending[key.fileobj] or not data:
            sel.unregister(key.fileobj)
ok = sum(1 for s in socks if pending[s].startswith(b"HTTP/1.1 200"))
print(f"held {len(socks)} connections, {ok} answered 200", flush=True)
sys.stdin.read()
