// A click on Buy: one purchase with its Idempotency-Key, asked again while
// the answer is UNCONFIRMED.

import { api } from "../api.js";
import { clearMessage, showError, showMessage } from "../messages.js";
import { state } from "../state.js";
import { applyOrder, refreshOrders } from "./orders.js";
import { refreshSales, tick } from "./sales.js";

// A purchase answered UNCONFIRMED is asked again with its key this many
// times, each after its Retry-After (at most UNCONFIRMED_WAIT_MAX_MS):
// a page left open never asks for ever.
const UNCONFIRMED_RETRIES = 5;
const UNCONFIRMED_WAIT_MS = 1000;
const UNCONFIRMED_WAIT_MAX_MS = 5000;

// idempotencyKey is a fresh key for one purchase. randomUUID exists only
// in a secure context (https, localhost); a page opened over plain http
// on another address makes its key from getRandomValues, which exists
// everywhere.
function idempotencyKey() {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function buy(saleID) {
  const ident = state.buyer;
  if (!ident) {
    showMessage("error", "UNAUTHORIZED", state.info.dev_mode
      ? "Click “New buyer” first: every buyer gets their own token."
      : "Sign in with a buyer token first.");
    return;
  }
  const key = `buy:${saleID}`;
  if (state.busy.has(key)) return;
  state.busy.add(key);
  tick();
  clearMessage();
  try {
    const { data } = await purchase(saleID, ident);
    if (state.buyer !== ident) return; // signed out or replaced meanwhile
    if (data && data.order_id) {
      applyOrder({ order_id: data.order_id, sale_id: saleID, status: data.status || "PENDING" }, "http");
      showMessage("ok", "", `Got one! Order ${data.order_id} is being placed; its result arrives here live.`);
      state.placing = String(data.order_id);
    }
    refreshSales();
  } catch (e) {
    if (state.buyer !== ident) return;
    showError(e, "buyer");
    if (e.code === "ALREADY_PURCHASED" || e.code === "UNCONFIRMED") refreshOrders();
  } finally {
    state.busy.delete(key);
    tick();
  }
}

// purchase is one click's purchase: one Idempotency-Key, sent again while
// the answer is UNCONFIRMED (the unit may have been taken), so the retry
// learns which: 202 with the same order if it was, a fresh admission or
// SOLD_OUT if it was not. It throws the last UNCONFIRMED answer when the
// retries run out.
async function purchase(saleID, ident) {
  const path = `/v1/sales/${encodeURIComponent(saleID)}/orders`;
  const headers = { "Idempotency-Key": idempotencyKey() };
  let unconfirmed = null;
  for (let retries = 0; ; retries++) {
    try {
      return await api("POST", path, { token: ident.token, headers });
    } catch (e) {
      if (e.code === "UNCONFIRMED") unconfirmed = e;
      // After an UNCONFIRMED answer, a retry that failed on its own
      // (no connection, 429, 5xx) says nothing about the first one: the
      // outcome is still unknown, never "nothing was changed".
      else if (!unconfirmed || !(e.status === 0 || e.status === 429 || e.status >= 500)) throw e;
      if (retries >= UNCONFIRMED_RETRIES || state.buyer !== ident) throw unconfirmed;
      const id = unconfirmed.problem.order_id;
      showMessage("info", "UNCONFIRMED", `Not confirmed yet: checking whether ${id ? `order ${id}` : "your purchase"} holds your unit…`);
      await sleep(retryDelay(e.retryAfter));
    }
  }
}

// retryDelay is a Retry-After in seconds as milliseconds, bounded.
function retryDelay(retryAfter) {
  const s = Number(retryAfter);
  return s > 0 ? Math.min(s * 1000, UNCONFIRMED_WAIT_MAX_MS) : UNCONFIRMED_WAIT_MS;
}
