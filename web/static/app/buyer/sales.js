// The sales: polled every second, each a card with its countdown, stock
// and Buy button.

import { api } from "../api.js";
import { $, el, setAttr, setText } from "../dom.js";
import { clock, duration, money, parseTime } from "../format.js";
import { describe } from "../messages.js";
import { state } from "../state.js";

const POLL_SALES_MS = 1000;
const STATE_LABEL = { upcoming: "Upcoming", active: "On sale", sold_out: "Sold out", ended: "Ended", cancelled: "Cancelled" };

// Other views show the sales too (the buyer's orders their names and
// prices, the operator's cards their stats) and import this module: the
// entry module says what follows a poll, so no import points back at them.
let afterPoll = () => {};

// onSalesPolled sets what is redrawn after each poll that read the sales.
export function onSalesPolled(fn) {
  afterPoll = fn;
}

// refreshSales polls now (after a purchase, a payment, a new sale) rather
// than at the next tick.
export function refreshSales() {
  if (state.salesInFlight) {
    state.salesAgain = true;
    return;
  }
  clearTimeout(state.salesTimer);
  pollSales();
}

export async function pollSales() {
  state.salesInFlight = true;
  try {
    const { data } = await api("GET", "/v1/sales");
    if (Array.isArray(data)) {
      const ids = [];
      for (const s of data) {
        if (!s || typeof s.id !== "string") continue;
        ids.push(s.id);
        state.sales.set(s.id, { ...s, starts: parseTime(s.starts_at), ends: parseTime(s.ends_at) });
      }
      for (const id of state.sales.keys()) if (!ids.includes(id)) state.sales.delete(id);
      state.saleIDs = ids;
      state.salesLoaded = true;
      setAttr($("#sales"), "data-loaded", "true");
      renderSales();
      afterPoll();
    }
  } catch (e) {
    if (!state.salesLoaded) setText($("#sales-empty"), describe(e));
  } finally {
    state.salesInFlight = false;
    clearTimeout(state.salesTimer);
    if (state.salesAgain) {
      state.salesAgain = false;
      state.salesTimer = setTimeout(pollSales, 0);
    } else {
      state.salesTimer = setTimeout(pollSales, POLL_SALES_MS);
    }
  }
}

// saleState is the server's state, moved on by the local clock between
// polls: the countdown opens the Buy button when it reaches zero (the
// server has the last word on every purchase).
export function saleState(s, now) {
  let st = s.state;
  if (st === "upcoming" && now >= s.starts) st = s.remaining > 0 ? "active" : "sold_out";
  if ((st === "active" || st === "sold_out") && now >= s.ends) st = "ended";
  return st;
}

const saleNodes = new Map();

function saleNode(id) {
  let n = saleNodes.get(id);
  if (n) return n;
  n = {};
  n.name = el("h3", { class: "sale-name" });
  n.badge = el("span", { class: "badge state" });
  n.price = el("div", { class: "price" });
  n.countdown = el("div", { class: "countdown", "data-sale-id": id, "aria-live": "off" });
  n.fill = el("span", { class: "fill" });
  n.bar = el("div", { class: "bar", role: "progressbar", "aria-valuemin": "0" }, n.fill);
  n.remaining = el("span", { class: "remaining" });
  n.times = el("div", { class: "times muted" });
  n.buy = el("button", { type: "button", class: "buy", "data-action": "buy", "data-sale-id": id, text: "Buy" });
  n.card = el("article", { class: "card sale", "data-sale-id": id },
    el("header", { class: "card-head" }, n.name, n.badge),
    n.price, n.countdown,
    el("div", { class: "stock" }, n.bar, n.remaining),
    n.times, n.buy);
  saleNodes.set(id, n);
  return n;
}

function renderSales() {
  const box = $("#sales");
  const empty = $("#sales-empty");
  empty.hidden = state.saleIDs.length > 0;
  setText(empty, "No sales yet." + (state.info.dev_mode ? " Open the operator view to create one." : ""));
  for (const [id, n] of saleNodes) {
    if (!state.sales.has(id)) {
      n.card.remove();
      saleNodes.delete(id);
    }
  }
  let prev = null;
  for (const id of state.saleIDs) {
    const n = saleNode(id);
    const want = prev ? prev.nextSibling : box.firstChild;
    if (want !== n.card) box.insertBefore(n.card, want);
    prev = n.card;
  }
  tick();
}

// tick redraws what moves with the clock: countdowns, states, buttons.
export function tick() {
  const now = Date.now();
  for (const id of state.saleIDs) {
    const s = state.sales.get(id);
    const n = saleNodes.get(id);
    if (!s || !n) continue;
    const st = saleState(s, now);
    setAttr(n.card, "data-state", st);
    setAttr(n.badge, "data-state", st);
    setText(n.badge, STATE_LABEL[st] || st);
    setText(n.name, s.name);
    setText(n.price, money(s.price_cents, s.currency));
    let cd;
    if (st === "upcoming") cd = `Starts in ${duration(s.starts - now)}`;
    else if (st === "ended") cd = "Ended";
    else if (st === "cancelled") cd = "Cancelled by the operator";
    else cd = `Open · ends in ${duration(s.ends - now)}`;
    setText(n.countdown, cd);
    setAttr(n.countdown, "data-state", st);
    setAttr(n.countdown, "data-ms", st === "upcoming" ? Math.max(0, s.starts - now) : 0);
    const remaining = Math.max(0, Number(s.remaining) || 0);
    const total = Math.max(1, Number(s.stock) || 1);
    n.fill.style.width = `${Math.min(100, (100 * remaining) / total)}%`;
    setAttr(n.bar, "aria-valuemax", total);
    setAttr(n.bar, "aria-valuenow", remaining);
    setAttr(n.card, "data-remaining", remaining);
    setText(n.remaining, `${remaining} of ${s.stock} left`);
    setText(n.times, `${clock(s.starts)} – ${clock(s.ends)}`);
    // Buy is open from the countdown's zero to the end. A sold-out sale
    // stays clickable: units come back when buyers cancel or do not pay.
    const busy = state.busy.has(`buy:${id}`);
    const over = st === "ended" || st === "cancelled";
    n.buy.disabled = busy || st === "upcoming" || over;
    setText(n.buy, busy ? "Buying…" : st === "upcoming" ? "Not yet" : over ? STATE_LABEL[st] : "Buy");
  }
}
