// The Metrics view: how the queue is doing, as charts. The server counts
// (GET /api/v1/metrics/series, a few dozen numbers whatever the size of history);
// this draws them, again when the window or the width changes, and while the view
// is open, a little after the queue changes.

import { $, el, text } from "/ui/dom.js";
import { timeChart, barChart, stackedBars } from "/ui/charts.js";

let open = false;
let data = null;
let totals = null;
let due = null;

/** Shows or hides the view; shown, it is read afresh. */
export function showMetrics(shown) {
  open = shown;
  if (shown) load();
}

/** The queue changed: read again, at most every two seconds, while the view is open. */
export function metricsChanged() {
  if (open && !due) due = setTimeout(() => { due = null; load(); }, 2000);
}

async function load() {
  const span = $("m-window").value;
  const [series, counters] = await Promise.all([
    fetch(`/api/v1/metrics/series?window=${encodeURIComponent(span)}`, { credentials: "same-origin" }),
    fetch("/api/v1/metrics", { credentials: "same-origin" }),
  ]);
  if (!series.ok || !counters.ok) return;
  data = await series.json();
  totals = await counters.json();
  draw();
}

/** A time as the window shows it: the hour for a day or less, the date beyond. */
function when(ms) {
  const d = new Date(ms);
  const long = data && data.bucket_seconds >= 3600;
  return long
    ? d.toLocaleDateString(undefined, { month: "short", day: "numeric" }) +
      (data.bucket_seconds < 86400 ? ` ${d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" })}` : "")
    : d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
}

function seconds(s) {
  return s < 60 ? `${s}s` : s < 3600 ? `${s / 60}m` : `${s / 3600}h`;
}

function draw() {
  if (!data) return;
  const b = data.buckets;
  const sum = (f) => b.reduce((a, x) => a + f(x), 0);
  const asked = sum((x) => x.asked);
  const answered = sum((x) => x.answered);
  const timedOut = sum((x) => x.timed_out);
  // The median time to answer, as the bin it falls in.
  const bins = data.time_to_answer;
  const count = bins.reduce((a, x) => a + x.count, 0);
  let seen = 0;
  const median = bins.find((x) => (seen += x.count) * 2 >= count && count > 0);
  const tiles = [
    ["Waiting now", String(data.pending)],
    ["Asked", String(asked)],
    ["Answered", String(answered)],
    ["Timed out", String(timedOut)],
    ["Median answer", median ? (median.under_seconds ? `< ${seconds(median.under_seconds)}` : "> 1h") : "–"],
    ["Mean since start", totals && totals.totalResponses ? `${(totals.avgResponseTimeMs / 1000).toFixed(1)}s` : "–"],
  ];
  $("m-tiles").replaceChildren(...tiles.map(([k, v]) =>
    el("div", { class: "tile" }, el("span", { class: "value", text: v }), el("span", { class: "key", text: k }))));

  const width = Math.max(240, $("m-charts").clientWidth - 2);
  const starts = b.map((x) => Date.parse(x.start));
  const stepMs = data.bucket_seconds * 1000;
  const figure = (title, chart, legend) => el("figure", { class: "figure" },
    el("figcaption", { text: title }), chart,
    legend ? el("p", { class: "legend" }, ...legend.map(([cls, name]) =>
      el("span", { class: "key" }, el("span", { class: `swatch ${cls}` }), text(name)))) : null);
  $("m-charts").replaceChildren(
    figure("Asked and answered", timeChart({
      width, starts, stepMs, format: when,
      label: `Over the last ${data.window}: ${asked} asked, ${answered} answered, ${timedOut} timed out`,
      series: [
        { name: "asked", values: b.map((x) => x.asked), cls: "s-asked", kind: "bars" },
        { name: "answered", values: b.map((x) => x.answered), cls: "s-answered", kind: "bars" },
        { name: "timed out", values: b.map((x) => x.timed_out), cls: "s-timeout", kind: "bars" },
      ],
    }), [["s-asked", "asked"], ["s-answered", "answered"], ["s-timeout", "timed out"]]),
    figure("Waiting", timeChart({
      width, height: 140, starts, stepMs, format: when,
      label: `Requests waiting over the last ${data.window}, ${data.pending} now`,
      series: [{ name: "waiting", values: b.map((x) => x.depth), cls: "s-depth", kind: "step" }],
    })),
    figure("Time to answer", barChart({
      width, unit: "answered",
      labels: bins.map((x, i) => x.under_seconds ? `<${seconds(x.under_seconds)}` : `≥${seconds(bins[i - 1].under_seconds)}`),
      values: bins.map((x) => x.count), cls: "s-answered",
      label: `Time to answer over the last ${data.window}: ${count} answered` +
        (median ? `, half of them in ${median.under_seconds ? `under ${seconds(median.under_seconds)}` : "over an hour"}` : ""),
    })),
    figure("By agent", data.agents.length ? stackedBars({
      width,
      label: `Requests by agent over the last ${data.window}: ` +
        data.agents.map((a) => `${a.agent} ${a.asked}`).join(", "),
      rows: data.agents.map((a) => ({
        name: a.agent,
        parts: [
          { value: a.answered, cls: "s-answered", name: "answered" },
          { value: a.timed_out, cls: "s-timeout", name: "timed out" },
          { value: a.pending, cls: "s-depth", name: "waiting" },
          { value: a.asked - a.answered - a.timed_out - a.pending, cls: "s-other", name: "ended otherwise" },
        ],
      })),
    }) : el("p", { class: "empty", text: "Nobody asked in this window." }),
    [["s-answered", "answered"], ["s-timeout", "timed out"], ["s-depth", "waiting"], ["s-other", "ended otherwise"]]),
  );
}

$("m-window").addEventListener("change", load);

let width = 0;
new ResizeObserver(() => {
  const w = $("m-charts").clientWidth;
  if (open && w && w !== width) {
    width = w;
    draw();
  }
}).observe($("m-charts"));
