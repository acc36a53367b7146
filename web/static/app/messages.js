// The message bar: an API error in words for a human, and the page's own
// notices.

import { $ } from "./dom.js";
import { setAdmin, setBuyer } from "./session.js";
import { state } from "./state.js";

// describe turns an API error into a sentence for a human.
export function describe(err, who) {
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

export function showMessage(kind, code, text) {
  const m = $("#message");
  state.messageSeq += 1;
  m.setAttribute("data-kind", kind);
  m.setAttribute("data-code", code || "");
  m.setAttribute("data-seq", String(state.messageSeq));
  $(".message-text", m).textContent = text;
  m.hidden = false;
}

export function showError(err, who) {
  showMessage("error", err.code, describe(err, who));
  if (err.code === "UNAUTHORIZED") {
    // The stored token is no good (expired, or the server's secret
    // changed): forget it.
    if (who === "admin") setAdmin(null);
    else if (who === "buyer") setBuyer(null);
  }
}

export function clearMessage() {
  const m = $("#message");
  m.hidden = true;
  m.setAttribute("data-code", "");
  m.setAttribute("data-kind", "");
  $(".message-text", m).textContent = "";
}
