#!/usr/bin/env python3
"""A flood of new QUIC connections that never finish their handshakes, for the end-to-end tests.

Sends the first flight (an Initial packet carrying a real ClientHello, made by aioquic) of
`--count` connections from one UDP socket, as fast as it can for at most `--seconds`, and never
answers the server. Counts what comes back: Retry packets (the server asking for proof of the
address) and other packets (the server starting a handshake). Prints one JSON object.

  flood.py --port P [--host 127.0.0.1] [--sni NAME] [--count N] [--seconds S]
"""

import argparse
import json
import socket
import ssl
import time

from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--sni", default="localhost")
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--seconds", type=float, default=20.0)
    args = p.parse_args()

    server = (args.host, args.port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    seen = {"retry": 0, "other": 0}

    def drain():
        while True:
            try:
                data, _ = sock.recvfrom(65535)
            except BlockingIOError:
                return
            # Long header, type Retry (RFC 9000 17.2.5): 0b1111xxxx.
            if data and data[0] & 0xF0 == 0xF0:
                seen["retry"] += 1
            else:
                seen["other"] += 1

    config = QuicConfiguration(is_client=True, alpn_protocols=["h3"], server_name=args.sni)
    config.verify_mode = ssl.CERT_NONE
    deadline = time.monotonic() + args.seconds
    sent = 0
    while sent < args.count and time.monotonic() < deadline:
        conn = QuicConnection(configuration=config)
        now = time.time()
        conn.connect(server, now=now)
        for data, _ in conn.datagrams_to_send(now=now):
            try:
                sock.sendto(data, server)
            except BlockingIOError:
                pass
        sent += 1
        drain()
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        drain()
        time.sleep(0.01)
    print(json.dumps({"sent": sent, "retries": seen["retry"], "other": seen["other"]}))


if __name__ == "__main__":
    main()
