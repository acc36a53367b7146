// The operator view: shown or not, a new sale, and the controls on a
// sale's card (add units, end it, cancel it).

import { api } from "../api.js";
import { $, setAttr } from "../dom.js";
import { clock, minorDigits, parseTime } from "../format.js";
import { clearMessage, showError, showMessage } from "../messages.js";
import { refreshSales } from "../buyer/sales.js";
import { state } from "../state.js";
import { renderStatsCards, unitsToAdd } from "./stats.js";

export function setOperator(on) {
  state.operator = on;
  sessionStorage.setItem("seckill.operator", on ? "1" : "0");
  renderOperator();
}

export function renderOperator() {
  const on = state.operator;
  $("#operator").hidden = !on;
  document.body.classList.toggle("with-operator", on);
  setAttr($("#operator-toggle"), "aria-pressed", on ? "true" : "false");
  $("#operator-need-admin").hidden = !!state.admin;
  $("#create-sale").hidden = !state.admin;
  renderStatsCards();
}

// operatorAction ends a sale, adds units to it or cancels it.
export async function operatorAction(kind, saleID) {
  const ident = state.admin;
  if (!ident || !saleID) return;
  const key = `op:${saleID}`;
  if (state.busy.has(key)) return;
  const path = `/v1/sales/${encodeURIComponent(saleID)}`;
  let req;
  if (kind === "add-units") {
    const units = unitsToAdd(saleID);
    req = { path: `${path}/units`, body: { units }, done: (s) => `Added ${units} unit(s) to “${s.name}”: ${s.stock} in all, ${s.remaining} left.` };
  } else if (kind === "end-sale") {
    req = { path: `${path}/end`, done: (s) => `Sale “${s.name}” ended: purchases are refused from now on; orders already placed carry on.` };
  } else if (kind === "cancel-sale") {
    if (!window.confirm(`Cancel sale #${saleID}? Every unpaid order is cancelled; paid orders stand.`)) return;
    req = { path: `${path}/cancel`, done: (s) => `Sale “${s.name}” cancelled: its unpaid orders are being cancelled (see its card).` };
  } else {
    return;
  }
  state.busy.add(key);
  renderStatsCards();
  clearMessage();
  try {
    const { data } = await api("POST", req.path, { token: ident.token, body: req.body });
    showMessage("ok", "", req.done(data || {}));
    refreshSales();
  } catch (e) {
    showError(e, "admin");
  } finally {
    state.busy.delete(key);
    renderStatsCards();
  }
}

export async function createSale(form) {
  const ident = state.admin;
  if (!ident) return;
  const f = new FormData(form);
  const startsIn = Math.max(0, Number(f.get("starts_in")) || 0);
  const minutes = Math.max(1, Number(f.get("duration")) || 60);
  const starts = new Date(Date.now() + startsIn * 1000);
  starts.setMilliseconds(0);
  // The price is typed in whole units; the API takes the currency's minor
  // units. No currency: the deployment's default, in cents.
  const currency = String(f.get("currency") || "").trim().toUpperCase();
  let digits = 2;
  if (currency) {
    try {
      digits = minorDigits(currency);
    } catch {
      // Not a code the browser knows: the server says what is wrong.
    }
  }
  const body = {
    name: String(f.get("name") || "").trim(),
    price_cents: Math.round(Number(f.get("price")) * 10 ** digits),
    ...(currency ? { currency } : {}),
    stock: Math.round(Number(f.get("stock"))),
    starts_at: starts.toISOString(),
    ends_at: new Date(starts.getTime() + minutes * 60000).toISOString(),
  };
  const btn = $("button[type=submit]", form);
  btn.disabled = true;
  clearMessage();
  try {
    const { data } = await api("POST", "/v1/sales", { token: ident.token, body });
    showMessage("ok", "", `Sale “${data.name}” (#${data.id}) created: ${data.stock} units, opens at ${clock(parseTime(data.starts_at))}.`);
    refreshSales();
  } catch (e) {
    showError(e, "admin");
  } finally {
    btn.disabled = false;
  }
}
