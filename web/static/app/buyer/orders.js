// The buyer's orders: what the websocket and the API say of each, merged
// so an order only moves forward, and the list with Pay and Cancel.

import { api } from "../api.js";
import { $, el, setAttr, setText } from "../dom.js";
import { clock, compareIDsDesc, money, parseTime, safeBaseURL } from "../format.js";
import { clearMessage, showError, showMessage } from "../messages.js";
import { state } from "../state.js";
import { RANK, STATUS_LABEL } from "../statuses.js";
import { workflowURL } from "../temporal-ui.js";
import { refreshSales } from "./sales.js";

// applyOrder merges what we learnt about an order (a websocket event, an
// API answer) into the list; via says where it came from.
export function applyOrder(o, via) {
  const id = String(o.order_id || o.id);
  const cur = state.orders.get(id);
  const status = String(o.status || "");
  if (!(status in RANK)) return;
  if (cur && RANK[status] < RANK[cur.status]) return; // stale
  const next = cur ? { ...cur } : { id, sale_id: String(o.sale_id || ""), amount_cents: null, reason: "" };
  const changed = !cur || cur.status !== status;
  next.status = status;
  if (o.sale_id) next.sale_id = String(o.sale_id);
  if (typeof o.reason === "string" && (o.reason || changed)) next.reason = o.reason;
  if (typeof o.amount_cents === "number" && o.amount_cents > 0) next.amount_cents = o.amount_cents;
  if (typeof o.currency === "string" && o.currency) next.currency = o.currency;
  // Every word about a PENDING order says where it stands now: a place
  // in line, or none (its workflow has started, or nobody can tell).
  const count = (v) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : null);
  next.queue_position = status === "PENDING" ? count(o.queue_position) : null;
  next.eta_seconds = next.queue_position ? count(o.eta_seconds) : null;
  const at = parseTime(o.at || o.updated_at);
  if (Number.isFinite(at)) next.at = at;
  else if (!next.at) next.at = Date.now();
  if (changed) {
    next.via = via;
    next.flash = true;
  }
  state.orders.set(id, next);
  if (state.placing === id && status !== "PENDING") {
    // The message spoke of the order as being placed: it is not any more,
    // and its line below says what it is.
    state.placing = null;
    clearMessage();
  }
  renderOrders();
}

// lineText is a PENDING order's place in line in words: "You are #1,234
// in line, about 40 s", or "" when it has none.
function lineText(o) {
  if (o.status !== "PENDING" || !o.queue_position) return "";
  let text = `You are #${o.queue_position.toLocaleString()} in line`;
  if (o.eta_seconds) {
    text += o.eta_seconds < 120 ? `, about ${o.eta_seconds.toLocaleString()} s` : `, about ${Math.ceil(o.eta_seconds / 60).toLocaleString()} min`;
  }
  return text;
}

export async function refreshOrders() {
  const ident = state.buyer;
  if (!ident) return;
  try {
    const { data } = await api("GET", "/v1/orders", { token: ident.token });
    if (state.buyer !== ident || !Array.isArray(data)) return;
    for (const o of data) applyOrder(o, "http");
  } catch (e) {
    if (state.buyer === ident && e.code === "UNAUTHORIZED") showError(e, "buyer");
  }
}

export async function orderAction(kind, orderID, btn) {
  const ident = state.buyer;
  if (!ident) return;
  const key = `${kind}:${orderID}`;
  if (state.busy.has(key)) return;
  state.busy.add(key);
  btn.disabled = true;
  clearMessage();
  try {
    const { status, data } = await api("POST", `/v1/orders/${encodeURIComponent(orderID)}/${kind}`, { token: ident.token });
    if (data && data.id) applyOrder(data, "http");
    refreshSales();
    if (status === 202 && kind === "pay" && data && data.payment) {
      // Pay started a payment at the provider: the buyer pays on its page,
      // which sends them back here (backFromPayment).
      const page = data.payment.redirect_url ? safeBaseURL(data.payment.redirect_url) : "";
      if (page) {
        showMessage("info", "", `Taking you to the ${data.payment.provider} payment page…`);
        location.assign(data.payment.redirect_url);
        return;
      }
      showMessage("error", "", `Payment ${data.payment.id} is to be completed with the ${data.payment.provider} client library, which this demo page does not include.`);
    } else if (status === 202) {
      showMessage("info", "", kind === "pay" ? "Payment sent; waiting for the order to record it…" : "Cancellation sent; waiting for the order to record it…");
    } else if (data && data.status === "PAID") {
      showMessage("ok", "", `Order ${orderID} is paid. Thank you!`);
    } else if (data && data.status === "CANCELLED") {
      showMessage("ok", "", `Order ${orderID} is cancelled; the unit is back on sale.`);
    }
  } catch (e) {
    showError(e, "buyer");
  } finally {
    state.busy.delete(key);
    renderOrders();
  }
}

const orderNodes = new Map(); // id -> {li, badge, ...}

function orderNode(id) {
  let n = orderNodes.get(id);
  if (n) return n;
  n = {};
  n.badge = el("span", { class: "badge status" });
  n.sale = el("strong", { class: "order-sale" });
  n.amount = el("span", { class: "amount" });
  n.meta = el("span", { class: "order-meta muted" });
  n.reason = el("span", { class: "reason" });
  n.line = el("div", { class: "order-line", "aria-live": "polite" });
  n.pay = el("button", { type: "button", "data-action": "pay", "data-order-id": id, text: "Pay" });
  n.cancel = el("button", { type: "button", class: "secondary", "data-action": "cancel", "data-order-id": id, text: "Cancel" });
  n.link = el("a", { class: "workflow-link", target: "_blank", rel: "noopener", text: "Workflow ↗" });
  n.wf = el("code", { class: "workflow-id", text: `order-${id}` });
  n.steps = el("ol", { class: "steps", "aria-hidden": "true" });
  for (const s of ["PENDING", "AWAITING_PAYMENT", "DONE"]) n.steps.append(el("li", { "data-step": s }));
  n.li = el("li", { class: "order", "data-order-id": id },
    el("div", { class: "order-main" }, n.badge, n.sale, n.amount),
    n.steps,
    n.line,
    el("div", { class: "order-sub" }, n.meta, n.reason),
    el("div", { class: "order-actions" }, n.pay, n.cancel, n.link, n.wf));
  orderNodes.set(id, n);
  return n;
}

export function renderOrders() {
  const list = $("#orders");
  const ids = [...state.orders.keys()].sort(compareIDsDesc);
  $("#orders-empty").hidden = ids.length > 0;
  $("#orders-empty").textContent = state.buyer ? "No orders yet." : "Sign in as a buyer to see your orders.";
  for (const [id, n] of orderNodes) {
    if (!state.orders.has(id)) {
      n.li.remove();
      orderNodes.delete(id);
    }
  }
  let prev = null;
  for (const id of ids) {
    const o = state.orders.get(id);
    const n = orderNode(id);
    setAttr(n.li, "data-status", o.status);
    setAttr(n.li, "data-sale-id", o.sale_id);
    setAttr(n.li, "data-via", o.via || "");
    setAttr(n.badge, "data-status", o.status);
    setText(n.badge, STATUS_LABEL[o.status] || o.status);
    const sale = state.sales.get(o.sale_id);
    setText(n.sale, sale ? sale.name : `Sale ${o.sale_id}`);
    const cents = o.amount_cents != null ? o.amount_cents : sale ? sale.price_cents : null;
    setText(n.amount, cents != null ? money(cents, o.currency || (sale && sale.currency)) : "");
    setText(n.meta, `Order ${id} · ${clock(o.at)}`);
    setText(n.reason, o.reason ? `· ${o.reason}` : "");
    const line = lineText(o);
    setText(n.line, line);
    n.line.hidden = !line;
    const rank = Math.min(RANK[o.status], 2); // a refund is the last step's outcome
    for (const step of n.steps.children) {
      const s = step.getAttribute("data-step");
      const idx = s === "PENDING" ? 0 : s === "AWAITING_PAYMENT" ? 1 : 2;
      setAttr(step, "class", idx < rank ? "done" : idx === rank ? (rank === 2 ? "done " + o.status.toLowerCase() : "current") : "");
    }
    const awaiting = o.status === "AWAITING_PAYMENT";
    n.pay.hidden = !awaiting;
    n.cancel.hidden = !awaiting;
    n.pay.disabled = state.busy.has(`pay:${id}`) || state.busy.has(`cancel:${id}`);
    n.cancel.disabled = n.pay.disabled;
    const href = workflowURL(id);
    if (href) {
      setAttr(n.link, "href", href);
      n.link.hidden = false;
      n.wf.hidden = true;
    } else {
      n.link.removeAttribute("href");
      n.link.hidden = true;
      n.wf.hidden = false;
    }
    if (o.flash) {
      o.flash = false;
      n.li.classList.remove("flash");
      void n.li.offsetWidth; // restart the animation
      n.li.classList.add("flash");
    }
    // Keep the DOM order without moving nodes that are in place.
    const want = prev ? prev.nextSibling : list.firstChild;
    if (want !== n.li) list.insertBefore(n.li, want);
    prev = n.li;
  }
}

// backFromPayment tells a buyer the provider's page sent back (with
// ?order_id=…&payment_id=…&payment_status=…) what happens next, and takes
// the query out of the address. The query is the provider's word, passed
// through the browser: the order's status is the shop's, and it becomes
// PAID only on the provider's signed notification, pushed here live.
export function backFromPayment() {
  const q = new URLSearchParams(location.search);
  const orderID = q.get("order_id");
  if (!orderID) return;
  const st = q.get("payment_status");
  history.replaceState(null, "", location.pathname + location.hash);
  if (st === "captured") {
    showMessage("ok", "", `Back from the payment page. Order ${orderID} turns PAID here as soon as the payment provider confirms the payment to the shop.`);
  } else if (st === "declined" || st === "canceled") {
    showMessage("info", "", `Back from the payment page: the payment was ${st}. Order ${orderID} still awaits payment until its deadline; Pay tries again.`);
  } else {
    showMessage("info", "", `Back from the payment page. Order ${orderID} follows the payment provider's answer here.`);
  }
}
