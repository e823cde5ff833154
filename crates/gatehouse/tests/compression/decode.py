#!/usr/bin/env python3
"""GET a URL with a chosen Accept-Encoding and decode the answer with the reference decoders
(Python's gzip, brotli's and zstd's own C libraries through their bindings); print what came back
as one JSON line.

usage: decode.py URL HOST ACCEPT_ENCODING EXPECTED_FILE [HEADER: VALUE ...]
"""

import gzip
import hashlib
import http.client
import io
import json
import sys
import urllib.parse

import brotli
import zstandard


def decode(coding, data):
    if coding in (None, "", "identity"):
        return data
    if coding == "gzip":
        return gzip.decompress(data)
    if coding == "br":
        return brotli.decompress(data)
    if coding == "zstd":
        # A streamed frame does not say its size: read it as a stream.
        return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
    raise ValueError(f"unknown coding {coding!r}")


def main():
    url, host, accept, expected = sys.argv[1:5]
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    headers = {"Host": host}
    if accept != "-":
        headers["Accept-Encoding"] = accept
    for h in sys.argv[5:]:
        k, v = h.split(":", 1)
        headers[k.strip()] = v.strip()
    conn.request("GET", u.path + (f"?{u.query}" if u.query else ""), headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    coding = resp.getheader("Content-Encoding")
    body = decode(coding, raw)
    want = open(expected, "rb").read() if expected != "-" else None
    print(json.dumps({
        "status": resp.status,
        "encoding": coding,
        "vary": resp.headers.get_all("Vary") or [],
        "etag": resp.getheader("ETag"),
        "content_length": resp.getheader("Content-Length"),
        "transfer_encoding": resp.getheader("Transfer-Encoding"),
        "raw_len": len(raw),
        "decoded_len": len(body),
        "same": want is not None and body == want,
        "sha256": hashlib.sha256(body).hexdigest(),
    }))


if __name__ == "__main__":
    main()
