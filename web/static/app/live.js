// The result channel: the buyer's websocket, which pushes their orders'
// events, its reconnection and its pill in the top bar.

import { api } from "./api.js";
import { applyOrder, refreshOrders } from "./buyer/orders.js";
import { $, setAttr, setText } from "./dom.js";
import { describe, showMessage } from "./messages.js";
import { setBuyer } from "./session.js";
import { state } from "./state.js";

// The server's close codes (README, "GET /v1/ws").
const WS_TOKEN_EXPIRED = 4001;
const WS_TOO_MANY_SOCKETS = 4008;

function setLive(s) {
  const live = $("#live");
  setAttr(live, "data-state", s);
  // Signed out, no socket is expected: the pill says so instead of
  // "offline", which reads as a fault.
  setText(live, { open: "live", connecting: "connecting…", off: "offline", "signed-out": "no live updates until you sign in" }[s] || s);
}

export function connectWS() {
  state.wsGen += 1;
  clearTimeout(state.wsTimer);
  if (state.ws) {
    const old = state.ws;
    state.ws = null;
    old.onclose = old.onmessage = old.onerror = null;
    old.close(1000);
  }
  if (!state.buyer) {
    setLive("signed-out");
    return;
  }
  const gen = state.wsGen;
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v1/ws";
  let ws;
  try {
    // Browsers cannot set headers on a websocket: the token travels as a
    // subprotocol.
    ws = new WebSocket(url, ["seckill.v1", "bearer." + state.buyer.token]);
  } catch {
    scheduleReconnect(gen);
    return;
  }
  state.ws = ws;
  setLive("connecting");
  let opened = false;
  ws.onopen = () => {
    if (gen !== state.wsGen) return;
    opened = true;
    state.wsRetries = 0;
    setLive("open");
  };
  ws.onmessage = (ev) => {
    if (gen !== state.wsGen) return;
    let m;
    try { m = JSON.parse(ev.data); } catch { return; }
    if (m && m.type === "order" && typeof m.order_id === "string") applyOrder(m, "ws");
  };
  ws.onclose = (ev) => {
    if (gen !== state.wsGen) return;
    state.ws = null;
    if (ev.code === WS_TOKEN_EXPIRED) {
      renewBuyer(state.buyer);
      return;
    }
    setLive("connecting");
    if (ev.code === WS_TOO_MANY_SOCKETS) {
      // The server holds as many sockets as it allows (of this buyer:
      // other tabs count): try again, but slowly.
      state.wsRetries = Math.max(state.wsRetries, 5);
      showMessage("info", "TOO_MANY_SOCKETS", `Live updates are refused for now (${ev.reason || "too many sockets"}); retrying every few seconds. Closing another tab of this buyer makes room.`);
    }
    // A socket refused at the handshake may mean a bad token: ask the
    // API, which says so in words.
    if (!opened) refreshOrders();
    scheduleReconnect(gen);
  };
}

// renewBuyer replaces the token a socket was closed for, expired. Dev mode
// mints a fresh one for the same buyer and reconnects; a pasted token
// cannot be renewed from here, so the page says so and stops, instead of
// reconnecting with a token the server refuses.
async function renewBuyer(ident) {
  if (!ident) return;
  if (!state.info.dev_mode) {
    showMessage("error", "TOKEN_EXPIRED", "Your token expired, so live updates stopped: paste a fresh token to go on.");
    setBuyer(null);
    return;
  }
  setLive("connecting");
  try {
    const { data } = await api("POST", "/v1/dev/token", { body: { user_id: ident.user_id, role: "buyer" } });
    if (state.buyer !== ident) return; // signed out or replaced meanwhile
    setBuyer({ token: data.token, user_id: data.user_id, role: data.role });
  } catch (e) {
    if (state.buyer !== ident) return;
    setLive("off");
    showMessage("error", "TOKEN_EXPIRED", `Your session expired and could not be renewed: ${describe(e, "buyer")} Click “New buyer” to go on.`);
  }
}

function scheduleReconnect(gen) {
  const delay = Math.min(10000, 500 * 2 ** state.wsRetries) * (0.75 + Math.random() / 2);
  state.wsRetries += 1;
  state.wsTimer = setTimeout(() => {
    if (gen === state.wsGen && state.buyer) connectWS();
  }, delay);
}
