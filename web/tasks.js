// The Tasks view: the task sessions the listener runs (seed 002), each with its
// queue and its tasks' states, a task's result (its summary read, its artifacts,
// what it cost) on demand, and cancel and retry. Read from /api/v1/task-sessions and
// /api/v1/tasks; read again when the activity feed says a task changed (its
// `Task…` events), while the view is open.

import { $, el, firstLine } from "/ui/dom.js";

let open = false;
let due = null;
const shownResults = new Set(); // task ids whose result is open

/** Shows or hides the view; shown, it is read afresh. */
export function showTasks(shown) {
  open = shown;
  if (shown) load();
}

/** A task changed: read again, at most twice a second, while the view is open. */
export function tasksChanged() {
  if (open && !due) due = setTimeout(() => { due = null; load(); }, 500);
}

async function load() {
  const [sessions, tasks] = await Promise.all([
    fetch("/api/v1/task-sessions", { credentials: "same-origin" }),
    fetch("/api/v1/tasks", { credentials: "same-origin" }),
  ]);
  const list = $("task-sessions");
  if (sessions.status === 503) {
    list.replaceChildren();
    $("no-tasks").textContent = "This server runs no tasks: they run under `hitl listen` in a project.";
    $("no-tasks").hidden = false;
    return;
  }
  if (!sessions.ok || !tasks.ok) return;
  draw(await sessions.json(), await tasks.json());
}

function draw(sessions, tasks) {
  const list = $("task-sessions");
  list.replaceChildren();
  $("no-tasks").textContent = "No task sessions. Start one with `hitl task session NAME --workspace DIR`.";
  $("no-tasks").hidden = sessions.length > 0;
  for (const s of sessions) {
    const mine = tasks.filter((t) => t.session === s.name);
    // Waiting ones in the order they will run, then the rest, newest first.
    const waiting = mine.filter((t) => t.state === "submitted").sort((a, b) => a.position - b.position);
    const rest = mine.filter((t) => t.state !== "submitted").reverse();
    const state = !s.alive ? "gone" : s.is_executing ? "working" : "idle";
    const rows = [...waiting, ...rest].map(row);
    list.append(el("section", { class: "task-session", "data-session": s.name },
      el("h3", {},
        el("span", { text: s.name }),
        el("span", { class: `status status-${state}`, text: state }),
        el("span", { class: "muted", text: `${s.queued_tasks} queued · ${s.command.join(" ")} in ${s.workspace}` })),
      rows.length
        ? el("table", {},
          el("thead", {}, el("tr", {},
            ...["Task", "State", "Priority", "Outcome", "Instruction", ""].map((h) => el("th", { scope: "col", text: h })))),
          el("tbody", {}, ...rows))
        : el("p", { class: "empty", text: "No tasks yet." })));
  }
}

const FINAL = new Set(["completed", "failed", "canceled", "rejected", "auth-required"]);

function row(t) {
  const actions = el("td", { class: "task-actions" });
  if (FINAL.has(t.state)) {
    actions.append(el("button", { type: "button", class: "retry", text: "Retry", onclick: () => act(t, "retry") }));
    if (t.state === "completed") {
      actions.append(el("button", {
        type: "button", class: "result", "aria-expanded": String(shownResults.has(t.id)), text: "Result",
        onclick: () => toggleResult(t.id),
      }));
    }
  } else {
    actions.append(el("button", { type: "button", class: "cancel", text: "Cancel", onclick: () => act(t, "cancel") }));
  }
  actions.append(el("span", { class: "error", role: "alert" }));
  const state = t.position ? `${t.state} (${t.position})` : t.state;
  const tr = el("tr", { class: "task", "data-task": t.id, "data-state": t.state },
    el("td", { class: "task-id", title: t.id, text: t.id.slice(0, 18) + "…" }),
    el("td", { class: `task-state state-${t.state}`, text: state, title: t.reason || "" }),
    el("td", { text: t.priority }),
    el("td", { text: t.outcome || "" }),
    el("td", { class: "what", text: firstLine(t.instruction), title: t.reason || "" }),
    actions);
  if (!shownResults.has(t.id)) return tr;
  const detail = el("tr", { class: "task-result" }, el("td", { colspan: "6", text: "Reading the result…" }));
  showResult(t.id, detail.firstChild);
  const body = document.createDocumentFragment();
  body.append(tr, detail);
  return body;
}

function toggleResult(id) {
  if (shownResults.has(id)) shownResults.delete(id);
  else shownResults.add(id);
  load();
}

async function showResult(id, cell) {
  const res = await fetch(`/api/v1/tasks/${encodeURIComponent(id)}/result`, { credentials: "same-origin" });
  if (!res.ok) {
    cell.textContent = `No result (${res.status}).`;
    return;
  }
  const r = await res.json();
  const s = r.summary || {};
  const parts = [];
  if (s.objective) parts.push(el("p", {}, el("strong", { text: "Objective: " }), el("span", { text: s.objective })));
  if (s.accomplishments?.length) {
    parts.push(el("ul", {}, ...s.accomplishments.map((a) => el("li", { text: a }))));
  }
  const tests = s.tests || {};
  parts.push(el("p", { class: "task-tests", text:
    `Tests: ${tests.verdict || "unknown"}${tests.passed ? `, ${tests.passed} passed` : ""}${tests.failed ? `, ${tests.failed} failed` : ""}` }));
  parts.push(el("p", {}, el("strong", { text: "Artifacts" })));
  parts.push(el("ul", { class: "artifacts" },
    ...(r.artifacts || []).map((a) => el("li", { class: "artifact" },
      el("code", { text: a.path }), el("span", { class: "muted", text: ` ${a.bytes} bytes` }))),
    ...(r.left_out || []).map((l) => el("li", { class: "left-out" },
      el("code", { text: l.path }), el("span", { class: "muted", text: ` left out: ${l.reason}` })))));
  const u = r.usage;
  if (u || r.duration_secs != null) {
    const cost = u?.cost_usd != null ? `, $${u.cost_usd.toFixed(4)}` : "";
    const took = r.duration_secs != null ? `${r.duration_secs.toFixed(1)} s` : "";
    const used = u ? `${u.turns} turns, ${u.input_tokens + (u.cache_read_input_tokens || 0) + (u.cache_creation_input_tokens || 0)} in / ${u.output_tokens} out tokens${cost}` : "";
    parts.push(el("p", { class: "task-usage muted", text: [took, used].filter(Boolean).join(" · ") }));
  }
  cell.replaceChildren(...parts);
}

async function act(t, what) {
  const row = document.querySelector(`tr[data-task="${CSS.escape(t.id)}"]`);
  const error = row?.querySelector(".error");
  if (error) error.textContent = "";
  for (const b of row?.querySelectorAll("button") || []) b.disabled = true;
  try {
    const res = await fetch(`/api/v1/tasks/${encodeURIComponent(t.id)}/${what}`, {
      method: "POST",
      credentials: "same-origin",
    });
    if (res.ok) {
      load();
      return;
    }
    const why = await res.json().catch(() => ({}));
    if (error) error.textContent = why.error || `refused (${res.status})`;
  } catch (e) {
    if (error) error.textContent = `not sent: ${e}`;
  }
  for (const b of row?.querySelectorAll("button") || []) b.disabled = false;
}
