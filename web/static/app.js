// seckill demo page: sales with a live countdown and stock, a buy button,
// results over the websocket, and an operator view with live stats.
//
// Plain JavaScript in ES modules the browser loads itself (app/, beside
// this file): no dependencies, no build step. Everything the server sends
// is put into the page with textContent or setAttribute, never parsed as
// HTML. This entry module wires the others together: the clicks, the forms,
// what follows a sign-in or a poll of the sales, and the start.

import { api } from "./app/api.js";
import { buy } from "./app/buyer/buy.js";
import { backFromPayment, orderAction, refreshOrders, renderOrders } from "./app/buyer/orders.js";
import { onSalesPolled, pollSales, tick } from "./app/buyer/sales.js";
import { $ } from "./app/dom.js";
import { connectWS } from "./app/live.js";
import { clearMessage, showError } from "./app/messages.js";
import { exportCSV, loadSaleOrders } from "./app/operator/sale-orders.js";
import { forgetStats, ordersSection, pollStats, renderStatsCards } from "./app/operator/stats.js";
import { createSale, operatorAction, renderOperator, setOperator } from "./app/operator/view.js";
import { onIdentityChange, renderIdentity } from "./app/session.js";
import { becomeAdmin, newBuyer, signInWithToken } from "./app/signin.js";
import { state } from "./app/state.js";
import { workflowsURL } from "./app/temporal-ui.js";

const TICK_MS = 200;

// A new buyer sees their own orders, live; a new admin their own stats.
onIdentityChange(
  (buyer, changed) => {
    if (changed) {
      state.orders.clear();
      renderOrders();
    }
    renderIdentity();
    connectWS();
    if (buyer) refreshOrders();
  },
  () => {
    forgetStats();
    renderIdentity();
    renderOperator();
  });

// A poll of the sales redraws the operator's cards (which sales, their
// state) and the buyer's orders (their sales' names and prices).
onSalesPolled(() => {
  renderStatsCards();
  renderOrders();
});

function onClick(ev) {
  const btn = ev.target.closest("[data-action]");
  if (!btn || btn.tagName !== "BUTTON" || btn.disabled) return;
  switch (btn.getAttribute("data-action")) {
    case "buy": buy(btn.getAttribute("data-sale-id")); break;
    case "pay": orderAction("pay", btn.getAttribute("data-order-id"), btn); break;
    case "cancel": orderAction("cancel", btn.getAttribute("data-order-id"), btn); break;
    case "new-buyer": newBuyer(btn); break;
    case "become-admin": becomeAdmin(btn); break;
    case "toggle-operator": setOperator(!state.operator); break;
    case "add-units":
    case "end-sale":
    case "cancel-sale": operatorAction(btn.getAttribute("data-action"), btn.getAttribute("data-sale-id")); break;
    case "sale-orders": loadSaleOrders(ordersSection(btn.getAttribute("data-sale-id")), false); break;
    case "more-orders": loadSaleOrders(ordersSection(btn.getAttribute("data-sale-id")), true); break;
    case "export-csv": exportCSV(ordersSection(btn.getAttribute("data-sale-id")), btn); break;
    case "dismiss": clearMessage(); break;
  }
}

async function init() {
  document.addEventListener("click", onClick);
  $("#create-sale").addEventListener("submit", (ev) => {
    ev.preventDefault();
    createSale(ev.target);
  });
  $("#signin-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    signInWithToken($("#signin-token").value);
    $("#signin-token").value = "";
  });
  try {
    const { data } = await api("GET", "/v1/info");
    if (data) state.info = { ...state.info, ...data };
  } catch (e) {
    showError(e);
  }
  const ui = workflowsURL();
  if (ui) {
    $("#temporal-ui").href = ui;
    $("#temporal-ui").hidden = false;
  }
  document.body.setAttribute("data-dev-mode", state.info.dev_mode ? "true" : "false");
  renderIdentity();
  renderOperator();
  renderOrders();
  backFromPayment();
  connectWS();
  refreshOrders();
  pollSales();
  pollStats();
  setInterval(tick, TICK_MS);
  document.body.setAttribute("data-ready", "true");
}

init();
