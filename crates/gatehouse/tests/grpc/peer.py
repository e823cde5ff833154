"""A real gRPC server and client (grpcio) for Gatehouse's end-to-end tests.

Messages are raw bytes (generic handlers, no generated code), on the service `test.Echo`:
  Unary         answers with the request; echoes the `x-echo` metadata as initial metadata and
                sends the trailing metadata `x-trailer: done`; a request of b"fail" is answered
                with INVALID_ARGUMENT "asked to fail" (an application error, in trailers).
  Forbidden     the same (a method for the gateway to refuse)
  Slow          the same, two seconds later

  python3 peer.py server                     serves on 127.0.0.1, a free port, prints it, and
                                             stops when stdin closes
  python3 peer.py client ADDRESS AUTHORITY [CA_FILE]
                                             runs the calls through ADDRESS (TLS with CA_FILE)
                                             and prints one JSON object of what it saw
  python3 peer.py calls ADDRESS AUTHORITY CALLS
                                             makes the unary calls CALLS (JSON: a list of
                                             {"method": "/pkg.Service/Method", "size": bytes,
                                             "metadata": {...}}) over one cleartext channel and
                                             prints the list of what each got
"""

import json
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


def slow(request, context):
    time.sleep(2)
    return unary(request, context)


def serve():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=OPTIONS)
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Forbidden": grpc.unary_unary_rpc_method_handler(unary),
        "Slow": grpc.unary_unary_rpc_method_handler(slow),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
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


def client(address, authority, ca_file=None):
    options = OPTIONS + [("grpc.default_authority", authority)]
    if ca_file:
        with open(ca_file, "rb") as f:
            credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
        options.append(("grpc.ssl_target_name_override", authority))
        channel = grpc.secure_channel(address, credentials, options=options)
    else:
        channel = grpc.insecure_channel(address, options=options)
    stub = channel.unary_unary(f"/{SERVICE}/Unary")
    seen = {
        "unary": call(stub, b"hello", (("x-echo", "metadata"),)),
        "error": call(stub, b"fail"),
        "again": [call(stub, b"n%d" % i)["code"] for i in range(4)],
    }
    channel.close()
    print(json.dumps(seen), flush=True)


def calls(address, authority, listed):
    channel = grpc.insecure_channel(address, options=OPTIONS + [("grpc.default_authority", authority)])
    seen = []
    for c in json.loads(listed):
        stub = channel.unary_unary(c["method"])
        seen.append(call(stub, b"x" * c.get("size", 5), tuple(c.get("metadata", {}).items())))
    channel.close()
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve()
    elif sys.argv[1] == "calls":
        calls(*sys.argv[2:])
    else:
        client(*sys.argv[2:])
