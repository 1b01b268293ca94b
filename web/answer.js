// The controls that answer a request, drawn from the shape of its answer the server
// sends (`answer_shape`), and the posts that send the answer or dismiss it.

import { el, svg } from "/ui/dom.js";

/**
 * The answer controls for a request, drawn from the shape of its answer that the
 * server sends (`answer_shape`: how it is answered, and in which field of the
 * respond body), never from the request's type.
 * @param {object} r the request
 * @param {{input: "text"|"choice"|"decision"|"form", field: string, options?: string[],
 *          many?: boolean, always?: string, value?: object}} shape
 */
export function widget(r, shape) {
  const form = el("form", { class: "answer" });
  form.addEventListener("submit", (e) => e.preventDefault());
  const send = (body) => answer(r, form, body);
  const field = shape.field;
  switch (shape.input) {
    case "choice":
      if (shape.many) {
        const boxes = shape.options.map((o) => {
          const box = el("input", { type: "checkbox", value: o });
          form.append(el("label", { class: "check" }, box, el("span", { text: o })));
          return box;
        });
        form.append(el("button", { type: "submit", class: "send", text: "Send",
          onclick: () => send({ [field]: boxes.filter((b) => b.checked).map((b) => b.value) }) }));
      } else {
        // Yes and no have buttons of their own look; any other choice is an option.
        for (const o of shape.options) {
          const look = (o === "yes" || o === "no") && shape.options.length === 2 ? o : "option";
          const text = look === "option" ? o : o[0].toUpperCase() + o.slice(1);
          form.append(el("button", { type: "button", class: look, text, onclick: () => send({ [field]: o }) }));
        }
      }
      break;
    case "decision": {
      const comment = el("input", { type: "text", class: "comment", placeholder: "Comment (optional)", "aria-label": "Comment" });
      const decide = (ok, always) => {
        const body = { [field]: ok };
        if (comment.value.trim()) body.comment = comment.value.trim();
        if (always) body.always = true;
        send(body);
      };
      form.append(...present(comment, dictation(comment),
        el("button", { type: "button", class: "approve", text: "Approve", onclick: () => decide(true, false) }),
        el("button", { type: "button", class: "deny", text: "Deny", onclick: () => decide(false, false) })));
      if (shape.always) {
        form.append(el("button", { type: "button", class: "always", text: `Always allow ${shape.always}`,
          onclick: () => decide(true, true) }));
      }
      break;
    }
    case "form":
      questions(r, form, (answers) => send({ [field]: answers }));
      break;
    default: {
      // A number (the asker's rule) is typed in a number field; other text in a box.
      const rule = shape.value || null;
      const numeric = rule && (rule.type === "integer" || rule.type === "number");
      const text = numeric ? el("input", numberAttrs(rule, { class: "text number", "aria-label": "Your answer" }))
        : el("textarea", { class: "text", rows: "2", "aria-label": "Your answer" });
      if (rule && rule.maxLength !== undefined) text.maxLength = rule.maxLength;
      text.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && (numeric || e.ctrlKey || e.metaKey)) send({ [field]: text.value });
      });
      form.append(...present(text, numeric ? null : dictation(text), el("button", { type: "submit", class: "send",
        text: "Send", onclick: () => send({ [field]: text.value }) })));
      if (numeric) form.append(el("p", { class: "range", text: `Answer with ${rangeText(rule)}.` }));
    }
  }
  form.append(el("button", { type: "button", class: "dismiss", text: "Dismiss",
    onclick: () => cancel(r, form) }));
  return form;
}

/** The nodes given, without the absent ones (`append` would show `null` as text). */
function present(...nodes) {
  return nodes.filter((n) => n);
}

/** `attrs` for a number field under `rule` (its type, `minimum`, `maximum`); the
 * range also said in words, as the placeholder. */
function numberAttrs(rule, attrs) {
  const out = { ...attrs, type: "number", step: rule.type === "integer" ? "1" : "any",
    placeholder: rangeText(rule) };
  if (rule.minimum !== undefined) out.min = String(rule.minimum);
  if (rule.maximum !== undefined) out.max = String(rule.maximum);
  return out;
}

/** What a number rule takes, in words: "a whole number from 1 to 8". */
function rangeText(rule) {
  const what = rule.type === "integer" ? "a whole number" : "a number";
  const [min, max] = [rule.minimum, rule.maximum];
  if (min !== undefined && max !== undefined) return `${what} from ${min} to ${max}`;
  if (min !== undefined) return `${what} of ${min} or more`;
  if (max !== undefined) return `${what} of ${max} or less`;
  return what;
}

/** A form of questions (Claude Code's AskUserQuestion, an MCP elicitation). */
function questions(r, form, send) {
  const asks = (r.questions || []).map((q, i) => {
    const set = el("fieldset", { class: "question" },
      el("legend", { text: q.header ? `${q.header}: ${q.question}` : q.question }));
    const kind = q.multiSelect ? "checkbox" : "radio";
    const picks = (q.options || []).map((o) => {
      const input = el("input", { type: kind, name: `q${r.id}-${i}`, value: o.label });
      set.append(el("label", { class: "pick" }, input, el("span", { class: "label", text: o.label }),
        o.description ? el("span", { class: "description", text: o.description }) : null));
      return input;
    });
    // The asker's rule for the answer (an MCP server's field): options only, or a
    // number or text of a kind. The server refuses what does not fit, saying why.
    const rule = q.value || null;
    if (rule && rule.type === "choice") {
      form.append(set);
      return { q, picks, other: null };
    }
    const numeric = rule && (rule.type === "integer" || rule.type === "number");
    const base = { type: "text", class: "other",
      placeholder: picks.length ? "Other…" : "Your answer", "aria-label": `Other answer to: ${q.question}` };
    const attrs = numeric ? numberAttrs(rule, base) : base;
    if (rule && rule.maxLength !== undefined) attrs.maxlength = String(rule.maxLength);
    const other = el("input", attrs);
    set.append(el("span", { class: "other-row" }, other, numeric ? null : dictation(other)));
    form.append(set);
    return { q, picks, other };
  });
  form.append(el("button", { type: "submit", class: "send", text: "Send", onclick: () => {
    const answers = {};
    for (const { q, picks, other } of asks) {
      const chosen = picks.filter((p) => p.checked).map((p) => p.value);
      answers[q.question] = (other && other.value.trim()) || chosen.join(", ");
    }
    send(answers);
  } }));
}

// --- voice ----------------------------------------------------------------------
// Where the browser can recognise speech, a microphone button beside each text field
// dictates into it (what was typed stays, the words follow it); elsewhere there is no
// button at all. Read when a card is built, so a browser that gains it later has it.

/** A microphone, drawn (an emoji needs a font the machine may lack). */
function micIcon() {
  const icon = svg("svg", { viewBox: "0 0 24 24", width: 18, height: 18, "aria-hidden": "true", class: "icon" });
  icon.append(svg("rect", { x: 9, y: 3, width: 6, height: 11, rx: 3 }),
    svg("path", { d: "M5 11a7 7 0 0 0 14 0" }), svg("path", { d: "M12 18v3" }));
  return icon;
}

/** The dictation button for `field`, or nothing where the browser has no speech recognition. */
function dictation(field) {
  const Recognition = window.SpeechRecognition || window.webkitSpeechRecognition;
  if (!Recognition) return null;
  const button = el("button", { type: "button", class: "mic", "aria-pressed": "false",
    "aria-label": `Dictate: ${field.getAttribute("aria-label") || field.placeholder || "answer"}`,
    title: "Dictate" }, micIcon());
  let listening = null;
  button.addEventListener("click", () => {
    if (listening) {
      listening.stop();
      return;
    }
    const rec = new Recognition();
    rec.lang = navigator.language || "en-US";
    rec.interimResults = true;
    const before = field.value ? field.value.replace(/\s*$/, " ") : "";
    rec.addEventListener("result", (e) => {
      let words = "";
      for (const r of e.results) words += r[0].transcript;
      field.value = before + words;
      field.dispatchEvent(new Event("input", { bubbles: true }));
    });
    rec.addEventListener("error", (e) => {
      const error = button.closest(".card")?.querySelector(".error");
      if (error) error.textContent = `Dictation stopped: ${e.error || "no speech recognised"}`;
    });
    rec.addEventListener("end", () => {
      listening = null;
      button.setAttribute("aria-pressed", "false");
      field.focus();
    });
    listening = rec;
    button.setAttribute("aria-pressed", "true");
    try {
      rec.start();
    } catch (e) {
      listening = null;
      button.setAttribute("aria-pressed", "false");
    }
  });
  return button;
}

async function answer(r, form, body) {
  await post(`/api/v1/requests/${encodeURIComponent(r.id)}/respond`, form, body);
}

async function cancel(r, form) {
  await post(`/api/v1/requests/${encodeURIComponent(r.id)}/cancel`, form, { reason: "dismissed in the dashboard" });
}

async function post(path, form, body) {
  const error = form.parentElement.querySelector(".error");
  error.textContent = "";
  for (const b of form.querySelectorAll("button")) b.disabled = true;
  try {
    const res = await fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!res.ok || res.status === 202) {
      // 202: an approval counted toward one that needs another person's; it waits.
      const why = await res.json().catch(() => ({}));
      error.textContent = why.error || `refused (${res.status})`;
    }
    // On success the stream's "finished" takes the card away.
  } catch (e) {
    error.textContent = `not sent: ${e}`;
  } finally {
    for (const b of form.querySelectorAll("button")) b.disabled = false;
  }
}
