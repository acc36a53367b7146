// The live stats of the sales the operator follows: one card each, polled
// every second, with the order counts and the orders per second.

import { api } from "../api.js";
import { saleState } from "../buyer/sales.js";
import { $, el, setAttr, setText } from "../dom.js";
import { showError } from "../messages.js";
import { state } from "../state.js";
import { STATUS_COUNT_LABEL, STATUS_ORDER } from "../statuses.js";
import { CHART_POINTS, drawChart } from "./chart.js";
import { saleOrdersNode } from "./sale-orders.js";

const POLL_STATS_MS = 1000;
const MAX_STATS_SALES = 6;

// statsSales are the sales the operator view follows: running, upcoming
// or ended in the last ten minutes, newest first.
function statsSales() {
  const now = Date.now();
  return state.saleIDs.filter((id) => {
    const s = state.sales.get(id);
    return s && (!(now >= s.ends) || now - s.ends < 10 * 60 * 1000);
  }).slice(0, MAX_STATS_SALES);
}

export async function pollStats() {
  const ident = state.admin;
  try {
    if (!state.operator || !ident) return;
    const ids = statsSales();
    const results = await Promise.allSettled(ids.map((id) =>
      api("GET", `/v1/sales/${encodeURIComponent(id)}/stats`, { token: ident.token })));
    if (state.admin !== ident) return;
    const t = performance.now();
    let authErr = null;
    results.forEach((r, i) => {
      const id = ids[i];
      if (r.status === "rejected") {
        if (r.reason.code === "UNAUTHORIZED" || r.reason.code === "FORBIDDEN") authErr = r.reason;
        return;
      }
      const st = r.value.data;
      let rec = state.stats.get(id);
      if (!rec) {
        rec = { samples: [], rates: [] };
        state.stats.set(id, rec);
      }
      const total = admitted(st);
      const last = rec.samples[rec.samples.length - 1];
      if (last) {
        const dt = (t - last.t) / 1000;
        if (dt > 0) rec.rates.push(Math.max(0, total - last.total) / dt);
        if (rec.rates.length > CHART_POINTS) rec.rates.shift();
      }
      rec.samples.push({ t, total });
      if (rec.samples.length > 2) rec.samples.shift();
      rec.last = st;
    });
    if (authErr) showError(authErr, "admin");
    renderStatsCards();
  } finally {
    setTimeout(pollStats, POLL_STATS_MS);
  }
}

// admitted counts every order the sale ever admitted: the rows in any
// status plus those still on their way to a row.
function admitted(st) {
  let n = Math.max(0, Number(st.pending) || 0);
  for (const v of Object.values(st.orders || {})) n += Number(v) || 0;
  return n;
}

const statNodes = new Map();

function statNode(id) {
  let n = statNodes.get(id);
  if (n) return n;
  n = { cells: {} };
  n.title = el("h3", { class: "sale-name" });
  n.sub = el("span", { class: "muted" });
  const grid = el("dl", { class: "metrics" });
  const metric = (key, label) => {
    const dd = el("dd", { "data-metric": key, text: "–" });
    grid.append(el("div", { class: "metric" }, el("dt", { text: label }), dd));
    n.cells[key] = dd;
  };
  metric("redis_remaining", "Redis remaining");
  metric("db_stock", "DB stock");
  metric("stock", "Units on sale");
  metric("redis_buyers", "Buyers in Redis");
  metric("relay_backlog", "Relay backlog");
  metric("pending", "Pending");
  metric("open_orders", "Open orders");
  n.sync = el("div", { class: "sync" });
  // Controls of a live sale: add units, end it now, cancel it.
  n.units = el("input", { type: "number", min: "1", max: "1000000", step: "1", value: "10", "aria-label": "Units to add", "data-sale-id": id });
  n.add = el("button", { type: "button", "data-action": "add-units", "data-sale-id": id, text: "Add units" });
  n.end = el("button", { type: "button", class: "secondary", "data-action": "end-sale", "data-sale-id": id, text: "End now" });
  n.cancelSale = el("button", { type: "button", class: "secondary danger", "data-action": "cancel-sale", "data-sale-id": id, text: "Cancel sale" });
  n.controls = el("div", { class: "sale-controls" }, n.units, n.add, n.end, n.cancelSale);
  n.cancelling = el("div", { class: "sync", "data-cancelling": "false", hidden: true });
  n.statuses = el("ul", { class: "status-counts" });
  n.statusCells = {};
  for (const s of STATUS_ORDER) {
    const count = el("b", { text: "0" });
    const li = el("li", { "data-status": s, "data-count": "0" }, el("span", { class: "badge status", "data-status": s, text: STATUS_COUNT_LABEL[s] }), count);
    n.statuses.append(li);
    n.statusCells[s] = { li, count };
  }
  n.canvas = el("canvas", { class: "chart", width: "300", height: "80", role: "img", "aria-label": "Admitted orders per second" });
  n.rate = el("span", { class: "rate muted" });
  n.orders = saleOrdersNode(id);
  n.card = el("article", { class: "card stats", "data-stats-sale-id": id },
    el("header", { class: "card-head" }, n.title, n.sub),
    grid, n.sync, n.cancelling, n.controls, n.statuses,
    el("div", { class: "chart-head" }, el("span", { text: "Orders per second" }), n.rate),
    n.canvas, n.orders.box);
  statNodes.set(id, n);
  return n;
}

export function renderStatsCards() {
  const box = $("#stats");
  const show = state.operator && !!state.admin;
  const ids = show ? statsSales() : [];
  $("#stats-empty").hidden = !show || ids.length > 0;
  for (const [id, n] of statNodes) {
    if (!ids.includes(id)) {
      n.card.remove();
      statNodes.delete(id);
    }
  }
  let prev = null;
  for (const id of ids) {
    const n = statNode(id);
    const want = prev ? prev.nextSibling : box.firstChild;
    if (want !== n.card) box.insertBefore(n.card, want);
    prev = n.card;
    const sale = state.sales.get(id);
    setText(n.title, sale ? sale.name : `Sale ${id}`);
    setText(n.sub, `#${id}`);
    const st0 = sale ? saleState(sale, Date.now()) : "";
    const over = st0 === "ended" || st0 === "cancelled";
    const busy = state.busy.has(`op:${id}`);
    n.add.disabled = busy || over;
    n.units.disabled = busy || over;
    n.end.disabled = busy || over;
    n.cancelSale.disabled = busy || st0 === "cancelled";
    const rec = state.stats.get(id);
    const st = rec && rec.last;
    if (!st) continue;
    for (const [k, dd] of Object.entries(n.cells)) setText(dd, String(st[k] ?? "–"));
    const inSync = st.redis_remaining === st.db_stock;
    setAttr(n.sync, "data-sync", inSync ? "yes" : "no");
    setText(n.sync, inSync
      ? "Redis and the database agree."
      : st.redis_remaining < st.db_stock
        ? `Redis holds ${st.db_stock - st.redis_remaining} unit(s) fewer than the database: orders on their way.`
        : `Redis holds ${st.redis_remaining - st.db_stock} unit(s) more than the database: a release is in progress.`);
    for (const s of STATUS_ORDER) {
      const c = n.statusCells[s];
      const v = (st.orders && st.orders[s]) || 0;
      setText(c.count, String(v));
      setAttr(c.li, "data-count", v);
    }
    setAttr(n.card, "data-paid", (st.orders && st.orders.PAID) || 0);
    n.cancelling.hidden = !st.cancelling && st0 !== "cancelled";
    setAttr(n.cancelling, "data-cancelling", st.cancelling ? "true" : "false");
    setText(n.cancelling, st.cancelling
      ? `Cancelling: ${st.open_orders} open order(s) left; paid orders stand.`
      : "Cancelled: every unpaid order was cancelled; paid orders stand.");
    const rates = rec.rates;
    const cur = rates.length ? rates[rates.length - 1] : 0;
    const peak = rates.length ? Math.max(...rates) : 0;
    setText(n.rate, `now ${cur.toFixed(1)}/s · peak ${peak.toFixed(1)}/s`);
    setAttr(n.card, "data-peak", peak.toFixed(2));
    drawChart(n.canvas, rates);
  }
}

// ordersSection is the orders section of a sale's card (sale-orders.js),
// none while the card is not shown.
export function ordersSection(id) {
  const n = statNodes.get(id);
  return n && n.orders;
}

// unitsToAdd is what the card's "Units to add" field says, rounded.
export function unitsToAdd(id) {
  const n = statNodes.get(id);
  return Math.round(Number(n && n.units.value));
}

// forgetStats drops the samples and the cards' place on the page: another
// admin (or none) starts afresh.
export function forgetStats() {
  state.stats.clear();
  $("#stats").replaceChildren();
}
