// rscoord console: charts drawn as inline SVG, no library. Every label is
// set with textContent; colours come from classes in style.css (the
// Content-Security-Policy forbids inline styles).
"use strict";

const svgNS = "http://www.w3.org/2000/svg";

function svg(name, attrs, text) {
  const el = document.createElementNS(svgNS, name);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// Short numbers for axes: 1.2k, 3.4M.
function short(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
  if (a >= 1e3) return (v / 1e3).toFixed(1) + "k";
  if (Number.isInteger(v)) return String(v);
  return v.toFixed(a < 10 ? 2 : 1);
}

// Runs of known values: a null (Redis could not tell) breaks the line
// rather than drawing it through zero.
function runs(points) {
  const out = [];
  let cur = [];
  for (const p of points) {
    if (p[1] === null || p[1] === undefined || Number.isNaN(p[1])) {
      if (cur.length) out.push(cur);
      cur = [];
    } else cur.push(p);
  }
  if (cur.length) out.push(cur);
  return out;
}

// lineChart draws series [{name, cls, points: [[timeMs, value|null]]}] in
// one figure titled title. The figure says in text what it shows (its
// legend and the last value of each series), so no reader depends on the
// colours.
function lineChart(title, series, opts = {}) {
  const w = opts.width || 360, h = opts.height || 140;
  const pad = { l: 44, r: 8, t: 8, b: 20 };
  const fig = document.createElement("figure");
  fig.className = "chart";
  const cap = document.createElement("figcaption");
  cap.textContent = title;
  fig.appendChild(cap);
  const all = series.flatMap((s) => s.points.filter((p) => p[1] !== null && p[1] !== undefined));
  const root = svg("svg", { viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: "img", "aria-label": title });
  root.appendChild(svg("title", {}, title));
  fig.appendChild(root);
  if (all.length === 0) {
    root.appendChild(svg("text", { x: w / 2, y: h / 2, "text-anchor": "middle", class: "empty" }, opts.empty || "no samples yet"));
    return fig;
  }
  let t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]));
  if (t1 === t0) t0 -= 1000;
  let v1 = Math.max(...all.map((p) => p[1]), 0);
  if (v1 === 0) v1 = 1;
  const x = (t) => pad.l + ((t - t0) / (t1 - t0)) * (w - pad.l - pad.r);
  const y = (v) => h - pad.b - (v / v1) * (h - pad.t - pad.b);
  const axis = svg("g", { class: "axis" });
  axis.appendChild(svg("line", { x1: pad.l, y1: h - pad.b, x2: w - pad.r, y2: h - pad.b }));
  axis.appendChild(svg("line", { x1: pad.l, y1: pad.t, x2: pad.l, y2: h - pad.b }));
  axis.appendChild(svg("text", { x: pad.l - 4, y: pad.t + 8, "text-anchor": "end" }, short(v1)));
  axis.appendChild(svg("text", { x: pad.l - 4, y: h - pad.b, "text-anchor": "end" }, "0"));
  axis.appendChild(svg("text", { x: pad.l, y: h - 4 }, span(Date.now() - t0) + " ago"));
  axis.appendChild(svg("text", { x: w - pad.r, y: h - 4, "text-anchor": "end" }, "now"));
  root.appendChild(axis);
  const legend = document.createElement("ul");
  legend.className = "legend";
  for (const [i, s] of series.entries()) {
    const cls = "series s" + (s.cls === undefined ? i % 8 : s.cls);
    const g = svg("g", { class: cls, "data-series": s.name });
    for (const run of runs(s.points)) {
      g.appendChild(svg("polyline", { points: run.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" "), "data-points": run.length }));
      const last = run[run.length - 1];
      g.appendChild(svg("circle", { cx: x(last[0]).toFixed(1), cy: y(last[1]).toFixed(1), r: 2.5 }));
    }
    root.appendChild(g);
    const known = s.points.filter((p) => p[1] !== null && p[1] !== undefined);
    const li = document.createElement("li");
    li.className = cls;
    li.textContent = s.name + ": " + (known.length ? short(known[known.length - 1][1]) + (opts.unit || "") : "unknown");
    legend.appendChild(li);
  }
  fig.appendChild(legend);
  return fig;
}

// sparkline draws values (oldest first; null breaks the line) small
// enough for a table cell, with the last value in text beside it.
function sparkline(values, label) {
  const w = 80, h = 18;
  const wrap = document.createElement("span");
  wrap.className = "spark";
  const known = values.filter((v) => v !== null && v !== undefined);
  const root = svg("svg", { viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: "img", "aria-label": label });
  root.appendChild(svg("title", {}, label));
  if (known.length > 0) {
    const hi = Math.max(...known, 1);
    const n = Math.max(values.length - 1, 1);
    for (const run of runs(values.map((v, i) => [i, v]))) {
      root.appendChild(svg("polyline", {
        points: run.map(([i, v]) => (i / n * (w - 2) + 1).toFixed(1) + "," + (h - 1 - v / hi * (h - 2)).toFixed(1)).join(" "),
        "data-points": run.length,
      }));
    }
  }
  wrap.appendChild(root);
  return wrap;
}
