// Markdown (an agent's plan) as elements, built from text nodes: nothing in it runs.

import { el, text } from "/ui/dom.js";

/** Markdown (a plan) as elements: headings, lists, code blocks, paragraphs, with
 * `code` and **bold** inline. Built from text nodes: nothing in it can run. */
export function markdown(text) {
  const root = el("div", { class: "markdown" });
  const lines = text.replace(/\r\n/g, "\n").split("\n");
  let list = null;
  let para = [];
  const flush = () => {
    if (para.length) root.append(inline(el("p"), para.join(" ")));
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i];
    if (l.startsWith("```")) {
      flush();
      list = null;
      const code = [];
      while (++i < lines.length && !lines[i].startsWith("```")) code.push(lines[i]);
      root.append(el("pre", { class: "code", text: code.join("\n") }));
      continue;
    }
    const h = /^(#{1,6})\s+(.*)$/.exec(l);
    const item = /^\s*(?:[-*+]|(\d+)[.)])\s+(.*)$/.exec(l);
    if (h) {
      flush();
      list = null;
      root.append(inline(el(`h${Math.min(6, h[1].length + 2)}`), h[2]));
    } else if (item) {
      flush();
      const tag = item[1] ? "ol" : "ul";
      if (!list || list.tagName.toLowerCase() !== tag) {
        list = el(tag);
        root.append(list);
      }
      list.append(inline(el("li"), item[2]));
    } else if (!l.trim()) {
      flush();
      list = null;
    } else {
      list = null;
      para.push(l.trim());
    }
  }
  flush();
  return root;
}

/** `code` and **bold** inside a line, as elements around text nodes. */
function inline(into, line) {
  for (const part of line.split(/(`[^`]+`|\*\*[^*]+\*\*)/)) {
    if (part.startsWith("`") && part.endsWith("`") && part.length > 1) {
      into.append(el("code", { text: part.slice(1, -1) }));
    } else if (part.startsWith("**") && part.endsWith("**") && part.length > 3) {
      into.append(el("strong", { text: part.slice(2, -2) }));
    } else if (part) {
      into.append(text(part));
    }
  }
  return into;
}
