// Who is signed in: the buyer and the admin of this tab, and the top bar
// that names them.

import { $, setAttr, setText } from "./dom.js";
import { state, store } from "./state.js";

// What follows a change of identity is the views' business (the orders, the
// websocket, the operator's cards), and they import this module: the entry
// module says what, so no import points back up at them.
let afterBuyer = () => {};
let afterAdmin = () => {};

// onIdentityChange sets what follows setBuyer (changed: another user than
// before, or none) and setAdmin.
export function onIdentityChange(buyer, admin) {
  afterBuyer = buyer;
  afterAdmin = admin;
}

export function setBuyer(ident) {
  const changed = (ident && ident.user_id) !== (state.buyer && state.buyer.user_id);
  state.buyer = ident;
  store("seckill.buyer", ident);
  afterBuyer(ident, changed);
}

export function setAdmin(ident) {
  state.admin = ident;
  store("seckill.admin", ident);
  afterAdmin(ident);
}

export function renderIdentity() {
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
