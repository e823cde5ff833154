// Cross-origin calls from pages in headless Chromium to an API behind the gateway, which answers
// the preflights (CORS). Run by the Rust end-to-end test `cors::browsers_follow_the_cors_policy`,
// which starts the gateway and passes:
//   GATEWAY  the gateway's port on 127.0.0.1; every `*.test` name resolves there
// Pages are served by the gateway at http://app.test:PORT (an allowed origin) and
// http://evil.test:PORT (not allowed); the API is http://api.test:PORT. Prints one JSON object:
// each call's status, body and readable `x-backend` header, or the error the browser gave.
import { chromium } from "playwright-core";

const port = process.env.GATEWAY;
if (!port) throw new Error("set GATEWAY");
const api = `http://api.test:${port}`;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--host-resolver-rules=MAP *.test 127.0.0.1"],
});

// One call from the page: what a script can read of the answer, or the browser's refusal.
const call = (page, path, init) => page.evaluate(async ([url, init]) => {
  try {
    const r = await fetch(url, init);
    return { status: r.status, body: await r.text(), backend: r.headers.get("x-backend") };
  } catch (e) {
    return { error: String(e) };
  }
}, [api + path, init || {}]);

const json = { "content-type": "application/json" };
const seen = {};
try {
  const app = await browser.newPage();
  await app.goto(`http://app.test:${port}/`);
  seen.simple = await call(app, "/creds/a");
  seen.preflighted = await call(app, "/creds/b", { method: "PUT", headers: json, body: "{}" });
  seen.credentials = await call(app, "/creds/c", { credentials: "include" });
  seen.open = await call(app, "/open/a");
  seen.open_credentials = await call(app, "/open/b", { credentials: "include" });
  seen.method_refused = await call(app, "/creds/d", { method: "DELETE" });
  seen.header_refused = await call(app, "/creds/e", { headers: { "x-other": "1" } });
  // A service with app keys and two requests an hour: its preflights need no key and count
  // for nothing; its own refusals reach the page.
  const keyed = { ...json, "x-app-key": "K-web" };
  seen.service_1 = await call(app, "/svc/a?n=1", { method: "PUT", headers: keyed, body: "{}" });
  seen.service_2 = await call(app, "/svc/a?n=2", { method: "PUT", headers: keyed, body: "{}" });
  seen.service_limited = await call(app, "/svc/a?n=3", { method: "PUT", headers: keyed, body: "{}" });
  seen.service_no_key = await call(app, "/svc/b");

  const evil = await browser.newPage();
  await evil.goto(`http://evil.test:${port}/`);
  seen.evil_simple = await call(evil, "/creds/a");
  seen.evil_preflighted = await call(evil, "/creds/b", { method: "PUT", headers: json, body: "{}" });
  seen.evil_open = await call(evil, "/open/a");
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
