// The page's state, one object every module reads and writes: what the
// server said about itself, the sales, the buyer's orders, who is signed in
// (kept in sessionStorage, so a reload keeps the tab's identity).

export const state = {
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

function load(key) {
  try {
    const v = JSON.parse(sessionStorage.getItem(key) || "null");
    return v && typeof v.token === "string" && typeof v.user_id === "string" ? v : null;
  } catch {
    return null;
  }
}

export function store(key, value) {
  if (value) sessionStorage.setItem(key, JSON.stringify(value));
  else sessionStorage.removeItem(key);
}
