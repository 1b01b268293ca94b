// Building the page: elements from text, never from markup.

/** The element with this id. */
export const $ = (id) => document.getElementById(id);

/** An element with attributes (`class`, `text`, `on…` listeners, the rest as they are) and children. */
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
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
  if (text !== undefined) e.textContent = text;
  return e;
}
