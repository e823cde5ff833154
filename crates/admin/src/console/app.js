// The Gatehouse console: a single page over the admin API (/api/v1). No framework and no build
// step; every page is drawn from API answers with DOM calls (never HTML strings), so nothing an
// operator typed can run as script.
"use strict";

const state = { token: sessionStorage.getItem("gatehouse-token") || "", version: 0, timers: [] };

// ---- API -------------------------------------------------------------------------------------

async function api(method, path, opts = {}) {
  const headers = { Authorization: "Bearer " + state.token };
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  if (opts.ifMatch !== undefined) headers["If-Match"] = '"' + opts.ifMatch + '"';
  const resp = await fetch("/api/v1" + path, {
    method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  let data = null;
  try { data = await resp.json(); } catch (_) { data = null; }
  const etag = resp.headers.get("ETag");
  if (etag) state.version = Number(etag.replace(/"/g, ""));
  if (resp.status === 401) { logout(); throw new Error("signed out"); }
  return { status: resp.status, ok: resp.ok, data };
}

function explain(r) {
  const d = r.data || {};
  const lines = [d.error || ("HTTP " + r.status)];
  for (const e of d.errors || []) lines.push(e.path + ": " + e.message);
  return lines.join("\n");
}

// ---- DOM helpers -----------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function flash(text, bad) {
  const f = document.getElementById("flash");
  f.textContent = text;
  f.className = "flash" + (bad ? " bad" : "");
  f.hidden = false;
  clearTimeout(flash.timer);
  flash.timer = setTimeout(() => { f.hidden = true; }, bad ? 12000 : 4000);
}

function view(...children) {
  const v = document.getElementById("view");
  v.replaceChildren(...children);
}

function every(ms, f) {
  f();
  state.timers.push(setInterval(f, ms));
}

function ago(unix) {
  const s = Math.max(0, Math.round(Date.now() / 1000 - unix));
  return s < 60 ? s + "s ago" : s < 3600 ? Math.round(s / 60) + "m ago" : Math.round(s / 3600) + "h ago";
}

function badge(text, kind) { return h("span", { class: "badge " + (kind || "") }, text); }

// ---- Session ---------------------------------------------------------------------------------

function logout() {
  state.token = "";
  sessionStorage.removeItem("gatehouse-token");
  document.getElementById("shell").hidden = true;
  document.getElementById("login").hidden = false;
}

async function login(token) {
  state.token = token;
  const r = await fetch("/api/v1/status", { headers: { Authorization: "Bearer " + token } });
  if (!r.ok) {
    state.token = "";
    document.getElementById("login-error").textContent = r.status === 401 ? "That token is not accepted." : "HTTP " + r.status;
    return;
  }
  sessionStorage.setItem("gatehouse-token", token);
  const status = await r.json();
  document.getElementById("who").textContent = "node " + ((status.control || {}).node || "?");
  document.getElementById("login").hidden = true;
  document.getElementById("shell").hidden = false;
  route();
}

// ---- Router ----------------------------------------------------------------------------------

const pages = {
  dashboard, sites: () => section("sites"), upstreams: () => section("upstreams"), services: () => section("services"),
  apps: () => section("apps"), plans: () => section("plans"), certificates, revisions, nodes,
};

function route() {
  for (const t of state.timers) clearInterval(t);
  state.timers = [];
  const name = (location.hash.replace(/^#\//, "").split("/")[0]) || "dashboard";
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.getAttribute("href") === "#/" + name);
  (pages[name] || dashboard)().catch(e => flash(String(e.message || e), true));
}

// ---- Dashboard -------------------------------------------------------------------------------

async function dashboard() {
  const tiles = { rps: h("b", {}, "–"), conns: h("b", {}, "–"), gen: h("b", {}, "–"), rev: h("b", {}, "–") };
  const canvases = { rps: h("canvas", { id: "chart-rps" }), codes: h("canvas", { id: "chart-codes" }),
    latency: h("canvas", { id: "chart-latency" }), tls: h("canvas", { id: "chart-tls" }) };
  const legends = { codes: h("div"), latency: h("div") };
  view(
    h("h2", {}, "Dashboard"),
    h("div", { class: "tiles" },
      h("div", { class: "tile" }, tiles.rps, h("span", {}, "requests/s")),
      h("div", { class: "tile" }, tiles.conns, h("span", {}, "open connections")),
      h("div", { class: "tile" }, tiles.gen, h("span", {}, "config generation")),
      h("div", { class: "tile" }, tiles.rev, h("span", {}, "revision running"))),
    h("div", { class: "grid" },
      h("div", { class: "card" }, h("h3", {}, "Requests per second"), canvases.rps),
      h("div", { class: "card" }, h("h3", {}, "Status codes per second"), canvases.codes, legends.codes),
      h("div", { class: "card" }, h("h3", {}, "Latency percentiles"), canvases.latency, legends.latency),
      h("div", { class: "card" }, h("h3", {}, "TLS resumption ratio"), canvases.tls)));
  const charts = {
    rps: new LineChart(canvases.rps), codes: new LineChart(canvases.codes),
    latency: new LineChart(canvases.latency, { unit: "s" }), tls: new LineChart(canvases.tls, { percent: true, max: 1 }),
  };
  let last = null;
  every(2000, async () => {
    const [r, s] = await Promise.all([api("GET", "/stats"), api("GET", "/status")]);
    if (!r.ok) return;
    const now = r.data;
    tiles.conns.textContent = now.connections_active;
    tiles.gen.textContent = now.generation;
    tiles.rev.textContent = ((s.data || {}).control || {}).revision ?? "file";
    if (last) {
      const dt = Math.max(0.001, (now.time_ms - last.time_ms) / 1000);
      const per = k => (now.requests[k] - last.requests[k]) / dt;
      const total = ["1xx", "2xx", "3xx", "4xx", "5xx"].reduce((a, k) => a + per(k), 0);
      tiles.rps.textContent = total.toFixed(1);
      charts.rps.push(now.time_ms, { "requests/s": total });
      charts.codes.push(now.time_ms, { "2xx": per("2xx"), "3xx": per("3xx"), "4xx": per("4xx"), "5xx": per("5xx") });
      const deltas = now.latency.buckets.map((b, i) => b - last.latency.buckets[i]);
      charts.latency.push(now.time_ms, {
        p50: quantile(0.5, deltas, now.latency.bounds), p90: quantile(0.9, deltas, now.latency.bounds),
        p99: quantile(0.99, deltas, now.latency.bounds),
      });
      const full = now.tls.full - last.tls.full, resumed = now.tls.resumed - last.tls.resumed;
      charts.tls.push(now.time_ms, { resumed: full + resumed > 0 ? resumed / (full + resumed) : null });
      legends.codes.replaceChildren(charts.codes.legend());
      legends.latency.replaceChildren(charts.latency.legend());
    }
    last = now;
  });
}

/** The q-quantile of a histogram (per-bucket counts; one more bucket than bounds), interpolated. */
function quantile(q, counts, bounds) {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  let rank = q * total, lower = 0;
  for (let i = 0; i < counts.length; i++) {
    const upper = i < bounds.length ? bounds[i] : bounds[bounds.length - 1];
    if (rank <= counts[i] && counts[i] > 0) return lower + (upper - lower) * (rank / counts[i]);
    rank -= counts[i];
    lower = upper;
  }
  return bounds[bounds.length - 1];
}

// ---- Draft sections --------------------------------------------------------------------------

// The issuers a service takes JWTs from, and where their keys come from.
const issuers = e => [].concat(e.jwt || []).map(j =>
  (j.issuer || "any issuer") + (j.discovery ? " (discovery)" : j.jwks_uri ? " (" + j.jwks_uri + ")" : " (apps' keys)")
).join(", ");

// What a service applies, in a few words: its credentials, JWT issuers, ACL, limits and CORS
// origins.
const policies = e => [
  [].concat(e.auth || []).filter(a => a !== "none").join(" or "),
  [].concat(e.auth || []).includes("jwt") && e.jwt ? "JWT from " + issuers(e) : "",
  e.external ? "asks " + e.external.url + (e.external.fail_open ? " (fail open)" : "") : "",
  e.acl ? "ACL" : "",
  (e.rate_limits || []).length ? (e.rate_limits.length + " rate limit(s)") : "",
  e.cors ? "CORS: " + (e.cors.origins || []).join(", ") : "",
  compressed(e.compression),
].filter(Boolean).join("; ");

// A `compression` setting in a few words: the codings, or off.
const compressed = c => !c ? "" : c.enabled === false
  ? (c.decompress_requests ? "decodes requests" : "no compression")
  : "compresses: " + (c.algorithms || ["zstd", "br", "gzip"]).join(", ") + (c.decompress_requests ? "; decodes requests" : "");

// Where a route or service sends requests: an upstream, or a split with its weights, overrides,
// stickiness and mirror, in a few words.
const destination = e => {
  const list = Array.isArray(e.upstream)
    ? e.upstream.map(w => w.upstream + " ×" + (w.weight ?? 1) + (w.match ? " (" + overrides(w.match) + ")" : "")).join(", ")
    : e.upstream || "";
  const sticky = e.sticky ? "; sticky by " + (e.sticky.cookie ? "cookie " + e.sticky.cookie : e.sticky.hash) : "";
  const mirror = e.mirror ? "; mirrored to " + e.mirror.upstream + " (" + (e.mirror.percent ?? 100) + " %)" : "";
  return list + sticky + mirror;
};
const overrides = m => Object.entries(m.header || {}).map(([k, v]) => k + ": " + v)
  .concat(Object.entries(m.cookie || {}).map(([k, v]) => "cookie " + k + "=" + v)).join(", ");

// A route's upstream in the routes field: a name, or `v1:90,v2:10` for a split.
const upstreamText = u => Array.isArray(u) ? u.map(w => w.upstream + ":" + (w.weight ?? 1)).join(",") : u;
const upstreamValue = (text, old) => !/[,:]/.test(text) ? text : text.split(",").filter(Boolean).map(part => {
  const [upstream, weight] = part.split(":");
  const before = Array.isArray(old) ? old.find(w => w.upstream === upstream) : null;
  return Object.assign({}, before || {}, { upstream, weight: Number(weight ?? 1) });
});

const columns = {
  sites: e => [(e.hosts || []).join(", ") + (e.compression ? "\n" + compressed(e.compression) : ""),
    (e.routes || []).map(r => r.path + " → " + destination(r) + (r.cors ? " (CORS)" : "") + (r.compression ? " (" + compressed(r.compression) + ")" : "")).join("\n")],
  upstreams: e => [e.balance || "random", (e.targets || []).map(t => typeof t === "string" ? t : t.address + (t.weight ? " ×" + t.weight : "")).join("\n")],
  services: e => [e.prefix || e.path || "", destination(e), policies(e)],
  apps: e => [Object.entries(e.grants || {}).map(([s, p]) => s + (p ? " (" + p + ")" : "")).join(", "), e.key_sha256 ? "key set" : ""],
  plans: e => [(e.rate_limits || []).length + " rate limit(s)", e.acl ? "ACL" : ""],
};
const headings = {
  sites: ["Hosts", "Routes"], upstreams: ["Balance", "Targets"], services: ["Prefix", "Upstream", "Policies"],
  apps: ["Grants", "Key"], plans: ["Rate limits", "ACL"],
};

async function section(name) {
  const r = await api("GET", "/draft");
  if (!r.ok) return flash(explain(r), true);
  const entries = (r.data.document || {})[name] || {};
  const health = name === "upstreams" ? await upstreamHealth() : {};
  const rows = Object.entries(entries).map(([id, e]) => h("tr", { "data-name": id },
    h("td", {}, h("b", {}, id)),
    ...columns[name](e).map(c => h("td", { class: "pre" }, c)),
    name === "upstreams" ? h("td", {}, ...(health[id] || []).map(ep =>
      h("div", {}, badge(ep.healthy && !ep.ejected && ep.breaker === "closed" ? "up" : ep.breaker !== "closed" ? "breaker " + ep.breaker : "down",
        ep.healthy && !ep.ejected && ep.breaker === "closed" ? "ok" : "bad"), ep.address))) : null,
    h("td", {}, h("button", { class: "secondary", onclick: () => editor(name, id, e) }, "Edit"), " ",
      h("button", { class: "danger", onclick: () => remove(name, id) }, "Delete"))));
  view(
    h("h2", {}, name[0].toUpperCase() + name.slice(1), h("span", { class: "muted" }, "  draft version " + r.data.version)),
    h("div", { class: "row" }, h("button", { onclick: () => editor(name, "", null) }, "New " + name.replace(/s$/, ""))),
    h("table", { id: name + "-table" },
      h("tr", {}, h("th", {}, "Name"), ...headings[name].map(t => h("th", {}, t)), name === "upstreams" ? h("th", {}, "Live health") : null, h("th", {}, "")),
      rows.length ? rows : h("tr", {}, h("td", { colspan: 5, class: "muted" }, "None in the draft."))),
    h("div", { id: "editor" }));
  if (name === "upstreams") state.timers.push(setInterval(async () => {
    if (!document.getElementById("upstreams-table")) return;
    const live = await upstreamHealth();
    for (const tr of document.querySelectorAll("#upstreams-table tr[data-name]")) {
      const cell = tr.children[3];
      cell.replaceChildren(...(live[tr.dataset.name] || []).map(ep => h("div", {},
        badge(ep.healthy && !ep.ejected && ep.breaker === "closed" ? "up" : "down", ep.healthy && !ep.ejected && ep.breaker === "closed" ? "ok" : "bad"), ep.address)));
    }
  }, 2000));
}

async function upstreamHealth() {
  const s = await api("GET", "/stats");
  const out = {};
  for (const u of (s.data || {}).upstreams || []) out[u.name] = u.endpoints;
  return out;
}

/** A form for one entry: a few fields by section, and the whole entry as JSON beside them. */
function editor(section, name, entry) {
  const current = entry ? JSON.parse(JSON.stringify(entry)) : {};
  const nameInput = h("input", { id: "entry-name", value: name, required: true, disabled: !!name });
  const json = h("textarea", { id: "entry-json" }, JSON.stringify(current, null, 2));
  const fields = h("div");
  const errors = h("p", { class: "error", id: "entry-errors" });
  const sync = () => { try { json.value = JSON.stringify(Object.assign(JSON.parse(json.value || "{}"), formValues()), null, 2); } catch (_) { } };
  let formValues = () => ({});
  if (section === "sites") {
    const hosts = h("input", { id: "site-hosts", value: (current.hosts || []).join(", "), size: 40, oninput: sync });
    const routes = h("textarea", { id: "site-routes", oninput: sync, class: "short" },
      (current.routes || []).map(r => r.path + " " + upstreamText(r.upstream) + (r.strip_prefix ? " strip" : "")).join("\n"));
    fields.append(h("label", {}, "Hosts (comma separated)", hosts), h("label", {}, "Routes, one per line: PATH UPSTREAM [strip] (a split: v1:90,v2:10)", routes));
    formValues = () => ({
      hosts: hosts.value.split(",").map(s => s.trim()).filter(Boolean),
      routes: routes.value.split("\n").map(l => l.trim().split(/\s+/)).filter(p => p.length >= 2 && p[0]).map(([path, upstream, strip]) => {
        const old = (current.routes || []).find(r => r.path === path) || {};
        return Object.assign({}, old, { path, upstream: upstreamValue(upstream, old.upstream) }, strip === "strip" ? { strip_prefix: true } : {});
      }),
    });
  } else if (section === "upstreams") {
    const balance = h("select", { id: "upstream-balance", onchange: sync },
      ...["random", "round_robin", "least_conn", "ewma", "ip_hash", "consistent_hash"].map(b =>
        h("option", { value: b, selected: (current.balance || "random") === b }, b)));
    const targets = h("textarea", { id: "upstream-targets", oninput: sync, class: "short" },
      (current.targets || []).map(t => typeof t === "string" ? t + " 1" : t.address + " " + (t.weight || 1)).join("\n"));
    fields.append(h("label", {}, "Balance", balance), h("label", {}, "Targets, one per line: ADDRESS WEIGHT", targets));
    formValues = () => ({
      balance: balance.value,
      targets: targets.value.split("\n").map(l => l.trim().split(/\s+/)).filter(p => p[0]).map(([address, weight]) => {
        const old = (current.targets || []).find(t => typeof t === "object" && t.address === address) || {};
        return Object.assign({}, old, { address, weight: Number(weight || 1) });
      }),
    });
  } else if (section === "apps") {
    const key = h("input", { id: "app-key", type: "password", placeholder: "unchanged", autocomplete: "new-password" });
    const grants = h("input", { id: "app-grants", size: 50, oninput: sync,
      value: Object.entries(current.grants || {}).map(([s, p]) => p ? s + ":" + p : s).join(", ") });
    fields.append(h("label", {}, "New app key (stored as its SHA-256)", key), h("label", {}, "Grants: SERVICE[:PLAN], comma separated", grants));
    formValues = () => {
      const out = { grants: Object.fromEntries(grants.value.split(",").map(s => s.trim()).filter(Boolean).map(g => {
        const [s, p] = g.split(":"); return [s, p || null];
      })) };
      if (key.value) { out.key = key.value; delete current.key_sha256; }
      return out;
    };
  }
  const save = async ev => {
    ev.preventDefault();
    let body;
    try { body = Object.assign(JSON.parse(json.value || "{}"), formValues()); } catch (e) { errors.textContent = "The JSON does not parse: " + e.message; return; }
    if (body.key) delete body.key_sha256;
    const id = nameInput.value.trim();
    const r = await api("PUT", "/draft/" + section + "/" + encodeURIComponent(id), { body, ifMatch: state.version });
    if (r.ok) { flash("Saved " + section + " " + id + " in the draft (version " + r.data.version + ")."); return section_(section); }
    if (r.status === 412) { flash("Someone changed the draft meanwhile; it has been reloaded. Make your change again.", true); return section_(section); }
    errors.textContent = explain(r);
  };
  document.getElementById("editor").replaceChildren(h("form", { class: "card", id: "entry-form", onsubmit: save },
    h("h3", {}, (name ? "Edit " : "New ") + section.replace(/s$/, "") + " " + name),
    h("label", {}, "Name", nameInput), fields,
    h("details", { open: section === "services" || section === "plans" }, h("summary", {}, "Whole entry as JSON"), json),
    errors, h("div", { class: "row" }, h("button", { type: "submit" }, "Save to draft"),
      h("button", { type: "button", class: "secondary", onclick: () => section_(section) }, "Cancel"))));
}

function section_(name) { return section(name).catch(e => flash(String(e.message || e), true)); }

async function remove(section, name) {
  if (!confirm("Delete " + section + " " + name + " from the draft?")) return;
  const r = await api("DELETE", "/draft/" + section + "/" + encodeURIComponent(name), { ifMatch: state.version });
  if (!r.ok) return flash(explain(r), true);
  flash("Deleted " + name + " from the draft.");
  section_(section);
}

// ---- Certificates ----------------------------------------------------------------------------

async function certificates() {
  const r = await api("GET", "/certificates");
  if (!r.ok) return view(h("h2", {}, "Certificates"), h("p", { class: "error" }, explain(r)));
  const rows = r.data.certificates.map(c => h("tr", {},
    h("td", {}, c.names.join(", ")), h("td", {}, c.key_type),
    h("td", {}, c.not_after, " ", c.expired ? badge("expired", "bad") : c.days_left < 30 ? badge(c.days_left + " days left", "warn") : badge(c.days_left + " days left", "ok")),
    h("td", {}, c.issuer), h("td", {}, c.serial),
    h("td", { class: "cert-source" }, c.source || "imported",
      c.acme && c.acme.next_renewal ? h("div", { class: "muted" }, "renews " + c.acme.next_renewal) : "",
      c.acme && c.acme.last_error ? h("div", { class: "error" }, c.acme.last_error) : ""),
    h("td", {},
      c.acme ? h("button", { class: "renew", onclick: async () => {
        const d = await api("POST", "/acme/" + encodeURIComponent(c.names[0]) + "/renew");
        flash(d.ok ? "Renewing " + c.names[0] + "; the new certificate serves once issued." : explain(d), !d.ok);
      } }, "Renew now") : "",
      h("button", { class: "danger", onclick: async () => {
      if (!confirm("Remove the certificate for " + c.names[0] + "?")) return;
      const d = await api("DELETE", "/certificates/" + encodeURIComponent(c.names[0]));
      flash(d.ok ? "Removed." : explain(d), !d.ok); certificates();
    } }, "Remove"))));
  const bundle = h("input", { type: "file", id: "cert-bundle", accept: ".pem,.crt,.key" });
  const key = h("input", { type: "file", id: "cert-key", accept: ".pem,.key" });
  const errors = h("p", { class: "error", id: "cert-errors" });
  const upload = async ev => {
    ev.preventDefault();
    if (!bundle.files[0]) { errors.textContent = "Choose a PEM file."; return; }
    const text = await bundle.files[0].text();
    const body = key.files[0] ? { cert: text, key: await key.files[0].text() } : { pem: text };
    const res = await api("POST", "/certificates", { body });
    if (res.ok) { flash("Uploaded " + res.data.names.join(", ") + "; serving now."); return certificates(); }
    errors.textContent = explain(res);
  };
  view(h("h2", {}, "Certificates"),
    h("table", { id: "cert-table" }, h("tr", {}, ...["Names", "Key", "Expires", "Issuer", "Serial", "Source", ""].map(t => h("th", {}, t))),
      rows.length ? rows : h("tr", {}, h("td", { colspan: 7, class: "muted" }, "The store is empty."))),
    h("form", { class: "card", id: "cert-form", onsubmit: upload }, h("h3", {}, "Upload"),
      h("label", {}, "Certificate chain, leaf first (with the key, or the key below)", bundle),
      h("label", {}, "Private key (optional)", key), errors, h("button", { type: "submit" }, "Upload")));
}

// ---- Revisions -------------------------------------------------------------------------------

function diffTable(d) {
  if (d.identical) return h("p", { class: "muted" }, "No difference.");
  return h("table", { class: "diff", id: "diff" }, ...d.rows.map(row => row.kind === "skip"
    ? h("tr", { class: "skip" }, h("td", { colspan: 4 }, "⋯ " + row.skipped + " unchanged lines"))
    : h("tr", { class: row.kind },
      h("td", { class: "no" }, row.left ? row.left[0] : ""), h("td", { class: "l" }, row.left ? row.left[1] : ""),
      h("td", { class: "no" }, row.right ? row.right[0] : ""), h("td", { class: "r" }, row.right ? row.right[1] : ""))));
}

async function revisions() {
  const [list, draft, diff] = await Promise.all([api("GET", "/revisions"), api("GET", "/draft"), api("GET", "/draft/diff")]);
  if (!list.ok) return flash(explain(list), true);
  const { released, staged } = list.data;
  const act = async (method, path, body, done) => {
    const r = await api(method, path, { body });
    flash(r.ok ? done : explain(r), !r.ok);
    revisions();
  };
  const rows = [...list.data.revisions].reverse().map(rev => {
    const label = h("input", { placeholder: "label", size: 8, class: "stage-label" });
    const marks = [rev.number === released ? badge("released", "ok") : null,
      ...Object.entries(staged).filter(([, n]) => n === rev.number).map(([l]) => badge("staged: " + l, "warn"))];
    return h("tr", { "data-revision": rev.number },
      h("td", {}, h("b", {}, rev.number), " ", ...marks), h("td", {}, rev.message), h("td", {}, rev.author),
      h("td", {}, new Date(rev.created * 1000).toLocaleString()), h("td", { class: "muted" }, rev.hash.slice(0, 12)),
      h("td", {}, h("div", { class: "row" },
        h("button", { class: "release", onclick: () => act("POST", "/revisions/" + rev.number + "/release", undefined, "Released " + rev.number + ".") }, "Release"),
        released && rev.number < released ? h("button", { class: "secondary rollback", onclick: () => act("POST", "/revisions/" + rev.number + "/rollback", undefined, "Rolled back to " + rev.number + ".") }, "Roll back") : null,
        label, h("button", { class: "secondary stage", onclick: () => act("POST", "/revisions/" + rev.number + "/stage", { label: label.value }, "Staged " + rev.number + " to " + label.value + ".") }, "Stage"))));
  });
  const message = h("input", { id: "commit-message", size: 50, placeholder: "why", required: true });
  const commit = async ev => {
    ev.preventDefault();
    const r = await api("POST", "/revisions", { body: { message: message.value } });
    flash(r.ok ? "Revision " + r.data.number + " made." : explain(r), !r.ok);
    revisions();
  };
  const nums = list.data.revisions.map(r => r.number);
  const from = h("select", { id: "diff-from" }, ...nums.map(n => h("option", { value: n, selected: n === nums[nums.length - 2] }, n)));
  const to = h("select", { id: "diff-to" }, ...nums.map(n => h("option", { value: n, selected: n === nums[nums.length - 1] }, n)), h("option", { value: "draft" }, "draft"));
  const compared = h("div", { id: "compared" });
  const compare = async () => {
    const r = await api("GET", "/revisions/" + from.value + "/diff/" + to.value);
    compared.replaceChildren(r.ok ? diffTable(r.data) : h("p", { class: "error" }, explain(r)));
  };
  view(h("h2", {}, "Revisions"),
    h("div", { class: "card" }, h("h3", {}, "Draft, version " + draft.data.version,
        draft.data.updated_by ? h("span", { class: "muted" }, "  by " + draft.data.updated_by + ", " + ago(draft.data.updated)) : null),
      h("p", { class: "muted" }, "Against " + (diff.data || {}).from + ":"), diff.ok ? diffTable(diff.data) : null,
      h("form", { class: "row", id: "commit-form", onsubmit: commit }, message, h("button", { type: "submit" }, "Make revision"))),
    Object.keys(staged).length ? h("div", { class: "card" }, h("h3", {}, "Stages"), ...Object.entries(staged).map(([l, n]) =>
      h("div", { class: "row" }, badge(l, "warn"), "revision " + n, h("button", { class: "secondary", onclick: () => act("DELETE", "/stages/" + encodeURIComponent(l), undefined, "Unstaged " + l + ".") }, "Unstage")))) : null,
    h("table", { id: "revisions-table" }, h("tr", {}, ...["Revision", "Message", "Author", "Made", "Hash", ""].map(t => h("th", {}, t))), rows),
    h("div", { class: "card" }, h("h3", {}, "Compare"), h("div", { class: "row" }, "from", from, "to", to, h("button", { id: "compare", onclick: compare }, "Compare")), compared));
}

// ---- Nodes -----------------------------------------------------------------------------------

async function nodes() {
  const table = h("table", { id: "nodes-table" });
  view(h("h2", {}, "Nodes"), table);
  every(2000, async () => {
    const r = await api("GET", "/nodes");
    if (!r.ok) return;
    table.replaceChildren(h("tr", {}, ...["Node", "Labels", "Revision", "Target", "Health", "Last error", "Reported"].map(t => h("th", {}, t))),
      ...r.data.nodes.map(n => h("tr", { "data-node": n.id },
        h("td", {}, h("b", {}, n.id)), h("td", {}, (n.labels || []).join(", ")), h("td", { class: "revision" }, n.revision ?? "file"),
        h("td", {}, n.target ?? "–"),
        h("td", {}, n.stale ? badge("stale", "bad") : badge(n.health, n.health === "ok" ? "ok" : "warn")),
        h("td", { class: "error" }, n.last_error ? "revision " + n.last_error.revision + ": " + n.last_error.errors.join("; ") : ""),
        h("td", {}, ago(n.updated)))));
  });
}

// ---- Start -----------------------------------------------------------------------------------

document.getElementById("login-form").addEventListener("submit", ev => {
  ev.preventDefault();
  login(document.getElementById("token").value.trim());
});
document.getElementById("logout").addEventListener("click", logout);
window.addEventListener("hashchange", route);
if (state.token) login(state.token); else logout();
