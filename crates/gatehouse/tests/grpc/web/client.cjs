// A real gRPC-Web client for Gatehouse's end-to-end tests: grpc-web (the library browsers run,
// here on Node with xhr2 as its XMLHttpRequest), in its two formats: "text"
// (application/grpc-web-text, base64 both ways) and "binary" (application/grpc-web+proto).
// Messages are raw bytes (serializers that pass them as they are), on tests/grpc/peer.py's
// service `test.Echo`.
//
//   node client.cjs BASE_URL      runs the calls in both formats through BASE_URL
//                                 (http://127.0.0.1:PORT) and prints one JSON object of what
//                                 each saw
"use strict";

global.XMLHttpRequest = require("xhr2");
const { GrpcWebClientBase, MethodDescriptor, MethodType } = require("grpc-web");

const base = process.argv[2];
const bytes = (s) => new Uint8Array(Buffer.from(s));
const text = (b) => Buffer.from(b).toString();

function descriptor(path, type) {
  return new MethodDescriptor(path, type, Object, Object, (r) => r, (b) => b);
}

// A unary call: its answer, its status and metadata, or its error.
function unary(client, name, request, metadata, service = "test.Echo") {
  const path = `/${service}/${name}`;
  return new Promise((resolve) => {
    const seen = {};
    const call = client.rpcCall(base + path, bytes(request), metadata, descriptor(path, MethodType.UNARY), (err, resp) => {
      if (err) {
        seen.code = err.code;
        seen.message = err.message;
      } else {
        seen.code = 0;
        seen.response = text(resp);
      }
    });
    call.on("metadata", (m) => { seen.metadata = m; });
    call.on("status", (s) => {
      seen.status = { code: s.code, details: s.details, metadata: s.metadata };
      // The status comes after the callback; both are in by now.
      setImmediate(() => resolve(seen));
    });
  });
}

// A server-streaming call: how many messages came, their bytes, and how it ended.
function stream(client, name, request) {
  return new Promise((resolve) => {
    const seen = { messages: 0, bytes: 0 };
    const path = `/test.Echo/${name}`;
    const call = client.serverStreaming(base + path, bytes(request), {}, descriptor(path, MethodType.SERVER_STREAMING));
    call.on("data", (b) => { seen.messages += 1; seen.bytes += b.length; });
    call.on("error", (e) => { seen.code = e.code; seen.message = e.message; resolve(seen); });
    call.on("status", (s) => { seen.status = s.code; });
    call.on("end", () => { if (seen.code === undefined) seen.code = 0; resolve(seen); });
  });
}

async function main() {
  const out = {};
  for (const format of ["text", "binary"]) {
    const client = new GrpcWebClientBase({ format });
    out[format] = {
      unary: await unary(client, "Unary", "hello", { "x-echo": "metadata" }),
      error: await unary(client, "Unary", "fail", {}),
      down: await unary(client, "Down", "x", {}),
      // 2,000 messages of 100 bytes: several response chunks, none whole.
      repeat: await stream(client, "Repeat", "2000"),
      // Answered by the gateway itself: no route for the service.
      unrouted: await unary(client, "Call", "x", {}, "other.Service"),
    };
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
