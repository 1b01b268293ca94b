// Small charts drawn as inline SVG: no library, nothing fetched, text set as text.
//
// Each chart is drawn at its container's width in pixels (not scaled from a fixed
// viewBox), so its labels stay readable on a phone; the caller draws again when the
// width changes. Colours come from CSS classes, so light and dark themes apply.

import { svg } from "/ui/dom.js";

/** A "nice" top for an axis: 1, 2 or 5 times a power of ten, at least `max`. */
export function niceMax(max) {
  if (max <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

function frame(width, height, label) {
  return svg("svg", {
    width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label, class: "chart",
  });
}

/** Horizontal grid lines with their values, for a y axis from 0 to `top`. */
function grid(g, { left, right, top: y0, bottom, max }) {
  // Counts are whole: the middle line only where it falls on a whole number.
  for (const f of Number.isInteger(max / 2) ? [0, 0.5, 1] : [0, 1]) {
    const y = bottom - f * (bottom - y0);
    g.append(svg("line", { x1: left, x2: right, y1: y, y2: y, class: "grid" }));
    g.append(svg("text", { x: left - 6, y: y + 4, "text-anchor": "end", class: "tick" }, String(max * f)));
  }
}

/** A chart's frame with a y axis from 0 to a nice top above every one of `values`. */
function plot(width, height, label, values) {
  const pad = { left: 36, right: 8, top: 10, bottom: 24 };
  const root = frame(width, height, label);
  const plotW = Math.max(10, width - pad.left - pad.right);
  const bottom = height - pad.bottom;
  const max = niceMax(Math.max(0, ...values));
  grid(root, { left: pad.left, right: width - pad.right, top: pad.top, bottom, max });
  return { root, pad, plotW, bottom, max };
}

/**
 * Values over time: `series` of { name, values, cls, kind: "bars" | "line" | "step" },
 * one value per interval starting at `starts[i]` (ms), each `stepMs` long.
 * Bars of several series stand side by side in their interval.
 */
export function timeChart({ width, height = 180, starts, stepMs, series, label, format }) {
  const { root, pad, plotW, bottom, max } = plot(width, height, label, series.flatMap((s) => s.values));
  const n = starts.length;
  const x = (i) => pad.left + (i / n) * plotW;
  const y = (v) => bottom - (v / max) * (bottom - pad.top);
  const slot = plotW / n;
  const barred = series.filter((s) => s.kind === "bars");
  barred.forEach((s, k) => {
    const w = Math.max(1, (slot * 0.8) / barred.length);
    s.values.forEach((v, i) => {
      if (!v) return;
      root.append(svg("rect", {
        x: x(i) + slot * 0.1 + k * w, y: y(v), width: Math.max(1, w - 0.5), height: bottom - y(v), class: s.cls,
      }));
    });
  });
  for (const s of series.filter((s) => s.kind !== "bars")) {
    let d = "";
    s.values.forEach((v, i) => {
      if (s.kind === "step") {
        d += `${i ? "L" : "M"}${x(i)},${y(v)}L${x(i + 1)},${y(v)}`;
      } else {
        d += `${i ? "L" : "M"}${x(i) + slot / 2},${y(v)}`;
      }
    });
    if (s.kind === "step") {
      root.append(svg("path", { d: `${d}L${x(n)},${bottom}L${x(0)},${bottom}Z`, class: `${s.cls} fill` }));
    }
    root.append(svg("path", { d, class: `${s.cls} stroke` }));
  }
  // Time labels: where the chart starts, its middle, and now at its right edge.
  if (n) {
    const tick = (at, anchor, text) =>
      root.append(svg("text", { x: at, y: height - 6, "text-anchor": anchor, class: "tick" }, text));
    tick(x(0), "start", format(starts[0]));
    tick(x(Math.floor(n / 2)), "middle", format(starts[Math.floor(n / 2)]));
    tick(x(n), "end", "now");
  }
  // Each interval carries its numbers, for a pointer resting on it (and for
  // screen readers, which read titles).
  for (let i = 0; i < n; i++) {
    const r = svg("rect", { x: x(i), y: pad.top, width: slot, height: bottom - pad.top, class: "hover" });
    const parts = series.map((s) => `${s.values[i]} ${s.name}`).join(", ");
    r.append(svg("title", {}, `${format(starts[i])}–${format(starts[i] + stepMs)}: ${parts}`));
    root.append(r);
  }
  return root;
}

/** Labelled bars, one per value (a histogram). */
export function barChart({ width, height = 160, labels, values, cls, label, unit }) {
  const { root, pad, plotW, bottom, max } = plot(width, height, label, values);
  const n = values.length;
  const slot = plotW / n;
  values.forEach((v, i) => {
    const h = (v / max) * (bottom - pad.top);
    const bar = svg("rect", { x: pad.left + i * slot + slot * 0.15, y: bottom - h, width: slot * 0.7, height: h, class: cls });
    bar.append(svg("title", {}, `${labels[i]}: ${v} ${unit}`));
    root.append(bar);
    root.append(svg("text", { x: pad.left + (i + 0.5) * slot, y: height - 6, "text-anchor": "middle", class: "tick" }, labels[i]));
  });
  return root;
}

/**
 * One stacked horizontal bar per row: `rows` of { name, parts: [{ value, cls, name }] },
 * all on one scale, the row's name above its bar.
 */
export function stackedBars({ width, rows, label }) {
  const rowH = 34;
  const height = Math.max(rowH, rows.length * rowH);
  const root = frame(width, height, label);
  const max = niceMax(Math.max(1, ...rows.map((r) => r.parts.reduce((a, p) => a + p.value, 0))));
  const left = 12;
  const plotW = Math.max(10, width - left - 48);
  rows.forEach((r, i) => {
    const top = i * rowH;
    const total = r.parts.reduce((a, p) => a + p.value, 0);
    root.append(svg("text", { x: left, y: top + 12, class: "name" }, r.name));
    let at = left;
    for (const p of r.parts) {
      if (!p.value) continue;
      const w = (p.value / max) * plotW;
      const seg = svg("rect", { x: at, y: top + 16, width: w, height: 12, class: p.cls });
      seg.append(svg("title", {}, `${r.name}: ${p.value} ${p.name}`));
      root.append(seg);
      at += w;
    }
    root.append(svg("text", { x: at + 6, y: top + 26, class: "tick" }, String(total)));
  });
  return root;
}
