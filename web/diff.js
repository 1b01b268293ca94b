// The change an edit would make, shown as a unified diff; long ones folded.

import { el } from "/ui/dom.js";

/** Diffs longer than this many lines are folded to their first lines until opened. */
const DIFF_FOLD_LINES = 30;

/** The change an Edit, MultiEdit or Write would make, as a unified diff. */
export function diff_of(tool, input) {
  let hunks;
  if (tool === "Edit" && typeof input.old_string === "string") {
    hunks = [[input.old_string, input.new_string ?? ""]];
  } else if (tool === "MultiEdit" && Array.isArray(input.edits)) {
    hunks = input.edits.map((e) => [e.old_string ?? "", e.new_string ?? ""]);
  } else if (tool === "Write" && typeof input.content === "string") {
    hunks = [["", input.content]];
  } else {
    return null;
  }
  const pre = el("pre", { class: "diff", "aria-label": "The change" });
  const line = (cls, text) => pre.append(el("span", { class: cls, text: text + "\n" }));
  line("file", `--- ${input.file_path ?? ""}`);
  line("file", `+++ ${input.file_path ?? ""}`);
  for (const [before, after] of hunks) {
    const a = before ? before.split("\n") : [];
    const b = after ? after.split("\n") : [];
    // Lines both sides share at the ends are context; the rest changed.
    let head = 0;
    while (head < a.length && head < b.length && a[head] === b[head]) head++;
    let tail = 0;
    while (tail < a.length - head && tail < b.length - head &&
           a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
    line("hunk", "@@");
    for (const l of a.slice(0, head)) line("same", ` ${l}`);
    for (const l of a.slice(head, a.length - tail)) line("del", `-${l}`);
    for (const l of b.slice(head, b.length - tail)) line("add", `+${l}`);
    for (const l of a.slice(a.length - tail)) line("same", ` ${l}`);
  }
  const lines = pre.children.length;
  if (lines <= DIFF_FOLD_LINES) return pre;
  // A long change (a whole file written) would push the answer buttons out of
  // sight: folded to a scrolling box until opened.
  pre.classList.add("folded");
  const toggle = el("button", { type: "button", class: "unfold", "aria-expanded": "false",
    text: `Show all ${lines} lines` });
  toggle.addEventListener("click", () => {
    const folded = pre.classList.toggle("folded");
    toggle.setAttribute("aria-expanded", String(!folded));
    toggle.textContent = folded ? `Show all ${lines} lines` : "Fold";
  });
  return el("div", { class: "diff-box" }, pre, toggle);
}
