#!/usr/bin/env python3
"""Opens N keep-alive connections to HOST:PORT (over TLS with --tls), sends one request on each,
waits (at most --timeout s) until every response head has arrived, and holds the connections open
until stdin closes.  Prints one line when done.  Loopback only; standard library only.

At most --concurrency connections are being opened (TCP connect, TLS handshake, request, response
head) at a time.  With --tls the client offers ALPN http/1.1 and does not verify the certificate
(the benches' certificates are self-made); --sni sets the server name sent.

Usage: hold_connections.py HOST PORT N [--path /] [--tls] [--sni NAME] [--concurrency 200] [--timeout 120]
"""
import argparse
import asyncio
import ipaddress
import ssl
import sys
import time

async def open_one(a, tls, gate, deadline, held, heads):
    """One connection: opened, asked, and its response head read; kept in `held` unless it fails."""
    async with gate:
        left = deadline - time.monotonic()
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(a.host, a.port, ssl=tls, server_hostname=a.sni if tls else None),
                max(left, 0.1))
        except (OSError, asyncio.TimeoutError, ssl.SSLError) as e:
            heads.append(f"connect: {type(e).__name__}".encode())
            return
        held.append(writer)
        writer.write(f"GET {a.path} HTTP/1.1\r\nHost: bench.local\r\n\r\n".encode())
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                data = await asyncio.wait_for(reader.read(65536), max(deadline - time.monotonic(), 0.1))
                if not data:
                    break
                head += data
        except (OSError, asyncio.TimeoutError, ssl.SSLError):
            pass
        heads.append(head)


async def main_async(a):
    tls = None
    if a.tls:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
        tls.set_alpn_protocols(["http/1.1"])
    gate = asyncio.Semaphore(a.concurrency)
    deadline = time.monotonic() + a.timeout
    held, heads = [], []
    await asyncio.gather(*(open_one(a, tls, gate, deadline, held, heads) for _ in range(a.n)))
    ok = sum(1 for h in heads if h.startswith(b"HTTP/1.1 200"))
    others = {}
    for h in heads:
        if not h.startswith(b"HTTP/1.1 200"):
            key = h[:20].decode(errors="replace") or "(nothing)"
            others[key] = others.get(key, 0) + 1
    detail = f" (others: {others})" if others else ""
    print(f"held {len(held)} {'TLS ' if a.tls else ''}connections, {ok} answered 200{detail}", flush=True)
    # The connections stay open (their responses read) until stdin closes.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("n", type=int)
    ap.add_argument("--path", default="/")
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--sni", default="bench.test")
    ap.add_argument("--concurrency", type=int, default=200)
    ap.add_argument("--timeout", type=float, default=120.0)
    a = ap.parse_args()
    if not ipaddress.ip_address(a.host).is_loopback:
        sys.exit("loopback targets only")
    asyncio.run(main_async(a))


if __name__ == "__main__":
    main()
