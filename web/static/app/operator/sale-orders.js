// A sale's orders on its card, for the operator: listed a page at a time,
// filtered by status, and downloaded as CSV.

import { api, APIError, nextLink } from "../api.js";
import { el, setAttr, setText } from "../dom.js";
import { clock, money, parseTime, safeBaseURL } from "../format.js";
import { showError } from "../messages.js";
import { state } from "../state.js";
import { STATUS_COUNT_LABEL, STATUS_ORDER } from "../statuses.js";
import { workflowURL } from "../temporal-ui.js";

// saleOrdersNode is the orders section of a sale's card: the sale's
// orders a page at a time (GET /v1/sales/{id}/orders, following the Link
// header), filtered by status, and the CSV export.
export function saleOrdersNode(id) {
  const o = { id, next: "", loaded: false, seq: 0 };
  o.filter = el("select", { "aria-label": "Status of the orders listed", "data-sale-id": id, class: "orders-filter" },
    el("option", { value: "", text: "All statuses" }),
    ...STATUS_ORDER.map((st) => el("option", { value: st, text: STATUS_COUNT_LABEL[st] || st })));
  o.filter.addEventListener("change", () => loadSaleOrders(o, false));
  o.show = el("button", { type: "button", class: "secondary", "data-action": "sale-orders", "data-sale-id": id, text: "List orders" });
  o.csv = el("button", { type: "button", class: "secondary", "data-action": "export-csv", "data-sale-id": id, text: "Download CSV" });
  o.list = el("ul", { class: "sale-orders" });
  o.more = el("button", { type: "button", class: "secondary", "data-action": "more-orders", "data-sale-id": id, text: "More", hidden: true });
  o.note = el("p", { class: "muted sale-orders-note" });
  o.box = el("section", { class: "sale-orders-box", "data-sale-orders": id, "data-rows": "0" },
    el("div", { class: "sale-controls" }, o.show, o.filter, o.csv), o.list, o.more, o.note);
  return o;
}

// loadSaleOrders lists the first page (more: the next page) of a sale's
// orders under the card's filter; o is the card's orders section
// (saleOrdersNode), none once the card is gone.
export async function loadSaleOrders(o, more) {
  const ident = state.admin;
  if (!o || !ident) return;
  const id = o.id;
  let path = o.next;
  if (!more) {
    const q = new URLSearchParams({ limit: "50" });
    if (o.filter.value) q.set("status", o.filter.value);
    path = `/v1/sales/${encodeURIComponent(id)}/orders?${q}`;
    o.list.replaceChildren();
    setAttr(o.box, "data-rows", 0);
    setAttr(o.box, "data-complete", "false");
  }
  const filter = o.filter.value;
  const seq = ++o.seq; // a later load (another filter) wins over this one
  if (!path) return;
  o.more.disabled = true;
  try {
    const { data, headers } = await api("GET", path, { token: ident.token });
    if (seq !== o.seq) return;
    for (const ord of data || []) o.list.append(saleOrderRow(ord));
    o.next = nextLink(headers);
    o.loaded = true;
    const rows = o.list.children.length;
    setAttr(o.box, "data-rows", rows);
    setAttr(o.box, "data-complete", o.next ? "false" : "true");
    setAttr(o.box, "data-filter", filter);
    const unlisted = headers.get("Seckill-Unlisted-Orders");
    if (!more) setText(o.note, unlisted && unlisted !== "0" ? `${unlisted} admitted order(s) not written yet are not listed.` : "");
  } catch (e) {
    showError(e, "admin");
  } finally {
    o.more.hidden = !o.next;
    o.more.disabled = false;
  }
}

function saleOrderRow(ord) {
  const link = safeBaseURL(ord.workflow_url || "") || workflowURL(ord.id);
  const paid = ord.paid_at ? ` · paid ${clock(parseTime(ord.paid_at))}` : "";
  return el("li", { "data-order-id": ord.id, "data-status": ord.status },
    el("span", { class: "badge status", "data-status": ord.status, text: STATUS_COUNT_LABEL[ord.status] || ord.status }),
    el("span", { class: "sale-order-text", text: ` ${ord.id} · ${ord.user_id} · ${money(ord.amount_cents, ord.currency)} · admitted ${clock(parseTime(ord.admitted_at))}${paid} ` }),
    link ? el("a", { href: link, target: "_blank", rel: "noopener", class: "workflow-link", text: "workflow" }) : null);
}

// exportCSV downloads the sale's orders under the card's filter as CSV:
// fetched with the admin's token (a plain link could not send it), then
// saved from a blob.
export async function exportCSV(o, btn) {
  const ident = state.admin;
  if (!o || !ident) return;
  const id = o.id;
  const q = new URLSearchParams({ format: "csv" });
  if (o.filter.value) q.set("status", o.filter.value);
  btn.disabled = true;
  try {
    const resp = await fetch(`/v1/sales/${encodeURIComponent(id)}/orders/export?${q}`, {
      headers: { Authorization: "Bearer " + ident.token, Accept: "text/csv, application/problem+json" }, cache: "no-store",
    });
    if (!resp.ok) {
      let p = null;
      try { p = await resp.json(); } catch { p = null; }
      throw new APIError(resp.status, p, resp.headers.get("Retry-After"));
    }
    const blob = await resp.blob();
    const text = await blob.text();
    const url = URL.createObjectURL(blob);
    const a = el("a", { href: url, download: `sale-${id}-orders${o.filter.value ? "-" + o.filter.value.toLowerCase() : ""}.csv`, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    // What was saved, for the operator (and the browser test).
    setAttr(o.box, "data-export-rows", Math.max(0, text.split("\n").filter((l) => l !== "").length - 1));
  } catch (e) {
    if (e instanceof APIError) showError(e, "admin");
    else showError(new APIError(0, { code: "NETWORK", detail: String((e && e.message) || e) }), "admin");
  } finally {
    btn.disabled = false;
  }
}
