// Getting an identity: a dev token for a new buyer or an admin (dev mode),
// or a pasted token (a server without dev mode).

import { api } from "./api.js";
import { clearMessage, showError, showMessage } from "./messages.js";
import { setOperator } from "./operator/view.js";
import { setAdmin, setBuyer } from "./session.js";

function randomID() {
  const b = new Uint8Array(6);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => (x % 36).toString(36)).join("");
}

async function devToken(prefix, role) {
  const { data } = await api("POST", "/v1/dev/token", { body: { user_id: `${prefix}-${randomID()}`, role } });
  return { token: data.token, user_id: data.user_id, role: data.role };
}

export async function newBuyer(btn) {
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

export async function becomeAdmin(btn) {
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
export function signInWithToken(token) {
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
