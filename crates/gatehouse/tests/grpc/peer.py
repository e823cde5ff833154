"""A real gRPC server and client (grpcio) for Gatehouse's end-to-end tests.

Messages are raw bytes (generic handlers, no generated code), on the service `test.Echo`:
  Unary         answers with the request; echoes the `x-echo` metadata as initial metadata and
                sends the trailing metadata `x-trailer: done`; a request of b"fail" is answered
                with INVALID_ARGUMENT "asked to fail" (an application error, in trailers).
  Forbidden     the same (a method for the gateway to refuse)
  Slow          the same, two seconds later; a call cancelled before (its deadline passed, its
                stream reset) writes "cancelled" to the server's events file
  Count         client streaming: answers with the number of messages and their bytes, "N/B"
  Repeat        server streaming: a request "N" is answered with N messages of 100 bytes
  Echo          bidirectional: every message is sent back as it comes
  Down          answers UNAVAILABLE "down" at once (trailers-only)
  Flaky         server streaming: one message, then UNAVAILABLE "down" in the trailers
  SetHealth     the request ("SERVING", "NOT_SERVING") becomes what grpc.health.v1.Health/Check
                answers from now on (SERVING at start; for any service name)
  Trickle       server streaming: a request "N" is answered with N messages, 100 ms apart; a call
                cancelled before the end writes "cancelled" to the events file

  python3 peer.py server [EVENTS_FILE [BUNDLE]]
                                             serves on 127.0.0.1, a free port, prints it, and
                                             stops when stdin closes; with BUNDLE (a PEM file
                                             with the certificate chain and its key) over TLS

  python3 peer.py client ADDRESS AUTHORITY [CA_FILE]
                                             runs the calls through ADDRESS (TLS with CA_FILE)
                                             and prints one JSON object of what it saw
  python3 peer.py streams ADDRESS AUTHORITY [CA_FILE]
                                             streams 1,000 messages each way, a 4 MiB message,
                                             1,000 concurrent calls on one channel and a call
                                             whose deadline passes; prints what it saw
  python3 peer.py calls ADDRESS AUTHORITY CALLS
                                             makes the calls CALLS (JSON: a list of
                                             {"method": "/pkg.Service/Method", "size": bytes
                                             (or "text": the request itself),
                                             "metadata": {...}, "shape": "unary" | "server"
                                             (request "size", answers counted) | "client"
                                             ("messages" of "size" bytes, "pause_ms" apart)})
                                             over one cleartext channel and prints the list of
                                             what each got
"""

import json
import re
import sys
import time
from concurrent import futures

import grpc

SERVICE = "test.Echo"
BIG = 64 * 1024 * 1024
OPTIONS = [("grpc.max_send_message_length", BIG), ("grpc.max_receive_message_length", BIG)]


def unary(request, context):
    echo = dict(context.invocation_metadata()).get("x-echo")
    if echo is not None:
        context.send_initial_metadata((("x-echo", echo),))
    context.set_trailing_metadata((("x-trailer", "done"),))
    if request == b"fail":
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "asked to fail")
    return request


EVENTS = None


def slow(request, context):
    for _ in range(40):
        if not context.is_active():
            cancelled()
            return b""
        time.sleep(0.05)
    return unary(request, context)


def cancelled():
    if EVENTS:
        with open(EVENTS, "a") as f:
            f.write("cancelled\n")


def trickle(request, context):
    for i in range(int(request)):
        if not context.is_active():
            cancelled()
            return
        yield b"t%07d" % i
        time.sleep(0.1)
    if not context.is_active():
        cancelled()


HEALTH = {"SERVING": b"\x08\x01", "NOT_SERVING": b"\x08\x02"}
HEALTH_NOW = [HEALTH["SERVING"]]
HEALTH_ASKED = []


def set_health(request, context):
    HEALTH_NOW[0] = HEALTH[request.decode()]
    return request


def health_check(request, context):
    HEALTH_ASKED.append(request)
    return HEALTH_NOW[0]


def down(request, context):
    context.abort(grpc.StatusCode.UNAVAILABLE, "down")


def flaky(request, context):
    yield b"first"
    context.abort(grpc.StatusCode.UNAVAILABLE, "down")


def count(requests, context):
    n = size = 0
    for message in requests:
        n += 1
        size += len(message)
    return b"%d/%d" % (n, size)


def repeat(request, context):
    for i in range(int(request)):
        yield (b"%08d" % i) * 12 + b"0123"


def echo(requests, context):
    for message in requests:
        yield message


def serve(bundle=None):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=OPTIONS)
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Forbidden": grpc.unary_unary_rpc_method_handler(unary),
        "Slow": grpc.unary_unary_rpc_method_handler(slow),
        "Count": grpc.stream_unary_rpc_method_handler(count),
        "Repeat": grpc.unary_stream_rpc_method_handler(repeat),
        "Echo": grpc.stream_stream_rpc_method_handler(echo),
        "Trickle": grpc.unary_stream_rpc_method_handler(trickle),
        "Down": grpc.unary_unary_rpc_method_handler(down),
        "Flaky": grpc.unary_stream_rpc_method_handler(flaky),
    }
    handlers["SetHealth"] = grpc.unary_unary_rpc_method_handler(set_health)
    health = {"Check": grpc.unary_unary_rpc_method_handler(health_check)}
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(SERVICE, handlers),
            grpc.method_handlers_generic_handler("grpc.health.v1.Health", health),
        )
    )
    if bundle:
        with open(bundle) as f:
            pem = f.read()
        blocks = re.findall(r"-----BEGIN ([A-Z ]+)-----.*?-----END \1-----\n?", pem, re.S)
        whole = re.findall(r"-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----\n?", pem, re.S)
        key = "".join(b for b, kind in zip(whole, blocks) if "PRIVATE KEY" in kind)
        chain = "".join(b for b, kind in zip(whole, blocks) if kind == "CERTIFICATE")
        credentials = grpc.ssl_server_credentials([(key.encode(), chain.encode())])
        port = server.add_secure_port("127.0.0.1:0", credentials)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()
    server.stop(0)


def call(stub, request, metadata=()):
    """One unary call: what came back, or the status it failed with."""
    try:
        response, rpc = stub.with_call(request, metadata=metadata, timeout=10)
        return {
            "code": "OK",
            "response": response.decode("latin-1"),
            "initial": dict(rpc.initial_metadata()),
            "trailing": dict(rpc.trailing_metadata()),
        }
    except grpc.RpcError as e:
        return {"code": e.code().name, "details": e.details(), "trailing": dict(e.trailing_metadata() or ())}


def channel_to(address, authority, ca_file=None):
    options = OPTIONS + [("grpc.default_authority", authority)]
    if ca_file:
        with open(ca_file, "rb") as f:
            credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
        options.append(("grpc.ssl_target_name_override", authority))
        return grpc.secure_channel(address, credentials, options=options)
    return grpc.insecure_channel(address, options=options)


def client(address, authority, ca_file=None):
    channel = channel_to(address, authority, ca_file)
    stub = channel.unary_unary(f"/{SERVICE}/Unary")
    seen = {
        "unary": call(stub, b"hello", (("x-echo", "metadata"),)),
        "error": call(stub, b"fail"),
        "again": [call(stub, b"n%d" % i)["code"] for i in range(4)],
    }
    channel.close()
    print(json.dumps(seen), flush=True)


def code_of(f):
    """The status a call ends with, or what it raised."""
    try:
        f()
        return "OK"
    except grpc.RpcError as e:
        return e.code().name


def streams(address, authority, ca_file=None):
    channel = channel_to(address, authority, ca_file)
    seen = {}
    repeated = list(channel.unary_stream(f"/{SERVICE}/Repeat")(b"1000", timeout=30))
    seen["server_streaming"] = [len(repeated), sum(map(len, repeated)), repeated[-1][:8].decode()]
    messages = (b"m%07d" % i for i in range(1000))
    seen["client_streaming"] = channel.stream_unary(f"/{SERVICE}/Count")(messages, timeout=30).decode()
    sent = [b"b%07d" % i for i in range(1000)]
    echoed = list(channel.stream_stream(f"/{SERVICE}/Echo")(iter(sent), timeout=30))
    seen["bidirectional"] = [len(echoed), echoed == sent]
    big = bytes(range(256)) * (4 * 4096)
    seen["four_mib"] = channel.unary_unary(f"/{SERVICE}/Unary")(big, timeout=30) == big
    unary = channel.unary_unary(f"/{SERVICE}/Unary")
    calls = [unary.future(b"c%d" % i, timeout=60) for i in range(1000)]
    seen["concurrent"] = sum(1 for i, c in enumerate(calls) if c.result() == b"c%d" % i)
    seen["deadline"] = code_of(lambda: channel.unary_unary(f"/{SERVICE}/Slow")(b"late", timeout=0.5))
    channel.close()
    print(json.dumps(seen), flush=True)


def calls(address, authority, listed):
    channel = grpc.insecure_channel(address, options=OPTIONS + [("grpc.default_authority", authority)])
    seen = []
    for c in json.loads(listed):
        metadata = tuple(c.get("metadata", {}).items())
        shape = c.get("shape", "unary")
        if shape == "unary":
            request = c["text"].encode() if "text" in c else b"x" * c.get("size", 5)
            seen.append(call(channel.unary_unary(c["method"]), request, metadata))
        elif shape == "server":
            got = []
            try:
                for message in channel.unary_stream(c["method"])(b"%d" % c["size"], metadata=metadata, timeout=30):
                    got.append(message)
                seen.append({"code": "OK", "received": len(got)})
            except grpc.RpcError as e:
                seen.append({"code": e.code().name, "details": e.details(), "received": len(got)})
        else:
            def messages():
                for i in range(c["messages"]):
                    if i:
                        time.sleep(c.get("pause_ms", 0) / 1000)
                    yield b"x" * c.get("size", 5)
            try:
                answer = channel.stream_unary(c["method"])(messages(), metadata=metadata, timeout=30)
                seen.append({"code": "OK", "response": answer.decode()})
            except grpc.RpcError as e:
                seen.append({"code": e.code().name, "details": e.details()})
    channel.close()
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        EVENTS = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None
        serve(sys.argv[3] if len(sys.argv) > 3 else None)
    elif sys.argv[1] == "streams":
        streams(*sys.argv[2:])
    elif sys.argv[1] == "calls":
        calls(*sys.argv[2:])
    else:
        client(*sys.argv[2:])
