// Links into the Temporal Web UI, from the address and namespace /v1/info
// gives; "" when it gives no UI.

import { safeBaseURL } from "./format.js";
import { state } from "./state.js";

// workflowsURL is the namespace's list of workflows.
export function workflowsURL() {
  const base = safeBaseURL(state.info.temporal_ui_url || "");
  if (!base) return "";
  const ns = state.info.temporal_namespace || "default";
  return `${base}/namespaces/${encodeURIComponent(ns)}/workflows`;
}

// workflowURL is an order's workflow, whose id is "order-" and the order's.
export function workflowURL(orderID) {
  const list = workflowsURL();
  return list ? `${list}/${encodeURIComponent("order-" + orderID)}` : "";
}
