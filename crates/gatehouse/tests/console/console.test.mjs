// Drives the admin console in headless Chromium: sign in, dashboard charts (screenshot), edit an
// upstream through its form, make a revision, compare, release, stage, roll back, upload a
// certificate, add a site, watch the node take the revision. Run by the Rust end-to-end test
// `console::the_console_works_in_a_real_browser`, which starts the gateway and passes:
//   CONSOLE_URL  http://127.0.0.1:PORT     TOKEN  the admin token
//   BUNDLE       a PEM bundle to upload     TARGET another backend address to add
//   OUT          directory for the screenshots
//   ACME_NAME    a name the node's ACME manager has had issued (shown with its source and next
//                renewal; "Renew now" is clicked)
import { chromium } from "playwright-core";
import { statSync } from "node:fs";
import { join } from "node:path";

const env = name => {
  const v = process.env[name];
  if (!v) throw new Error(`set ${name}`);
  return v;
};
const [url, token, bundle, target, out, acmeName] =
  ["CONSOLE_URL", "TOKEN", "BUNDLE", "TARGET", "OUT", "ACME_NAME"].map(env);
const step = name => console.log(JSON.stringify({ step: name }));
const fail = msg => { throw new Error(msg); };

// Playwright gives the browser a fresh temporary profile of its own.
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
const problems = [];
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.setDefaultTimeout(15000);
  page.on("pageerror", e => problems.push("page error: " + e.message));
  // Answers with 4xx status are part of the script (a refused token, an invalid entry); the browser
  // logs each as "Failed to load resource", which is not a fault of the page.
  page.on("console", m => {
    if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) problems.push("console error: " + m.text());
  });
  const flash = async text => {
    await page.locator("#flash", { hasText: text }).waitFor();
  };

  step("sign in");
  await page.goto(url + "/console/");
  await page.fill("#token", "not-the-token");
  await page.click("#login-form button");
  await page.locator("#login-error", { hasText: "not accepted" }).waitFor();
  await page.fill("#token", token);
  await page.click("#login-form button");
  await page.locator("h2", { hasText: "Dashboard" }).waitFor();

  step("dashboard draws live charts");
  // Three charts have lines (at least three samples each); the TLS chart has no TLS traffic here.
  await page.waitForFunction(() => ["chart-rps", "chart-codes", "chart-latency"].every(id =>
    Number(document.getElementById(id).dataset.points || 0) >= 3), null, { timeout: 30000 });
  const rps = Number(await page.textContent(".tile b"));
  if (!(rps > 0)) fail("requests/s tile shows " + rps);
  if (!(await page.isHidden("#login"))) fail("the sign-in form is still shown");
  const shot = join(out, "dashboard.png");
  await page.screenshot({ path: shot, fullPage: true });
  if (statSync(shot).size < 20000) fail("the dashboard screenshot is suspiciously small");

  step("upstream form: add a weighted target");
  await page.click('a[href="#/upstreams"]');
  await page.locator('#upstreams-table tr[data-name="u"]').waitFor();
  await page.locator('#upstreams-table tr[data-name="u"] .badge', { hasText: "up" }).first().waitFor();
  await page.click('#upstreams-table tr[data-name="u"] button:has-text("Edit")');
  const targets = await page.inputValue("#upstream-targets");
  await page.fill("#upstream-targets", targets.trim() + `\n${target} 3`);
  await page.click('#entry-form button[type="submit"]');
  await flash("Saved upstreams u");
  await page.locator('#upstreams-table tr[data-name="u"]', { hasText: target }).waitFor();

  step("an invalid entry shows the field's error");
  await page.click('button:has-text("New upstream")');
  await page.fill("#entry-name", "broken");
  await page.fill("#upstream-targets", "");
  await page.click('#entry-form button[type="submit"]');
  await page.locator("#entry-errors", { hasText: "upstreams.broken.targets" }).waitFor();

  step("site form");
  await page.click('a[href="#/sites"]');
  await page.click('button:has-text("New site")');
  await page.fill("#entry-name", "api");
  await page.fill("#site-hosts", "api.test, www.api.test");
  await page.fill("#site-routes", "/ u");
  await page.click('#entry-form button[type="submit"]');
  await flash("Saved sites api");
  await page.locator('tr[data-name="api"]', { hasText: "api.test" }).waitFor();

  step("a route split between two upstreams");
  await page.click('a[href="#/upstreams"]');
  await page.click('button:has-text("New upstream")');
  await page.fill("#entry-name", "canary");
  await page.fill("#upstream-targets", `${target} 1`);
  await page.click('#entry-form button[type="submit"]');
  await flash("Saved upstreams canary");
  await page.click('a[href="#/sites"]');
  await page.click('tr[data-name="api"] button:has-text("Edit")');
  await page.fill("#site-routes", "/ u:90,canary:10");
  await page.click('#entry-form button[type="submit"]');
  await flash("Saved sites api");
  await page.locator('tr[data-name="api"]', { hasText: "/ → u ×90, canary ×10" }).waitFor();
  await page.click('tr[data-name="api"] button:has-text("Edit")');
  if (await page.inputValue("#site-routes") !== "/ u:90,canary:10") fail("the split is not shown as written");
  await page.click('#entry-form button:has-text("Cancel")');

  step("services show their JWT issuers");
  // A service put into the draft through the API, as an operator's script would.
  const auth = { authorization: "Bearer " + token };
  const draft = await fetch(url + "/api/v1/draft", { headers: auth });
  const put = await fetch(url + "/api/v1/draft/services/idp", {
    method: "PUT",
    headers: { ...auth, "if-match": draft.headers.get("etag"), "content-type": "application/json" },
    body: JSON.stringify({ path: "/idp", upstream: "u", auth: "jwt", jwt: [
      { issuer: "http://127.0.0.1:1", discovery: true, audience: "api" },
      { issuer: "billing" },
    ] }),
  });
  if (put.status !== 200) fail("PUT /draft/services/idp: " + put.status + " " + await put.text());
  await page.click('a[href="#/services"]');
  await page.locator('#services-table tr[data-name="idp"]',
    { hasText: "JWT from http://127.0.0.1:1 (discovery), billing (apps' keys)" }).waitFor();

  step("revision, release, node follows");
  await page.click('a[href="#/revisions"]');
  await page.locator("#diff tr.added, #diff tr.changed").first().waitFor();
  await page.fill("#commit-message", "weight 3 to the new target; site api");
  await page.click("#commit-form button");
  await flash("Revision 1 made");
  await page.click('tr[data-revision="1"] button.release');
  await flash("Released 1");
  await page.locator('tr[data-revision="1"] .badge', { hasText: "released" }).waitFor();
  await page.click('a[href="#/nodes"]');
  await page.locator("#nodes-table td.revision", { hasText: "1" }).waitFor();

  step("second revision, side-by-side compare, stage, roll back");
  await page.click('a[href="#/upstreams"]');
  await page.click('#upstreams-table tr[data-name="u"] button:has-text("Edit")');
  await page.selectOption("#upstream-balance", "round_robin");
  await page.click('#entry-form button[type="submit"]');
  await flash("Saved upstreams u");
  await page.click('a[href="#/revisions"]');
  await page.fill("#commit-message", "round robin");
  await page.click("#commit-form button");
  await flash("Revision 2 made");
  await page.selectOption("#diff-from", "1");
  await page.selectOption("#diff-to", "2");
  await page.click("#compare");
  await page.locator("#compared tr.changed", { hasText: "round_robin" }).waitFor();
  await page.screenshot({ path: join(out, "revisions.png"), fullPage: true });
  await page.fill('tr[data-revision="2"] .stage-label', "canary");
  await page.click('tr[data-revision="2"] button.stage');
  await flash("Staged 2 to canary");
  await page.locator(".badge", { hasText: "staged: canary" }).waitFor();
  await page.click('tr[data-revision="2"] button.release');
  await flash("Released 2");
  await page.click('tr[data-revision="1"] button.rollback');
  await flash("Rolled back to 1");

  step("certificate upload with expiry badge");
  await page.click('a[href="#/certificates"]');
  await page.setInputFiles("#cert-bundle", bundle);
  await page.click('#cert-form button[type="submit"]');
  await flash("serving now");
  // Issued for 30 days: under a month left, so the badge warns.
  await page.locator("#cert-table tr", { hasText: "console.test" }).locator(".badge.warn", { hasText: "days left" }).waitFor();
  await page.screenshot({ path: join(out, "certificates.png"), fullPage: true });

  step("ACME certificate: source, next renewal, renew now");
  const acmeRow = page.locator("#cert-table tr", { hasText: acmeName });
  await acmeRow.locator(".cert-source", { hasText: "acme" }).locator(".muted", { hasText: "renews " }).waitFor();
  if (await page.locator("#cert-table tr", { hasText: "console.test" }).locator("button.renew").count())
    fail("an imported certificate offers Renew now");
  await acmeRow.locator("button.renew").click();
  await flash("Renewing " + acmeName);

  step("sign out");
  await page.click("#logout");
  await page.locator("#login-form").waitFor();
  if (problems.length) fail(problems.join("\n"));
  console.log(JSON.stringify({ ok: true }));
} finally {
  await browser.close();
}
