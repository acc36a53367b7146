// DOM helpers: find, build, and change a text or an attribute only when it
// differs, so a redraw every tick touches nothing that stayed the same.

export const $ = (sel, root = document) => root.querySelector(sel);

// el builds an element. attrs: "class", "text" (textContent), anything
// else becomes an attribute. Children are nodes or strings (text).
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = String(v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

export function setText(node, text) {
  text = String(text);
  if (node.textContent !== text) node.textContent = text;
}

export function setAttr(node, name, value) {
  value = String(value);
  if (node.getAttribute(name) !== value) node.setAttribute(name, value);
}
