// Line charts on <canvas>, drawn by hand: no chart library to fetch or build.
"use strict";

window.LineChart = class LineChart {
  constructor(canvas, opts) {
    this.canvas = canvas;
    this.opts = Object.assign({ window: 120, unit: "", max: null, percent: false }, opts || {});
    this.series = new Map();
  }

  /** Adds a point to each named series: values is { name: number|null }. */
  push(t, values) {
    for (const [name, v] of Object.entries(values)) {
      if (!this.series.has(name)) this.series.set(name, []);
      const s = this.series.get(name);
      s.push([t, v]);
      while (s.length > this.opts.window) s.shift();
    }
    this.draw();
  }

  draw() {
    const c = this.canvas, ratio = window.devicePixelRatio || 1;
    const w = c.clientWidth || 400, h = c.clientHeight || 220;
    c.width = w * ratio; c.height = h * ratio;
    const g = c.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, h);
    const pad = { l: 56, r: 10, t: 10, b: 22 };
    const all = [...this.series.values()].flat().filter(p => p[1] !== null && Number.isFinite(p[1]));
    const t0 = Math.min(...all.map(p => p[0]), Date.now() - 60000), t1 = Math.max(...all.map(p => p[0]), Date.now());
    let vmax = this.opts.max ?? Math.max(1e-9, ...all.map(p => p[1]));
    if (this.opts.max === null) vmax = niceCeil(vmax * 1.1);
    const x = t => pad.l + (w - pad.l - pad.r) * ((t - t0) / Math.max(1, t1 - t0));
    const y = v => h - pad.b - (h - pad.t - pad.b) * (v / vmax);
    g.strokeStyle = "#e3e7ee"; g.fillStyle = "#6b7280"; g.font = "11px system-ui, sans-serif"; g.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const v = vmax * i / 4, yy = y(v);
      g.beginPath(); g.moveTo(pad.l, yy); g.lineTo(w - pad.r, yy); g.stroke();
      g.fillText(format(v, this.opts), 4, yy + 4);
    }
    g.fillText(new Date(t0).toLocaleTimeString(), pad.l, h - 6);
    const right = new Date(t1).toLocaleTimeString();
    g.fillText(right, w - pad.r - g.measureText(right).width, h - 6);
    let i = 0;
    for (const [, points] of this.series) {
      const color = COLORS[i++ % COLORS.length];
      g.strokeStyle = color; g.fillStyle = color; g.lineWidth = 2; g.beginPath();
      let moved = false;
      for (const [t, v] of points) {
        if (v === null || !Number.isFinite(v)) { moved = false; continue; }
        if (!moved) { g.moveTo(x(t), y(v)); moved = true; } else g.lineTo(x(t), y(v));
      }
      g.stroke();
      // A lone point (the first sample, or one between gaps) as a dot, so it shows.
      const last = points.filter(p => p[1] !== null && Number.isFinite(p[1])).pop();
      if (last) { g.beginPath(); g.arc(x(last[0]), y(last[1]), 2.5, 0, 2 * Math.PI); g.fill(); }
    }
    // How many samples the chart shows, for tests and for anyone inspecting the page.
    c.dataset.points = String(all.length);
  }

  /** A legend element for the chart's series. */
  legend() {
    const el = document.createElement("div");
    el.className = "legend";
    let i = 0;
    for (const name of this.series.keys()) {
      const s = document.createElement("span");
      const sw = document.createElement("i");
      sw.style.background = COLORS[i++ % COLORS.length];
      s.append(sw, name);
      el.append(s);
    }
    return el;
  }
};

const COLORS = ["#2457c5", "#1a7f37", "#b26b00", "#c62828", "#7b3fb5", "#00838f"];

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function format(v, opts) {
  if (opts.percent) return (v * 100).toFixed(0) + "%";
  if (opts.unit === "s") return v >= 1 ? v.toFixed(2) + " s" : (v * 1000).toFixed(v < 0.01 ? 2 : 1) + " ms";
  if (v >= 1000) return (v / 1000).toFixed(1) + "k";
  return (Math.round(v * 10) / 10).toString();
}
