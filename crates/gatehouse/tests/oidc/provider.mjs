// A real OpenID provider for the gateway's JWT tests: oauth2-mock-server's issuer and service
// (discovery, token endpoint, signing with jose) behind a server of ours that also serves the key
// set, so that a key can be withdrawn and fetches counted.
//
//   node provider.mjs [bundle.pem]    https with that certificate and key, else http on 127.0.0.1
//
// Prints its port, then answers one JSON line per JSON command line on stdin:
//   {"cmd": "keys", "algs": ["RS256", ...]}           -> {"kids": [...]}   (new keys, kid = alg-N)
//   {"cmd": "token", "kid": k, "claims": {...}, "expires_in": s, "iss": i}
//                                                     -> {"token": "..."}
//   {"cmd": "remove", "kid": k}                       -> {}  (no longer published; nothing signs with it)
//   {"cmd": "hits"}                                   -> {"jwks": n, "discovery": n}
//   {"cmd": "stop"}                                   -> {}  (the server stops answering)
import { OAuth2Issuer, OAuth2Service } from 'oauth2-mock-server';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import readline from 'node:readline';

const bundle = process.argv[2];
const issuer = new OAuth2Issuer();
const service = new OAuth2Service(issuer);
const removed = new Set();
const hits = { jwks: 0, discovery: 0 };
const sockets = new Set();

const handler = (req, res) => {
  if (req.url === '/jwks') {
    hits.jwks++;
    const keys = issuer.keys.toJSON().filter((k) => !removed.has(k.kid));
    const body = JSON.stringify({ keys });
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=300', 'content-length': Buffer.byteLength(body) });
    res.end(body);
    return;
  }
  if (req.url === '/.well-known/openid-configuration') hits.discovery++;
  service.requestHandler(req, res);
};
const server = bundle
  ? https.createServer({ key: readFileSync(bundle), cert: readFileSync(bundle) }, handler)
  : http.createServer(handler);
server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
server.on('secureConnection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = server.address().port;
issuer.url = bundle ? `https://localhost:${port}` : `http://127.0.0.1:${port}`;
process.stdout.write(`${port}\n`);

const counts = {};
const commands = {
  async keys({ algs }) {
    const kids = [];
    for (const alg of algs) {
      counts[alg] = (counts[alg] ?? 0) + 1;
      const kid = `${alg.toLowerCase()}-${counts[alg]}`;
      await issuer.keys.generate(alg, { kid });
      kids.push(kid);
    }
    return { kids };
  },
  async token({ kid, claims = {}, expires_in: expiresIn = 300, iss }) {
    const token = await issuer.buildToken({
      kid,
      expiresIn,
      scopesOrTransform: (_header, payload) => {
        Object.assign(payload, claims);
        if (iss !== undefined) payload.iss = iss;
      },
    });
    return { token };
  },
  async remove({ kid }) {
    removed.add(kid);
    return {};
  },
  async hits() {
    return { ...hits };
  },
  async stop() {
    server.close();
    for (const s of sockets) s.destroy();
    return {};
  },
};

for await (const line of readline.createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const command = JSON.parse(line);
  try {
    const answer = await commands[command.cmd](command);
    process.stdout.write(`${JSON.stringify(answer)}\n`);
  } catch (e) {
    process.stdout.write(`${JSON.stringify({ error: String(e) })}\n`);
  }
}
process.exit(0);
