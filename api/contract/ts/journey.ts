// A buyer's journey through the TypeScript client generated from
// api/openapi/openapi.json (openapi-typescript's types, called through
// openapi-fetch), against a running seckill: an admin creates a sale; a
// buyer buys (202), buys again (409 ALREADY_PURCHASED with the order's id,
// read from the typed problem), reads the order until it awaits payment,
// pays it (on the provider's hosted page when pay answers with one, as the
// buyer's browser would) and lists their orders. Every id it sends is one
// it read from an answer, passed on as is: the types allow no cast, and
// none is needed.
// It exits 1 at the first answer that is not the documented one.
//
//	SECKILL_URL=http://127.0.0.1:8080 ADMIN_TOKEN=... BUYER_TOKEN=... node build/journey.js

import createClient from "openapi-fetch";
import type { components, paths } from "./generated/seckill.js";

type Order = components["schemas"]["Order"];
type Problem = components["schemas"]["Problem"];

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

function fail(what: string, response: Response, body: unknown): never {
  throw new Error(`${what}: unexpected answer ${response.status} ${JSON.stringify(body)}`);
}

const base = env("SECKILL_URL");
const as = (token: string) => createClient<paths>({ baseUrl: base, headers: { Authorization: `Bearer ${token}` } });
const admin = as(env("ADMIN_TOKEN"));
const buyer = as(env("BUYER_TOKEN"));
const anyone = createClient<paths>({ baseUrl: base });

async function journey(deadline: number): Promise<void> {
  const now = Date.now();
  const created = await admin.POST("/v1/sales", {
    body: {
      name: "contract (ts)",
      price_cents: 1999,
      stock: 5,
      starts_at: new Date(now - 1000).toISOString(),
      ends_at: new Date(now + 3600_000).toISOString(),
    },
  });
  if (!created.data) fail("create sale", created.response, created.error);
  const sale = created.data;
  if (created.response.status !== 201 || sale.state !== "active" || sale.remaining !== 5) {
    fail("create sale", created.response, sale);
  }

  // Public: no token needed, and the id from the body goes into the path.
  const got = await anyone.GET("/v1/sales/{id}", { params: { path: { id: sale.id } } });
  if (!got.data || got.data.id !== sale.id) fail("get sale", got.response, got.data ?? got.error);

  const bought = await buyer.POST("/v1/sales/{id}/orders", { params: { path: { id: sale.id } } });
  if (!bought.data) fail("purchase", bought.response, bought.error);
  if (bought.response.status !== 202 || bought.data.status !== "PENDING") fail("purchase", bought.response, bought.data);
  const orderID: string = bought.data.order_id;

  const again = await buyer.POST("/v1/sales/{id}/orders", { params: { path: { id: sale.id } } });
  const problem: Problem | undefined = again.error;
  if (again.response.status !== 409 || !problem || problem.code !== "ALREADY_PURCHASED" || problem.order_id !== orderID) {
    fail("second purchase", again.response, again.error ?? again.data);
  }

  // The order's workflow takes it to AWAITING_PAYMENT; read it until then.
  let order: Order | undefined;
  while (order?.status !== "AWAITING_PAYMENT") {
    if (Date.now() > deadline) throw new Error(`order ${orderID} never awaited payment (last ${JSON.stringify(order)})`);
    const r = await buyer.GET("/v1/orders/{id}", { params: { path: { id: orderID } } });
    if (!r.data) fail("get order", r.response, r.error);
    order = r.data;
    if (order.id !== orderID || order.sale_id !== sale.id) fail("get order", r.response, order);
    if (order.status !== "PENDING" && order.status !== "AWAITING_PAYMENT") fail("get order", r.response, order);
    await new Promise((resolve) => setTimeout(resolve, 50)); // between reads: the loop's exit is the order's status
  }

  const paid = await buyer.POST("/v1/orders/{id}/pay", { params: { path: { id: orderID } } });
  if (!paid.data) fail("pay", paid.response, paid.error);
  order = paid.data;
  // 202 with a payment: the buyer pays at the provider. Without one: the
  // payment was decided and is not recorded within the server's wait yet.
  if (paid.response.status === 202 && order.payment) {
    const pay = order.payment;
    if (!pay.redirect_url) throw new Error(`pay answered payment ${pay.id} at ${pay.provider} without a page to pay on`);
    await payOnPage(pay.redirect_url);
    console.log(`ts journey: paid order ${orderID} on the ${pay.provider} provider's page`);
  }
  while (paid.response.status === 202 && order.status !== "PAID") {
    if (Date.now() > deadline) throw new Error(`order ${orderID} accepted its payment but never became PAID`);
    await new Promise((resolve) => setTimeout(resolve, 50)); // between reads: the loop's exit is the order's status
    const r = await buyer.GET("/v1/orders/{id}", { params: { path: { id: orderID } } });
    if (!r.data) fail("get order", r.response, r.error);
    order = r.data;
  }
  if (order.status !== "PAID") fail("pay", paid.response, order);

  const list = await buyer.GET("/v1/orders", { params: { query: { limit: 10 } } });
  if (!list.data) fail("list orders", list.response, list.error);
  if (!list.data.some((o) => o.id === orderID && o.status === "PAID")) fail("list orders", list.response, list.data);

  // An order that is not the buyer's is not found, as a typed problem.
  const none = await buyer.GET("/v1/orders/{id}", { params: { path: { id: "1" } } });
  if (none.response.status !== 404 || none.error?.code !== "NOT_FOUND") {
    fail("unknown order", none.response, none.error ?? none.data);
  }
}

journey(Date.now() + 180_000).then(
  () => console.log("ts journey: ok"),
  (err: unknown) => {
    console.error("ts journey:", err instanceof Error ? err.message : err);
    process.exit(1);
  },
);

// payOnPage pays as the buyer's browser would on the provider's hosted
// page: read it, then submit its Pay button with the form's token (the page
// guards its form against cross-site posts). The provider sends the buyer
// back to the shop (303) and notifies seckill, whose workflow makes the
// order PAID.
async function payOnPage(page: string): Promise<void> {
  const got = await fetch(page, { redirect: "manual" });
  const token = /name="token" value="([^"]+)"/.exec(await got.text())?.[1];
  if (got.status !== 200 || !token) throw new Error(`GET ${page}: ${got.status}, no payment form`);
  const sent = await fetch(page, {
    method: "POST",
    redirect: "manual",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ token: unescapeHTML(token), action: "pay" }).toString(),
  });
  if (sent.status !== 303) throw new Error(`submit Pay on ${page}: ${sent.status}, want 303 back to the shop`);
}

function unescapeHTML(s: string): string {
  return s.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n))).replace(/&quot;/g, '"').replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}
