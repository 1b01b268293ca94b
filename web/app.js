// The hitl dashboard: one live inbox of every pending request, answered here.
//
// It follows /api/v1/stream (a snapshot of the queue, then every change) and answers
// through the native API; the login cookie goes with both. Everything an agent wrote
// is put on the page as text (textContent), never as markup.

import { $, el, firstLine, text } from "/ui/dom.js";
import { showMetrics, metricsChanged } from "/ui/metrics.js";
import { showTasks, tasksChanged } from "/ui/tasks.js";
import { widget } from "/ui/answer.js";
import { diff_of } from "/ui/diff.js";
import { markdown } from "/ui/markdown.js";
import { startPush } from "/ui/push.js";

// The messages /api/v1/stream sends (src/server/stream.rs), as this page reads them.
/**
 * @typedef {object} Pending  a pending request (src/broker/mod.rs, PendingRequest)
 * @property {object} request  the request itself (docs/PROTOCOL.md, "A question")
 * @property {string} origin  who asked: spool, http, hook, mcp… (src/protocol/origin.rs)
 * @property {object} answer_shape  how it is answered (src/protocol/kind.rs, AnswerShape)
 * @property {string[]} labels  what to show beside the question (src/protocol/request.rs, labels)
 * @property {string} [project]  a spool question's project folder
 * @property {string} [kept_until]  its asker was stopped; kept until then (RFC 3339)
 *
 * @typedef {{type: "snapshot", pending: Pending[], more: number}} Snapshot
 * @typedef {{type: "queued"|"updated", request: Pending}} Queued
 * @typedef {{type: "finished", id: string, origin: string, status: string,
 *            responded_by: ?string, answer: ?object, reason: ?string}} Finished
 * @typedef {{type: "activity", event: object}} Activity
 * @typedef {{type: "lagged", missed: number}} Lagged
 * @typedef {Snapshot|Queued|Finished|Activity|Lagged} StreamMessage
 */

// An installable app (manifest.webmanifest) needs a service worker: sw.js, which
// caches nothing. Where the browser has none (plain http to another host), the page
// works as it is.
if ("serviceWorker" in navigator) navigator.serviceWorker.register("/sw.js").catch(() => {});

const PRIORITY = { urgent: 0, high: 1, normal: 2 };

const pending = new Map(); // request id -> pending request (as the stream gives it)
let more = 0; // requests waiting beyond the snapshot (see src/server/stream.rs)
let socket = null;
let retry = 500;

async function start() {
  // The login link's token (or spent one-time code) is in a cookie now: not in the
  // address bar, nor history.
  const query = new URLSearchParams(location.search);
  if (query.has("token") || query.has("code")) {
    history.replaceState(null, "", "/");
  }
  const probe = await fetch("/api/v1/requests?limit=1", { credentials: "same-origin" });
  if (probe.status === 401 || probe.status === 403) {
    $("login").hidden = false;
    setLink("");
    return;
  }
  $("tabs").hidden = false;
  show("inbox");
  startPush();
  connect();
  loadEvents();
  loadAgents();
}

// --- views ----------------------------------------------------------------------

let view = "inbox";

function show(name) {
  view = name;
  for (const v of ["inbox", "agents", "tasks", "activity", "history", "metrics"]) $(v).hidden = v !== name;
  $("ended-section").hidden = name !== "inbox" || !$("ended").children.length;
  for (const t of document.querySelectorAll(".tab")) {
    t.setAttribute("aria-pressed", String(t.dataset.view === name));
  }
  if (name === "agents") loadAgents();
  showMetrics(name === "metrics");
  showTasks(name === "tasks");
  if (name === "history" && !$("history-rows").children.length) loadHistory(false);
}

// --- history --------------------------------------------------------------------
// Paged from the server (50 at a time, older on demand): never the whole table.

const PAGE = 50;
let oldest = null;

async function loadHistory(more) {
  const q = new URLSearchParams({ status: $("h-status").value, limit: String(PAGE) });
  const text = $("h-text").value.trim();
  if (text) q.set("q", text);
  const agent = $("h-agent").value.trim();
  if (agent) q.set("agent", agent);
  if (more && oldest) q.set("before", oldest);
  const res = await fetch(`/api/v1/requests?${q}`, { credentials: "same-origin" });
  if (!res.ok) return;
  const rows = await res.json();
  if (!more) $("history-rows").replaceChildren();
  for (const h of rows) {
    $("history-rows").append(el("li", { class: "event history-row", "data-id": h.id },
      el("span", { class: "type", text: h.status }),
      el("span", { class: "agent", text: h.agent_name }),
      ...(h.labels || []).map((label) => el("span", { class: "label", text: label })),
      el("span", { class: "what", text: `${firstLine(h.content)}${h.answer ? ` → ${firstLine(h.answer)}` : ""}` }),
      el("span", { class: "by", text: h.responded_by || "" }),
      el("time", { datetime: h.asked_at, text: new Date(h.asked_at).toLocaleString() }),
      trailButton(h)));
  }
  if (rows.length) oldest = rows[rows.length - 1].asked_at;
  // The agents seen so far, offered as the agent filter's choices.
  const names = new Set([...$("h-agents").options].map((o) => o.value));
  for (const h of rows) {
    if (h.agent_name && !names.has(h.agent_name)) {
      names.add(h.agent_name);
      $("h-agents").append(el("option", { value: h.agent_name }));
    }
  }
  $("older").hidden = rows.length < PAGE;
}

// A request's record: each notification sent (where, to whom, delivered or why
// not) and each vote, then how it ended; fetched when asked for.
function trailButton(h) {
  const button = el("button", { type: "button", class: "trail-toggle", "aria-expanded": "false", text: "Trail" });
  button.addEventListener("click", async () => {
    const row = button.closest("li");
    const shown = row.querySelector(".trail");
    if (shown) {
      shown.remove();
      button.setAttribute("aria-expanded", "false");
      return;
    }
    const res = await fetch(`/api/v1/requests/${encodeURIComponent(h.id)}/trail`, { credentials: "same-origin" });
    const steps = res.ok ? await res.json() : [];
    const list = el("ol", { class: "trail" });
    for (const s of steps) {
      const d = s.detail || {};
      const outcome = d.delivered === true ? "delivered" : d.error ? `failed: ${d.error}` : d.outcome || "";
      // A step of the escalation ladder says which, and whom it reached.
      const parts = [s.step, s.surface, d.step, Array.isArray(d.reaches) ? `→ ${d.reaches.join(", ")}` : "",
        d.to, d.by, outcome].filter((p) => typeof p === "string" && p !== "");
      list.append(el("li", {},
        el("time", { datetime: new Date(s.at_ms).toISOString(), text: new Date(s.at_ms).toLocaleTimeString() }),
        el("span", { text: ` ${parts.join(" · ")}` })));
    }
    const comment = h.answer_detail && h.answer_detail.comment ? ` (${h.answer_detail.comment})` : "";
    const end = h.status === "pending" ? "pending"
      : `${h.status}${h.responded_by ? ` by ${h.responded_by}` : ""}${h.answer ? `: ${firstLine(h.answer)}` : ""}${comment}`;
    list.append(el("li", { class: "trail-end" },
      h.finished_at ? el("time", { datetime: h.finished_at, text: new Date(h.finished_at).toLocaleTimeString() }) : "",
      el("span", { text: ` ${end}` })));
    row.append(list);
    button.setAttribute("aria-expanded", "true");
  });
  return button;
}

$("history-search").addEventListener("submit", (e) => {
  e.preventDefault();
  oldest = null;
  loadHistory(false);
});
$("older").addEventListener("click", () => loadHistory(true));

for (const t of document.querySelectorAll(".tab")) {
  t.addEventListener("click", () => show(t.dataset.view));
}

// --- agents ---------------------------------------------------------------------

let agentsDue = null;

/** Reads the agents again, at most once a second. */
function agentsChanged() {
  if (!agentsDue) agentsDue = setTimeout(() => { agentsDue = null; loadAgents(); }, 1000);
}

async function loadAgents() {
  const res = await fetch("/api/v1/agents", { credentials: "same-origin" });
  if (!res.ok) return;
  const list = await res.json();
  const rows = $("agent-rows");
  rows.replaceChildren();
  const seen = new Set();
  for (const a of list) {
    const id = a.agent_id || a.id;
    if (seen.has(id)) continue;
    seen.add(id);
    const waiting = [...pending.values()].filter((p) => p.request.agent_id === id).length;
    rows.append(el("tr", { "data-agent": id },
      el("th", { scope: "row", text: a.name || id }),
      // A mailbox agent says its own status (planning, executing…) and its run.
      el("td", { class: `status status-${a.status}`, text: a.mailbox_status || a.status }),
      el("td", { text: String(waiting) }),
      el("td", { text: String(a.questions_asked ?? a.pending ?? 0) }),
      el("td", { text: a.last_seen ? `${age(a.last_seen)} ago` : "" }),
      el("td", { text: a.run ? `run ${a.run.split("/").pop()}` : a.project || a.origin || "" })));
  }
  $("no-agents").hidden = seen.size > 0;
}

// --- activity -------------------------------------------------------------------

const events = []; // newest first
const MAX_EVENTS = 500;

async function loadEvents() {
  const res = await fetch("/api/v1/events?limit=200", { credentials: "same-origin" });
  if (!res.ok) return;
  events.splice(0, events.length, ...(await res.json()));
  renderEvents();
  refreshRecent();
}

function onActivity(e) {
  if (e.hook_event_type?.startsWith("Task")) tasksChanged();
  events.unshift(e);
  events.length = Math.min(events.length, MAX_EVENTS);
  renderEvents();
  refreshRecent();
  agentsChanged();
}

function renderEvents() {
  const pick = { app: $("f-app").value, session: $("f-session").value, type: $("f-type").value };
  for (const [key, field] of [["app", "source_app"], ["session", "session_id"], ["type", "hook_event_type"]]) {
    const select = $(`f-${key}`);
    const have = new Set([...select.options].map((o) => o.value));
    for (const e of events) {
      const v = e[field];
      if (v && !have.has(v)) {
        select.append(el("option", { value: v, text: v }));
        have.add(v);
      }
    }
  }
  const list = $("events");
  list.replaceChildren();
  for (const e of events) {
    if ((pick.app && e.source_app !== pick.app) || (pick.session && e.session_id !== pick.session) ||
        (pick.type && e.hook_event_type !== pick.type)) continue;
    list.append(el("li", { class: "event", "data-type": e.hook_event_type },
      el("span", { class: "type", text: e.hook_event_type }),
      el("span", { class: "agent", text: e.agent_name || e.source_app }),
      el("span", { class: "what", text: describe(e) }),
      e.decision ? el("span", { class: `decision decision-${e.decision}`, text: e.decision }) : null,
      el("time", { text: new Date(e.timestamp).toLocaleTimeString() })));
    if (list.children.length >= 200) break;
  }
}

for (const id of ["f-app", "f-session", "f-type"]) $(id).addEventListener("change", renderEvents);

/** What an event says happened, in one line. */
function describe(e) {
  const p = e.payload || {};
  const what = p.tool_name ? `${p.tool_name} ${p.tool_input?.command ?? p.tool_input?.file_path ?? ""}`
    : p.message ?? p.prompt ?? (e.humanInTheLoop ? e.humanInTheLoop.question : "") ?? "";
  return firstLine(String(what || e.hook_event_type)).trim();
}

/** The events of the agent that made request `r`, newest first: the same agent,
 * or the same session; the same event again and again is one, with how many times. */
function recentOf(r, n) {
  const session = r.context?.session_id ?? r.metadata?.session_id;
  const out = [];
  for (const e of events) {
    if (e.humanInTheLoop || e.decision === "asked") continue; // the asking itself is the card
    if ((e.agent_id && e.agent_id === r.agent_id) || (session && e.session_id === session)) {
      const last = out[out.length - 1];
      if (last && last.event.hook_event_type === e.hook_event_type && describe(last.event) === describe(e)) {
        last.times += 1;
        continue;
      }
      if (out.length >= n) break;
      out.push({ event: e, times: 1 });
    }
  }
  return out;
}

/** Each card's agent's last few events, again. */
function refreshRecent() {
  for (const card of document.querySelectorAll("#requests .card")) {
    const p = pending.get(card.dataset.id);
    if (p) showRecent(card, p.request);
  }
}

/** Puts the asking agent's last few events on its card (or nothing, if it has none). */
function showRecent(card, r) {
  const recent = recentOf(r, 3);
  const list = card.querySelector(".recent");
  if (!recent.length) {
    list.hidden = true;
    return;
  }
  list.hidden = false;
  list.replaceChildren(el("span", { class: "label", text: "Lately:" }), ...recent.map(({ event: e, times }) =>
    el("span", { class: "recent-event", "data-type": e.hook_event_type },
      text(times > 1 ? `${describe(e)} (×${times})` : describe(e)),
      el("time", { datetime: new Date(e.timestamp).toISOString(), text: ` ${age(e.timestamp)} ago` }))));
}

function setLink(text) {
  $("link").textContent = text;
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  // attend=dashboard: while this page is connected a human counts as present, so
  // hooks wait for answers here instead of leaving calls to Claude Code.
  socket = new WebSocket(`${scheme}://${location.host}/api/v1/stream?attend=dashboard`);
  socket.addEventListener("open", () => {
    retry = 500;
    setLink("live");
  });
  socket.addEventListener("message", (m) => onChange(JSON.parse(m.data)));
  socket.addEventListener("close", () => {
    // Reconnect, and the next snapshot puts the page right without a reload.
    setLink("reconnecting…");
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 5000);
  });
}

/** Takes one message of the stream into the page. @param {StreamMessage} msg */
function onChange(msg) {
  switch (msg.type) {
    case "snapshot":
      pending.clear();
      for (const p of msg.pending) pending.set(p.request.id, p);
      // A snapshot holds the first requests only when very many wait.
      more = msg.more || 0;
      render();
      break;
    case "queued":
      pending.set(msg.request.request.id, msg.request);
      render();
      chime();
      notify(msg.request);
      agentsChanged();
      metricsChanged();
      break;
    case "updated": {
      // Its asker was stopped and it is kept, or its agent asked again.
      pending.set(msg.request.request.id, msg.request);
      const card = [...$("requests").children].find((c) => c.dataset.id === msg.request.request.id);
      if (card) showKept(card, msg.request);
      render();
      break;
    }
    case "activity":
      onActivity(msg.event);
      break;
    case "finished": {
      const p = pending.get(msg.id);
      if (p) {
        pending.delete(msg.id);
        ended(p, msg);
        render();
        metricsChanged();
      }
      break;
    }
  }
}

/** Notes why a request left the inbox. */
function ended(p, msg) {
  const by = msg.responded_by ? ` by ${msg.responded_by}` : "";
  const why = msg.reason ? ` (${msg.reason})` : "";
  const li = el("li", { class: "ended-item", "data-id": p.request.id },
    el("span", { class: "agent", text: p.request.agent_name }),
    el("span", { text: ` ${firstLine(p.request.content)}: ${msg.status}${by}${why}` }));
  $("ended").prepend(li);
  while ($("ended").children.length > 20) $("ended").lastChild.remove();
  $("ended-section").hidden = view !== "inbox";
  agentsChanged();
}

function ordered() {
  return [...pending.values()].sort((a, b) =>
    (PRIORITY[a.request.priority] ?? 2) - (PRIORITY[b.request.priority] ?? 2) ||
    a.request.timestamp.localeCompare(b.request.timestamp));
}

/** Where a request comes from, for the project filter. */
function projectOf(p) {
  return p.project || p.request.working_dir || "";
}

/** Keeps each inbox filter's choices to what is pending (and what is chosen). */
function refreshFilters() {
  for (const [id, of] of [["i-agent", (p) => p.request.agent_name], ["i-project", projectOf],
                          ["i-type", (p) => p.request.type]]) {
    const select = $(id);
    const values = new Set([...pending.values()].map(of).filter(Boolean));
    if (select.value) values.add(select.value);
    const have = [...select.options].slice(1).map((o) => o.value);
    if (have.join("\n") === [...values].sort().join("\n")) continue;
    const chosen = select.value;
    select.replaceChildren(el("option", { value: "", text: "all" }),
      ...[...values].sort().map((v) => el("option", { value: v, text: v })));
    select.value = chosen;
  }
}

function shown(p) {
  return (!$("i-agent").value || p.request.agent_name === $("i-agent").value) &&
    (!$("i-project").value || projectOf(p) === $("i-project").value) &&
    (!$("i-type").value || p.request.type === $("i-type").value);
}

for (const id of ["i-agent", "i-project", "i-type"]) $(id).addEventListener("change", () => render());

function render() {
  refreshFilters();
  const list = $("requests");
  const keep = new Set([...pending.values()].filter(shown).map((p) => p.request.id));
  // Cards being answered keep their inputs: only new ones are built.
  for (const card of [...list.children]) {
    if (!keep.has(card.dataset.id)) card.remove();
  }
  const have = new Map([...list.children].map((c) => [c.dataset.id, c]));
  for (const p of ordered().filter(shown)) {
    const card = have.get(p.request.id) || card_for(p);
    list.append(card); // in order
  }
  const n = pending.size;
  $("empty").hidden = n > 0;
  const hiddenByFilter = n - keep.size;
  $("count").title = hiddenByFilter ? `${hiddenByFilter} hidden by the filters` : "";
  $("count").textContent = n ? `${n}${more ? ` (+${more} not shown: reload after answering)` : ""} waiting` : "";
  document.title = n ? `(${n}) hitl` : "hitl";
  icon(n);
  focusLinked();
}

window.addEventListener("hashchange", () => focusLinked());

/** A link to one request (`#request=ID`, as webhooks send): its card is focused
 * once it is in the inbox. */
function focusLinked() {
  const m = location.hash.match(/^#request=([A-Za-z0-9._-]+)$/);
  if (!m) return;
  const card = [...document.querySelectorAll("#requests .card")].find((c) => c.dataset.id === m[1]);
  if (!card) return;
  history.replaceState(null, "", location.pathname + location.search);
  card.scrollIntoView({ block: "center" });
  card.focus();
}

function card_for(p) {
  const r = p.request;
  const card = el("li", { class: `card priority-${r.priority}`, "data-id": r.id, "data-type": r.type, tabindex: "0" });
  // Another OS user of this machine made it: said first, in words, whatever agent
  // it names (src/protocol/request.rs, created_by).
  const other = r.created_by && r.created_by !== "user" ? r.created_by : null;
  if (other) {
    card.classList.add("other-user");
    card.append(el("p", { class: "other-user-warning", role: "note",
      text: `Asked by another user of this machine (${other}), not by one of your agents` }));
  }
  card.append(el("div", { class: "meta" },
    el("span", { class: "agent", text: r.agent_name }),
    el("span", { class: "origin", text: p.origin }),
    el("span", { class: "kind", text: r.type }),
    ...(p.labels || []).map((label) => el("span", { class: "label", text: label })),
    el("time", { datetime: r.timestamp, text: age(r.timestamp) })));
  card.append(el("p", { class: "kept-note", role: "note" }));
  showKept(card, p);
  card.append(el("p", { class: "recent", "aria-label": `What ${r.agent_name} did lately` }));
  showRecent(card, r);
  const tool = r.context && typeof r.context === "object" ? r.context : {};
  const input = tool.tool_input || {};
  if (tool.tool_name === "ExitPlanMode" && typeof input.plan === "string") {
    // The plan is what is approved: shown as the Markdown it is.
    card.append(el("p", { class: "content", text: r.content.split("\n\n")[0] }));
    card.append(markdown(input.plan));
  } else {
    card.append(el("p", { class: "content", text: r.content }));
    const change = diff_of(tool.tool_name, input);
    if (change) card.append(change);
    else {
      const ctx = context_of(r);
      if (ctx) card.append(el("pre", { class: "context", text: ctx }));
    }
  }
  card.append(widget(r, p.answer_shape));
  card.append(el("p", { class: "error", role: "alert" }));
  return card;
}

/** Says on a card whether its asker was stopped and it is kept for its next ask. */
function showKept(card, p) {
  const note = card.querySelector(".kept-note");
  if (!note) return;
  note.hidden = !p.kept_until;
  note.textContent = p.kept_until
    ? `Asker gone, kept for when it asks again (until ${new Date(p.kept_until).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })})`
    : "";
}

/** What a request's context says, for people: a tool call's command or file; the
 * asker's own context (`hitl ask --context`) as its fields, one per line, as the TUI
 * shows them; anything else as its JSON. Cut to size: the card is not a viewer. */
function context_of(r) {
  const c = r.context;
  if (c === undefined || c === null) return "";
  const cut = (s, n) => (s.length > n ? `${s.slice(0, n)}…` : s);
  if (typeof c !== "object") return cut(typeof c === "string" ? c : JSON.stringify(c), 400);
  if (Array.isArray(c)) return cut(JSON.stringify(c), 400);
  if (c.tool_name) {
    const input = c.tool_input || {};
    if (input.command) return `$ ${input.command}`;
    if (input.file_path) return input.file_path;
    return "";
  }
  return Object.entries(c).slice(0, 8)
    .map(([k, v]) => `${cut(k, 30)}: ${cut(typeof v === "string" ? v : JSON.stringify(v), 300)}`)
    .join("\n");
}

/** How long ago `ts` (RFC 3339, or ms since 1970) was, shortly. */
function age(ts) {
  const at = typeof ts === "number" ? ts : Date.parse(ts);
  const s = Math.max(0, Math.round((Date.now() - at) / 1000));
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m` : `${Math.floor(s / 3600)}h`;
}

setInterval(() => {
  for (const t of document.querySelectorAll(".card .meta time")) t.textContent = age(t.dateTime);
  for (const t of document.querySelectorAll(".card .recent time")) t.textContent = ` ${age(t.dateTime)} ago`;
}, 1000);

// --- keyboard -------------------------------------------------------------------
// j/k or the arrows move between requests; Enter goes into the focused one's
// answer; a/d approve or deny it, y/n answer yes or no, 1-9 pick an option; Esc
// goes back to the card; ? shows the keys. Typing in a field is never taken.

const cards = () => [...document.querySelectorAll("#requests .card")];

function move(by) {
  const all = cards();
  if (!all.length) return;
  const at = all.indexOf(document.activeElement.closest?.(".card"));
  const next = all[Math.max(0, Math.min(all.length - 1, at < 0 ? 0 : at + by))];
  next.focus();
}

function typing(e) {
  const t = e.target;
  return t.matches?.("input, textarea, select") && t.type !== "checkbox" && t.type !== "radio";
}

document.addEventListener("keydown", (e) => {
  if (e.key === "Escape") {
    $("help").hidden = true;
    const card = document.activeElement.closest?.(".card");
    if (card) card.focus();
    return;
  }
  if (typing(e) || e.ctrlKey || e.metaKey || e.altKey) return;
  const card = document.activeElement.closest?.(".card");
  const press = (css) => {
    const b = card?.querySelector(css);
    if (b) {
      e.preventDefault();
      b.click();
    }
  };
  switch (e.key) {
    case "j": case "ArrowDown": e.preventDefault(); move(1); break;
    case "k": case "ArrowUp": e.preventDefault(); move(-1); break;
    case "?": $("help").hidden = !$("help").hidden; break;
    case "a": press("button.approve"); break;
    case "d": press("button.deny"); break;
    case "y": press("button.yes"); break;
    case "n": press("button.no"); break;
    case "Enter":
      if (card && document.activeElement === card) {
        e.preventDefault();
        card.querySelector("textarea, input, button")?.focus();
      }
      break;
    default:
      if (/^[1-9]$/.test(e.key)) press(`button.option:nth-of-type(${e.key})`);
  }
});

// --- attention ------------------------------------------------------------------
// A new request: a short tone (unless muted), a notification while the tab is
// hidden, the count in the title and the icon.

let muted = localStorage.getItem("hitl.muted") === "1";
let audio = null;

function showMute() {
  $("mute").textContent = muted ? "Sound off" : "Sound on";
  $("mute").setAttribute("aria-pressed", String(muted));
}

$("mute").addEventListener("click", () => {
  muted = !muted;
  localStorage.setItem("hitl.muted", muted ? "1" : "0");
  showMute();
});
showMute();
$("keys").addEventListener("click", () => { $("help").hidden = !$("help").hidden; });

function chime() {
  if (muted) return;
  try {
    audio ||= new AudioContext();
    const osc = audio.createOscillator();
    const gain = audio.createGain();
    osc.frequency.value = 880;
    gain.gain.setValueAtTime(0.15, audio.currentTime);
    gain.gain.exponentialRampToValueAtTime(0.001, audio.currentTime + 0.25);
    osc.connect(gain).connect(audio.destination);
    osc.start();
    osc.stop(audio.currentTime + 0.25);
  } catch (_) {
    // No audio here (or not yet allowed): the title and the icon still say it.
  }
}

function notify(p) {
  if (!document.hidden || !("Notification" in window)) return;
  if (Notification.permission === "granted") {
    new Notification(`${p.request.agent_name} asks`, { body: firstLine(p.request.content), tag: p.request.id });
  }
}

document.addEventListener("click", () => {
  if ("Notification" in window && Notification.permission === "default") Notification.requestPermission();
}, { once: true });

function icon(n) {
  const c = document.createElement("canvas");
  c.width = c.height = 32;
  const g = c.getContext("2d");
  g.fillStyle = n ? "#b42318" : "#0b5fff";
  g.beginPath();
  g.arc(16, 16, 15, 0, 2 * Math.PI);
  g.fill();
  g.fillStyle = "#fff";
  g.font = "bold 18px sans-serif";
  g.textAlign = "center";
  g.textBaseline = "middle";
  g.fillText(n ? String(Math.min(n, 99)) : "h", 16, 17);
  let link = document.querySelector("link[rel=icon]");
  if (!link) {
    link = el("link", { rel: "icon" });
    document.head.append(link);
  }
  link.href = c.toDataURL("image/png");
}

start();
