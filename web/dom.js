// Building the page: elements from text, never from markup.

/** The element with this id. */
export const $ = (id) => document.getElementById(id);

// Characters that would hide or reorder what a person reads: C0 and C1 controls and
// DEL (tab and newline kept), bidi overrides, isolates and marks (U+061C, U+200E/F,
// U+202A–E, U+2066–9), line and paragraph separators (U+2028/9). Shown as visible
// escapes, as the terminal does (src/protocol/text.rs).
const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** Agent text made safe to show: hidden and reordering characters as `\u{…}`. */
export function visible(s) {
  return String(s ?? "").replace(HIDDEN, (c) => `\\u{${c.codePointAt(0).toString(16)}}`);
}

/** A text node of agent text, made visible. */
export function text(s) {
  return document.createTextNode(visible(s));
}

/** An element with attributes (`class`, `text`, `on…` listeners, the rest as they are) and children. */
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = visible(v);
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c) e.append(c);
  return e;
}

/** The first line of a text, cut to 80 characters. */
export function firstLine(s) {
  const line = (s || "").split("\n")[0];
  return line.length > 80 ? line.slice(0, 79) + "…" : line;
}

/** An SVG element with attributes, and text. */
export function svg(tag, attrs = {}, text) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = visible(text);
  return e;
}
