// The accessibility audit run by tests/it/dashboard.rs in the browser (as the body of
// a function): returns a list of faults, empty when the page passes.
const faults = [];
const visible = (e) => {
  const r = e.getBoundingClientRect();
  const s = getComputedStyle(e);
  return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none" && !e.closest("[hidden]");
};
const describe = (e) => `${e.tagName.toLowerCase()}${e.id ? "#" + e.id : ""}${e.className && typeof e.className === "string" ? "." + e.className.split(" ").join(".") : ""}`;
for (const c of document.querySelectorAll("input, textarea, select, button")) {
  if (!visible(c)) continue;
  const named = (c.labels && c.labels.length) || c.getAttribute("aria-label") || c.getAttribute("aria-labelledby") ||
    (c.tagName === "BUTTON" && c.textContent.trim()) || c.title;
  if (!named) faults.push(`no name: ${describe(c)}`);
}
for (const e of document.querySelectorAll("[tabindex]")) {
  if (Number(e.getAttribute("tabindex")) > 0) faults.push(`tabindex > 0: ${describe(e)}`);
}
for (const e of document.querySelectorAll("svg, img, canvas")) {
  if (!visible(e) || e.closest("svg") !== e && e.tagName !== "svg" && e.closest("svg")) continue;
  if (!e.getAttribute("aria-label") && !e.getAttribute("alt") && e.getAttribute("aria-hidden") !== "true") faults.push(`no text alternative: ${describe(e)}`);
}
const rgb = (s) => { const m = s.match(/[\d.]+/g).map(Number); return { r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1 }; };
const lum = ({ r, g, b }) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
const behind = (e) => {
  for (let n = e; n; n = n.parentElement) { const c = rgb(getComputedStyle(n).backgroundColor); if (c.a > 0.5) return c; }
  return rgb(getComputedStyle(document.documentElement).backgroundColor || "rgb(255,255,255)");
};
for (const e of document.querySelectorAll("body *")) {
  if (!visible(e) || e.closest("svg")) continue;
  const text = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
  const field = e.matches("input:not([type=checkbox]):not([type=radio]), textarea, select") && (e.value || e.placeholder);
  if (!text && !field) continue;
  const s = getComputedStyle(e);
  if (s.opacity < 1 || e.disabled) continue;
  const fg = rgb(s.color), bg = behind(e);
  const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
  const ratio = (hi + 0.05) / (lo + 0.05);
  const size = parseFloat(s.fontSize), bold = Number(s.fontWeight) >= 700;
  const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
  if (ratio < need) faults.push(`contrast ${ratio.toFixed(2)} < ${need}: ${describe(e)} "${(e.textContent || e.placeholder || "").trim().slice(0, 30)}"`);
  if (field && e.placeholder && !e.value) {
    // A placeholder is text too.
    const ph = rgb(getComputedStyle(e, "::placeholder").color);
    const [h2, l2] = [lum(ph), lum(bg)].sort((a, b) => b - a);
    const r2 = (h2 + 0.05) / (l2 + 0.05);
    if (r2 < 4.5) faults.push(`placeholder contrast ${r2.toFixed(2)}: ${describe(e)}`);
  }
}
if (!document.documentElement.lang) faults.push("no lang on <html>");
return faults;
