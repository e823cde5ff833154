// WebSocket over HTTP/2 (RFC 8441) end to end, for Gatehouse's tests: a real WebSocket backend
// (ws, over HTTP/1.1) and real clients that reach it through Gatehouse's TLS listener on HTTP/2.
//
//   node peer.mjs backend           serves on 127.0.0.1, a free port (printed): GET /page.html is
//                                   a page that opens a WebSocket to /ws on its own origin and
//                                   echoes three messages; /ws is a WebSocket that first sends
//                                   what its handshake carried (JSON), then echoes every message.
//                                   Stops when stdin closes.
//   node peer.mjs browser URL       opens URL (https://NAME:PORT/page.html) in Debian's headless
//                                   Chromium and prints what the page saw (JSON)
//   node peer.mjs h2 ORIGIN CA      Node's own HTTP/2 client: an extended CONNECT to ORIGIN/ws
//                                   (TLS, trusting CA), a masked text frame, its echo; prints JSON
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { connect } from "node:http2";
import { randomBytes } from "node:crypto";

const mode = process.argv[2];

const PAGE = `<!doctype html><title>ws</title><script>
const ws = new WebSocket("wss://" + location.host + "/ws", ["chat"]);
const seen = { echoes: [], protocol: null };
const sent = ["one", "two", "x".repeat(70000)];
ws.onopen = () => { seen.protocol = ws.protocol; };
ws.onmessage = (e) => {
  if (seen.handshake === undefined) { seen.handshake = JSON.parse(e.data); sent.forEach((m) => ws.send(m)); return; }
  seen.echoes.push(e.data.length > 20 ? "long:" + e.data.length : e.data);
  if (seen.echoes.length === sent.length) { ws.close(1000, "done"); }
};
ws.onclose = (e) => { seen.close = e.code; window.result = seen; };
ws.onerror = () => { seen.error = true; };
</script>`;

if (mode === "backend") {
  const { WebSocketServer } = await import("ws");
  const server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end(PAGE);
  });
  const wss = new WebSocketServer({ server, path: "/ws", handleProtocols: (protocols) => (protocols.has("chat") ? "chat" : false) });
  wss.on("connection", (socket, req) => {
    const h = req.headers;
    socket.send(JSON.stringify({
      method: req.method, httpVersion: req.httpVersion, upgrade: h.upgrade, version: h["sec-websocket-version"],
      protocol: h["sec-websocket-protocol"] ?? null, origin: h.origin ?? null, forwardedProto: h["x-forwarded-proto"] ?? null,
    }));
    socket.on("message", (data, binary) => socket.send(data, { binary }));
  });
  server.listen(0, "127.0.0.1", () => console.log(server.address().port));
  process.stdin.on("end", () => process.exit(0));
  process.stdin.resume();
} else if (mode === "browser") {
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--ignore-certificate-errors"],
  });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(15000);
    const response = await page.goto(process.argv[3]);
    const seen = await page.waitForFunction(() => window.result).then((h) => h.jsonValue());
    seen.pageStatus = response.status();
    console.log(JSON.stringify(seen));
  } finally {
    await browser.close();
  }
} else if (mode === "h2") {
  const [origin, ca] = process.argv.slice(3);
  const session = connect(origin, { ca: readFileSync(ca) });
  const seen = {};
  await new Promise((resolve) => session.once("remoteSettings", (s) => { seen.enableConnectProtocol = s.enableConnectProtocol; resolve(); }));
  const stream = session.request({
    ":method": "CONNECT", ":protocol": "websocket", ":scheme": "https", ":path": "/ws",
    "sec-websocket-version": "13", "sec-websocket-protocol": "chat", origin,
  });
  const chunks = [];
  stream.on("response", (h) => {
    seen.status = h[":status"];
    seen.protocol = h["sec-websocket-protocol"] ?? null;
    if (seen.status !== 200) {
      // Refused: nothing will be echoed.
      stream.close();
      session.close();
      console.log(JSON.stringify(seen));
    }
  });
  // One masked text frame, as a client must send it.
  const payload = Buffer.from("over one stream");
  const mask = randomBytes(4);
  const frame = Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, payload.map((b, i) => b ^ mask[i % 4])]);
  stream.write(frame);
  stream.on("data", (d) => {
    chunks.push(d);
    // Unmasked server frames of under 126 bytes: the handshake's JSON, then the echo.
    const all = Buffer.concat(chunks);
    const texts = [];
    for (let at = 0; at + 2 <= all.length;) {
      let len = all[at + 1] & 0x7f, start = at + 2;
      if (len === 126) { len = all.readUInt16BE(at + 2); start = at + 4; }
      if (start + len > all.length) break;
      texts.push(all.subarray(start, start + len).toString());
      at = start + len;
    }
    if (texts.length >= 2) {
      seen.handshake = JSON.parse(texts[0]);
      seen.echo = texts[1];
      stream.close();
      session.close();
      console.log(JSON.stringify(seen));
    }
  });
  stream.on("error", (e) => { console.log(JSON.stringify({ ...seen, error: String(e) })); session.close(); });
} else {
  console.error("usage: peer.mjs backend | browser URL | h2 ORIGIN CA");
  process.exit(2);
}
