#!/usr/bin/env python3
"""An HTTP/3 client on aioquic (Python's QUIC and HTTP/3 stack), for the end-to-end tests.

Sends requests over one QUIC connection and prints one JSON object: the handshake (ALPN, whether
the session was resumed) and, per request, status, headers, body length and SHA-256.

  client.py --port P [--host 127.0.0.1] [--sni NAME] [--authority NAME] [--ca FILE]
            [--path /x ...] [--method GET] [--body-file F] [--repeat N]
            [--session-in F] [--session-out F] [--early] [--timeout S] [--cert FILE]
            [--rebind N]

`--repeat N` sends each path N times, all at once, each on its own stream. A handshake that
fails prints {"error": "..."} and exits 2.
"""

import argparse
import asyncio
import hashlib
import json
import pickle
import socket
import ssl
import sys

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, QuicEvent


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.waiting = {}
        self.responses = {}
        self.resumed = None
        self.alpn = None
        self.closed = None
        self.handshake_done = asyncio.Event()

    def quic_event_received(self, event: QuicEvent):
        if isinstance(event, HandshakeCompleted):
            self.resumed = event.session_resumed
            self.alpn = event.alpn_protocol
            self.handshake_done.set()
        if isinstance(event, ConnectionTerminated):
            self.closed = {"code": event.error_code, "reason": event.reason_phrase}
            for fut in self.waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(f"connection closed: {self.closed}"))
        for h3_event in self.h3.handle_event(event):
            sid = h3_event.stream_id
            r = self.responses.setdefault(sid, {"headers": [], "body": bytearray(), "trailers": []})
            if isinstance(h3_event, HeadersReceived):
                if "status" in r:
                    r["trailers"] += h3_event.headers
                else:
                    r["headers"] = h3_event.headers
                    r["status"] = int(dict(h3_event.headers).get(b":status", b"0"))
            elif isinstance(h3_event, DataReceived):
                r["body"] += h3_event.data
            if getattr(h3_event, "stream_ended", False) and sid in self.waiting:
                self.waiting.pop(sid).set_result(r)

    async def request(self, method, authority, path, body, headers):
        sid = self._quic.get_next_available_stream_id()
        fields = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
        ] + [(k.encode(), v.encode()) for k, v in headers]
        if body is not None and not any(k.lower() == "content-length" for k, _ in headers):
            fields.append((b"content-length", str(len(body)).encode()))
        self.h3.send_headers(sid, fields, end_stream=body is None)
        if body is not None:
            self.h3.send_data(sid, body, end_stream=True)
        fut = asyncio.get_running_loop().create_future()
        self.waiting[sid] = fut
        self.transmit()
        return await fut


def summary(r):
    headers = {}
    for k, v in r["headers"]:
        headers.setdefault(k.decode(), []).append(v.decode(errors="replace"))
    return {
        "status": r.get("status", 0),
        "headers": headers,
        "length": len(r["body"]),
        "sha256": hashlib.sha256(bytes(r["body"])).hexdigest(),
        "text": bytes(r["body"][:2000]).decode(errors="replace"),
        "trailers": {k.decode(): v.decode(errors="replace") for k, v in r["trailers"]},
    }


async def run(args):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=args.sni)
    if args.ca:
        config.load_verify_locations(args.ca)
    else:
        config.verify_mode = ssl.CERT_NONE
    if args.cert:
        config.load_cert_chain(args.cert)
    if args.session_in:
        with open(args.session_in, "rb") as f:
            config.session_ticket = pickle.load(f)
    tickets = []
    body = None
    if args.body_file:
        with open(args.body_file, "rb") as f:
            body = f.read()
    headers = [tuple(h.split(":", 1)) for h in args.header]
    out = {}
    try:
        async with connect(
            args.host, args.port, configuration=config, create_protocol=Client,
            session_ticket_handler=tickets.append, wait_connected=not args.early,
        ) as client:
            authority = args.authority or args.sni
            calls = [
                client.request(args.method, authority, path, body, headers)
                for path in args.path for _ in range(args.repeat)
            ]
            done = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), args.timeout)
            out["responses"] = [
                {"error": str(r)} if isinstance(r, BaseException) else summary(r) for r in done
            ]
            # NAT rebinding: the same connection goes on from a new local port, as when a NAT
            # in front of the client gives it a new mapping. Then the requests again.
            ports = []
            for _ in range(args.rebind):
                # A socket as aioquic's own (dual-stack IPv6); the old one stays open, unused.
                sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                sock.bind(("::", 0, 0, 0))
                loop = asyncio.get_running_loop()
                transport, _ = await loop.create_datagram_endpoint(lambda: client, sock=sock)
                client._transport = transport
                ports.append(sock.getsockname()[1])
                calls = [client.request(args.method, authority, path, body, headers) for path in args.path]
                done = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), args.timeout)
                out["responses"] += [
                    {"error": str(r)} if isinstance(r, BaseException) else summary(r) for r in done
                ]
            if args.rebind:
                out["ports"] = ports
            await asyncio.wait_for(client.handshake_done.wait(), args.timeout)
            out["alpn"] = client.alpn
            out["resumed"] = client.resumed
            out["settings"] = {str(k): v for k, v in (client.h3._received_settings or {}).items()}
            out["early_data_accepted"] = client._quic.tls.early_data_accepted
            # A ticket may come after the handshake: give it a moment to arrive.
            for _ in range(20):
                if tickets or not args.session_out:
                    break
                await asyncio.sleep(0.05)
    except Exception as e:  # noqa: BLE001 - any failure is the test's to see
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return 2
    if args.session_out and tickets:
        with open(args.session_out, "wb") as f:
            pickle.dump(tickets[-1], f)
    out["ticket"] = bool(tickets)
    print(json.dumps(out))
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--sni", default="localhost")
    p.add_argument("--authority")
    p.add_argument("--ca")
    p.add_argument("--cert", help="client certificate and its key (one PEM file)")
    p.add_argument("--path", action="append", default=[])
    p.add_argument("--method", default="GET")
    p.add_argument("--body-file")
    p.add_argument("--header", action="append", default=[])
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--session-in")
    p.add_argument("--session-out")
    p.add_argument("--timeout", type=float, default=20.0)
    p.add_argument("--rebind", type=int, default=0,
                   help="after the requests, move to a new local port and send them again, this many times")
    p.add_argument("--early", action="store_true",
                   help="send the requests at once, in 0-RTT data when resuming a session that allows it")
    args = p.parse_args()
    if not args.path:
        args.path = ["/"]
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
