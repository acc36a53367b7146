// seckill demo page: sales with a live countdown and stock, a buy button,
// results over the websocket, and an operator view with live stats.
//
// Plain JavaScript, no dependencies, no build step. Everything the server
// sends is put into the page with textContent or setAttribute, never parsed
// as HTML.
"use strict";

(() => {
  const POLL_SALES_MS = 1000;
  const POLL_STATS_MS = 1000;
  const TICK_MS = 200;
  const CHART_POINTS = 60;
  const MAX_STATS_SALES = 6;
  // A purchase answered UNCONFIRMED is asked again with its key this many
  // times, each after its Retry-After (at most UNCONFIRMED_WAIT_MAX_MS):
  // a page left open never asks for ever.
  const UNCONFIRMED_RETRIES = 5;
  const UNCONFIRMED_WAIT_MS = 1000;
  const UNCONFIRMED_WAIT_MAX_MS = 5000;

  const STATUS_LABEL = {
    PENDING: "Placing…",
    AWAITING_PAYMENT: "Awaiting payment",
    PAID: "Paid",
    CANCELLED: "Cancelled",
    EXPIRED: "Expired",
    FAILED: "Failed",
  };
  // The operator counts orders; a buyer watches one.
  const STATUS_COUNT_LABEL = {
    PENDING: "Pending",
    AWAITING_PAYMENT: "Awaiting payment",
    PAID: "Paid",
    CANCELLED: "Cancelled",
    EXPIRED: "Expired",
    FAILED: "Failed",
  };
  const STATUS_ORDER = ["PENDING", "AWAITING_PAYMENT", "PAID", "CANCELLED", "EXPIRED", "FAILED"];
  // An order only moves forward: PENDING, then AWAITING_PAYMENT, then one
  // final status. A late or replayed event never moves it back.
  const RANK = { PENDING: 0, AWAITING_PAYMENT: 1, PAID: 2, CANCELLED: 2, EXPIRED: 2, FAILED: 2 };
  const STATE_LABEL = { upcoming: "Upcoming", active: "On sale", sold_out: "Sold out", ended: "Ended", cancelled: "Cancelled" };

  const state = {
    info: { dev_mode: false, temporal_ui_url: "", temporal_namespace: "default" },
    sales: new Map(), // id -> sale (with parsed starts/ends)
    saleIDs: [], // newest first, as the server lists them
    salesLoaded: false,
    buyer: load("seckill.buyer"),
    admin: load("seckill.admin"),
    operator: sessionStorage.getItem("seckill.operator") === "1",
    orders: new Map(), // id -> {id, sale_id, status, reason, amount_cents, queue_position, eta_seconds, at, via}
    busy: new Set(), // "buy:<sale>", "pay:<order>", "cancel:<order>"
    placing: null, // the order the "being placed" message speaks of
    ws: null,
    wsGen: 0,
    wsRetries: 0,
    wsTimer: 0,
    stats: new Map(), // sale id -> {last, samples: [{t, total}], rates: []}
    salesTimer: 0,
    salesInFlight: false,
    salesAgain: false,
    messageSeq: 0,
  };

  // ---- small helpers ------------------------------------------------------

  const $ = (sel, root = document) => root.querySelector(sel);

  // el builds an element. attrs: "class", "text" (textContent), anything
  // else becomes an attribute. Children are nodes or strings (text).
  function el(tag, attrs, ...children) {
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

  function setText(node, text) {
    text = String(text);
    if (node.textContent !== text) node.textContent = text;
  }

  function setAttr(node, name, value) {
    value = String(value);
    if (node.getAttribute(name) !== value) node.setAttribute(name, value);
  }

  function load(key) {
    try {
      const v = JSON.parse(sessionStorage.getItem(key) || "null");
      return v && typeof v.token === "string" && typeof v.user_id === "string" ? v : null;
    } catch {
      return null;
    }
  }

  function store(key, value) {
    if (value) sessionStorage.setItem(key, JSON.stringify(value));
    else sessionStorage.removeItem(key);
  }

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

  function randomID() {
    const b = new Uint8Array(6);
    crypto.getRandomValues(b);
    return Array.from(b, (x) => (x % 36).toString(36)).join("");
  }

  // parseTime reads an RFC 3339 time; Go writes up to 9 fractional digits,
  // more than Date.parse promises to accept.
  function parseTime(s) {
    if (typeof s !== "string") return NaN;
    return Date.parse(s.replace(/(\.\d{3})\d+/, "$1"));
  }

  function money(cents) {
    const n = Number(cents) / 100;
    if (!Number.isFinite(n)) return "";
    return n.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  }

  function clock(ms) {
    if (!Number.isFinite(ms)) return "";
    // With the zone: a buyer and an operator may not share one.
    return new Date(ms).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
  }

  // duration renders ms as 1d 02:03:04, 02:03:04 or 03:04.
  function duration(ms) {
    let s = Math.max(0, Math.ceil(ms / 1000));
    const d = Math.floor(s / 86400);
    s -= d * 86400;
    const h = Math.floor(s / 3600);
    s -= h * 3600;
    const m = Math.floor(s / 60);
    s -= m * 60;
    const two = (x) => String(x).padStart(2, "0");
    const hms = h > 0 || d > 0 ? `${two(h)}:${two(m)}:${two(s)}` : `${two(m)}:${two(s)}`;
    return d > 0 ? `${d}d ${hms}` : hms;
  }

  function compareIDsDesc(a, b) {
    // Ids are decimal strings of 64-bit numbers: longer is larger.
    if (a.length !== b.length) return b.length - a.length;
    return a < b ? 1 : a > b ? -1 : 0;
  }

  // safeBaseURL accepts only http(s) URLs, so a configured link can never
  // become javascript:.
  function safeBaseURL(s) {
    try {
      const u = new URL(s, location.href);
      if (u.protocol !== "http:" && u.protocol !== "https:") return "";
      return u.href.replace(/\/+$/, "");
    } catch {
      return "";
    }
  }

  function workflowURL(orderID) {
    const base = safeBaseURL(state.info.temporal_ui_url || "");
    if (!base) return "";
    const ns = state.info.temporal_namespace || "default";
    return `${base}/namespaces/${encodeURIComponent(ns)}/workflows/${encodeURIComponent("order-" + orderID)}`;
  }

  // ---- the API ------------------------------------------------------------

  class APIError extends Error {
    constructor(status, problem, retryAfter) {
      super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
      this.status = status;
      this.problem = problem || {};
      this.code = this.problem.code || codeForStatus(status);
      this.retryAfter = retryAfter;
    }
  }

  function codeForStatus(status) {
    switch (status) {
      case 0: return "NETWORK";
      case 400: return "BAD_REQUEST";
      case 401: return "UNAUTHORIZED";
      case 403: return "FORBIDDEN";
      case 404: return "NOT_FOUND";
      case 409: return "INVALID_STATE";
      case 413: return "BODY_TOO_LARGE";
      case 422: return "VALIDATION_FAILED";
      case 429: return "RATE_LIMITED";
      case 503: return "UNAVAILABLE";
      default: return status >= 500 ? "INTERNAL" : "BAD_REQUEST";
    }
  }

  // api calls the API; headers are added to the request's own.
  async function api(method, path, { token, body, headers: extra } = {}) {
    const headers = { ...extra, Accept: "application/json, application/problem+json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (token) headers.Authorization = "Bearer " + token;
    let resp;
    try {
      resp = await fetch(path, {
        method, headers, cache: "no-store",
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new APIError(0, { code: "NETWORK", detail: String((e && e.message) || e) });
    }
    const text = await resp.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch { data = null; }
    }
    if (!resp.ok) {
      throw new APIError(resp.status, data && typeof data === "object" ? data : null, resp.headers.get("Retry-After"));
    }
    return { status: resp.status, data, headers: resp.headers };
  }

  // nextLink is the rel="next" URL of a list's Link header, or "".
  function nextLink(headers) {
    const m = /<([^>]*)>\s*;\s*rel="?next"?/.exec((headers && headers.get("Link")) || "");
    return m ? m[1] : "";
  }

  // ---- messages -----------------------------------------------------------

  // describe turns an API error into a sentence for a human.
  function describe(err, who) {
    const p = err.problem || {};
    switch (err.code) {
      case "SOLD_OUT":
        return "Sold out: every unit of this sale has been taken. A unit comes back if a buyer cancels or does not pay in time.";
      case "ALREADY_PURCHASED":
        return p.order_id
          ? `You already hold a unit of this sale (order ${p.order_id}). It is one per buyer.`
          : "You already hold a unit of this sale. It is one per buyer.";
      case "NOT_STARTED":
        return "This sale has not started yet: wait for the countdown to reach zero.";
      case "ENDED":
        return "This sale has ended.";
      case "RATE_LIMITED": {
        const s = parseInt(err.retryAfter, 10);
        return `Too many requests: slow down and try again in ${s > 0 ? s : 1} s.`;
      }
      case "UNAVAILABLE":
        // The api's detail says whether anything changed: most 503s changed
        // nothing, but a pay or cancel the order's workflow took and has not
        // confirmed "may still take effect". So the detail, when there is one.
        return p.detail
          ? `The shop could not finish this just now: ${p.detail}. Please try again in a moment.`
          : "The shop is temporarily unavailable (a backing service is down). Nothing was changed: please try again in a moment.";
      case "UNCONFIRMED":
        // The purchase may have taken a unit: unlike UNAVAILABLE, it never
        // says the shop changed nothing.
        return "Your purchase could not be confirmed, so it is not known whether you hold a unit" +
          (p.order_id ? ` (if you do, it is order ${p.order_id}).` : ".") +
          " If it was taken, the order appears in your orders below. Buying again is safe: a buyer never holds more than one unit.";
      case "UNAUTHORIZED":
        return who === "admin"
          ? "Your operator session is not valid (expired, or the server restarted): become admin again."
          : state.info.dev_mode
            ? "You are not signed in, or your session expired: click “New buyer” to get a fresh one."
            : "You are not signed in, or your token expired: paste a valid token.";
      case "FORBIDDEN":
        return "Only an operator (admin) may do that.";
      case "NOT_FOUND":
        return "Not found: it may belong to someone else or no longer exist.";
      case "INVALID_STATE":
        return "Not possible in the order's current state" + (p.detail ? `: ${p.detail}.` : ".");
      case "VALIDATION_FAILED": {
        const details = Array.isArray(p.errors)
          ? p.errors.map((e) => [e.location, e.message].filter(Boolean).join(": ")).filter(Boolean)
          : [];
        return "Please check the input" + (details.length ? `: ${details.join("; ")}.` : p.detail ? `: ${p.detail}.` : ".");
      }
      case "BODY_TOO_LARGE":
        return "The request is too large.";
      case "BAD_REQUEST":
        return "The request was not understood" + (p.detail ? `: ${p.detail}.` : ".");
      case "NETWORK":
        return "Cannot reach the server: check your connection and try again.";
      default:
        return `Something went wrong (${err.code})` + (p.detail ? `: ${p.detail}.` : ".");
    }
  }

  function showMessage(kind, code, text) {
    const m = $("#message");
    state.messageSeq += 1;
    m.setAttribute("data-kind", kind);
    m.setAttribute("data-code", code || "");
    m.setAttribute("data-seq", String(state.messageSeq));
    $(".message-text", m).textContent = text;
    m.hidden = false;
  }

  function showError(err, who) {
    showMessage("error", err.code, describe(err, who));
    if (err.code === "UNAUTHORIZED") {
      // The stored token is no good (expired, or the server's secret
      // changed): forget it.
      if (who === "admin") setAdmin(null);
      else if (who === "buyer") setBuyer(null);
    }
  }

  function clearMessage() {
    const m = $("#message");
    m.hidden = true;
    m.setAttribute("data-code", "");
    m.setAttribute("data-kind", "");
    $(".message-text", m).textContent = "";
  }

  // ---- identity -----------------------------------------------------------

  function setBuyer(ident) {
    const changed = (ident && ident.user_id) !== (state.buyer && state.buyer.user_id);
    state.buyer = ident;
    store("seckill.buyer", ident);
    if (changed) {
      state.orders.clear();
      renderOrders();
    }
    renderIdentity();
    connectWS();
    if (ident) refreshOrders();
  }

  function setAdmin(ident) {
    state.admin = ident;
    store("seckill.admin", ident);
    state.stats.clear();
    $("#stats").replaceChildren();
    renderIdentity();
    renderOperator();
  }

  async function devToken(prefix, role) {
    const { data } = await api("POST", "/v1/dev/token", { body: { user_id: `${prefix}-${randomID()}`, role } });
    return { token: data.token, user_id: data.user_id, role: data.role };
  }

  async function newBuyer(btn) {
    btn.disabled = true;
    try {
      const ident = await devToken("buyer", "buyer");
      clearMessage();
      setBuyer(ident);
      showMessage("info", "", `You are now ${ident.user_id}.`);
    } catch (e) {
      showError(e);
    } finally {
      btn.disabled = false;
    }
  }

  async function becomeAdmin(btn) {
    btn.disabled = true;
    try {
      const ident = await devToken("operator", "admin");
      clearMessage();
      setAdmin(ident);
      setOperator(true);
      showMessage("info", "", `Operator view as ${ident.user_id}.`);
    } catch (e) {
      showError(e);
    } finally {
      btn.disabled = false;
    }
  }

  // signInWithToken takes a pasted token (servers without dev mode); its
  // payload says who it is for, the server checks it on every call.
  function signInWithToken(token) {
    token = token.trim();
    let claims = null;
    try {
      const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      claims = JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4)));
    } catch {
      claims = null;
    }
    if (!claims || typeof claims.sub !== "string") {
      showMessage("error", "BAD_TOKEN", "That does not look like a seckill token.");
      return;
    }
    const ident = { token, user_id: claims.sub, role: claims.role === "admin" ? "admin" : "buyer" };
    clearMessage();
    if (ident.role === "admin") {
      setAdmin(ident);
      setOperator(true);
    } else {
      setBuyer(ident);
    }
    showMessage("info", "", `Signed in as ${ident.user_id} (${ident.role}).`);
  }

  function renderIdentity() {
    const who = $("#whoami");
    if (state.buyer) {
      setText(who, `Buyer: ${state.buyer.user_id}`);
      setAttr(who, "data-user-id", state.buyer.user_id);
    } else {
      setText(who, state.info.dev_mode ? "Not signed in: click “New buyer”" : "Not signed in");
      setAttr(who, "data-user-id", "");
    }
    const adm = $("#whoami-admin");
    adm.hidden = !state.admin;
    setText(adm, state.admin ? `Operator: ${state.admin.user_id}` : "");
    setAttr(adm, "data-user-id", state.admin ? state.admin.user_id : "");
    $("#new-buyer").hidden = !state.info.dev_mode;
    $("#become-admin").hidden = !state.info.dev_mode || !!state.admin;
    $("#signin").hidden = state.info.dev_mode || (!!state.buyer && !!state.admin);
  }

  // ---- websocket ----------------------------------------------------------

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

  function connectWS() {
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

  // ---- orders -------------------------------------------------------------

  // applyOrder merges what we learnt about an order (a websocket event, an
  // API answer) into the list; via says where it came from.
  function applyOrder(o, via) {
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

  async function refreshOrders() {
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

  async function orderAction(kind, orderID, btn) {
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
      if (status === 202) {
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

  function renderOrders() {
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
      setText(n.amount, cents != null ? money(cents) : "");
      setText(n.meta, `Order ${id} · ${clock(o.at)}`);
      setText(n.reason, o.reason ? `· ${o.reason}` : "");
      const line = lineText(o);
      setText(n.line, line);
      n.line.hidden = !line;
      const rank = RANK[o.status];
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

  // ---- sales --------------------------------------------------------------

  // refreshSales polls now (after a purchase, a payment, a new sale) rather
  // than at the next tick.
  function refreshSales() {
    if (state.salesInFlight) {
      state.salesAgain = true;
      return;
    }
    clearTimeout(state.salesTimer);
    pollSales();
  }

  async function pollSales() {
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
        renderOrders(); // sale names and prices
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
  function saleState(s, now) {
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
    renderStatsCards();
  }

  // tick redraws what moves with the clock: countdowns, states, buttons.
  function tick() {
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
      setText(n.price, money(s.price_cents));
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

  async function buy(saleID) {
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

  // ---- operator view ------------------------------------------------------

  function setOperator(on) {
    state.operator = on;
    sessionStorage.setItem("seckill.operator", on ? "1" : "0");
    renderOperator();
  }

  function renderOperator() {
    const on = state.operator;
    $("#operator").hidden = !on;
    document.body.classList.toggle("with-operator", on);
    setAttr($("#operator-toggle"), "aria-pressed", on ? "true" : "false");
    $("#operator-need-admin").hidden = !!state.admin;
    $("#create-sale").hidden = !state.admin;
    renderStatsCards();
  }

  // statsSales are the sales the operator view follows: running, upcoming
  // or ended in the last ten minutes, newest first.
  function statsSales() {
    const now = Date.now();
    return state.saleIDs.filter((id) => {
      const s = state.sales.get(id);
      return s && (!(now >= s.ends) || now - s.ends < 10 * 60 * 1000);
    }).slice(0, MAX_STATS_SALES);
  }

  async function pollStats() {
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

  function renderStatsCards() {
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

  function drawChart(canvas, rates) {
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(120, Math.round(canvas.clientWidth || 300));
    const h = Math.max(60, Math.round(canvas.clientHeight || 80));
    if (canvas.width !== w * dpr || canvas.height !== h * dpr) {
      canvas.width = w * dpr;
      canvas.height = h * dpr;
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const css = getComputedStyle(canvas);
    const fg = css.getPropertyValue("--chart-fg").trim() || "#e4572e";
    const grid = css.getPropertyValue("--chart-grid").trim() || "rgba(128,128,128,.3)";
    const text = css.getPropertyValue("--chart-text").trim() || "#888";
    const top = Math.max(1, ...rates);
    // A round ceiling: 1, 2, 5, 10, 20, 50…
    let ceil = 1;
    while (ceil < top) ceil = [2, 5, 10].map((m) => m * 10 ** Math.floor(Math.log10(ceil))).find((c) => c > ceil) || ceil * 10;
    const padL = 4, padB = 4, padT = 14;
    const plotH = h - padB - padT;
    ctx.strokeStyle = grid;
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(0, h - padB + 0.5);
    ctx.lineTo(w, h - padB + 0.5);
    ctx.moveTo(0, padT + 0.5);
    ctx.lineTo(w, padT + 0.5);
    ctx.stroke();
    ctx.fillStyle = text;
    ctx.font = "10px system-ui, sans-serif";
    ctx.textBaseline = "top";
    ctx.fillText(`${ceil}/s`, padL, 1);
    const slot = (w - padL) / CHART_POINTS;
    ctx.fillStyle = fg;
    rates.forEach((r, i) => {
      const x = padL + (CHART_POINTS - rates.length + i) * slot;
      const bh = Math.round((r / ceil) * plotH);
      if (bh > 0) ctx.fillRect(x + 0.5, h - padB - bh, Math.max(1, slot - 1), bh);
    });
  }

  // ---- a sale's orders, for the operator ---------------------------------

  // saleOrdersNode is the orders section of a sale's card: the sale's
  // orders a page at a time (GET /v1/sales/{id}/orders, following the Link
  // header), filtered by status, and the CSV export.
  function saleOrdersNode(id) {
    const o = { id, next: "", loaded: false, seq: 0 };
    o.filter = el("select", { "aria-label": "Status of the orders listed", "data-sale-id": id, class: "orders-filter" },
      el("option", { value: "", text: "All statuses" }),
      ...STATUS_ORDER.map((st) => el("option", { value: st, text: STATUS_COUNT_LABEL[st] || st })));
    o.filter.addEventListener("change", () => loadSaleOrders(id, false));
    o.show = el("button", { type: "button", class: "secondary", "data-action": "sale-orders", "data-sale-id": id, text: "List orders" });
    o.csv = el("button", { type: "button", class: "secondary", "data-action": "export-csv", "data-sale-id": id, text: "Download CSV" });
    o.list = el("ul", { class: "sale-orders" });
    o.more = el("button", { type: "button", class: "secondary", "data-action": "more-orders", "data-sale-id": id, text: "More", hidden: true });
    o.note = el("p", { class: "muted sale-orders-note" });
    o.box = el("section", { class: "sale-orders-box", "data-sale-orders": id, "data-rows": "0" },
      el("div", { class: "sale-controls" }, o.show, o.filter, o.csv), o.list, o.more, o.note);
    return o;
  }

  function ordersSection(id) {
    const n = statNodes.get(id);
    return n && n.orders;
  }

  // loadSaleOrders lists the first page (more: the next page) of a sale's
  // orders under the card's filter.
  async function loadSaleOrders(id, more) {
    const o = ordersSection(id);
    const ident = state.admin;
    if (!o || !ident) return;
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
      el("span", { class: "sale-order-text", text: ` ${ord.id} · ${ord.user_id} · ${money(ord.amount_cents)} · admitted ${clock(parseTime(ord.admitted_at))}${paid} ` }),
      link ? el("a", { href: link, target: "_blank", rel: "noopener", class: "workflow-link", text: "workflow" }) : null);
  }

  // exportCSV downloads the sale's orders under the card's filter as CSV:
  // fetched with the admin's token (a plain link could not send it), then
  // saved from a blob.
  async function exportCSV(id, btn) {
    const o = ordersSection(id);
    const ident = state.admin;
    if (!o || !ident) return;
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

  // operatorAction ends a sale, adds units to it or cancels it.
  async function operatorAction(kind, saleID) {
    const ident = state.admin;
    if (!ident || !saleID) return;
    const key = `op:${saleID}`;
    if (state.busy.has(key)) return;
    const path = `/v1/sales/${encodeURIComponent(saleID)}`;
    let req;
    if (kind === "add-units") {
      const n = statNodes.get(saleID);
      const units = Math.round(Number(n && n.units.value));
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

  async function createSale(form) {
    const ident = state.admin;
    if (!ident) return;
    const f = new FormData(form);
    const startsIn = Math.max(0, Number(f.get("starts_in")) || 0);
    const minutes = Math.max(1, Number(f.get("duration")) || 60);
    const starts = new Date(Date.now() + startsIn * 1000);
    starts.setMilliseconds(0);
    const body = {
      name: String(f.get("name") || "").trim(),
      price_cents: Math.round(Number(f.get("price")) * 100),
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

  // ---- wiring -------------------------------------------------------------

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
      case "sale-orders": loadSaleOrders(btn.getAttribute("data-sale-id"), false); break;
      case "more-orders": loadSaleOrders(btn.getAttribute("data-sale-id"), true); break;
      case "export-csv": exportCSV(btn.getAttribute("data-sale-id"), btn); break;
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
    const ui = safeBaseURL(state.info.temporal_ui_url || "");
    if (ui) {
      $("#temporal-ui").href = `${ui}/namespaces/${encodeURIComponent(state.info.temporal_namespace || "default")}/workflows`;
      $("#temporal-ui").hidden = false;
    }
    document.body.setAttribute("data-dev-mode", state.info.dev_mode ? "true" : "false");
    renderIdentity();
    renderOperator();
    renderOrders();
    connectWS();
    refreshOrders();
    pollSales();
    pollStats();
    setInterval(tick, TICK_MS);
    document.body.setAttribute("data-ready", "true");
  }

  init();
})();
