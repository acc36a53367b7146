// Package contract holds seckill's contract test: the API as the clients
// people generate from its OpenAPI document see it. The test runs the
// built binary (seckill serve and seckill worker) against real Postgres,
// Redis and Temporal, checks that it serves the committed documents of
// api/openapi, lints them with Redocly CLI's recommended rules, and
// generates, compiles and runs two clients against it: Go with oapi-codegen
// (module go/, the generator pinned as a tool in go/go.mod) and TypeScript
// with openapi-typescript and openapi-fetch (ts/, pinned by
// ts/package-lock.json). Each runs the same journey: create a sale, buy,
// buy again, read the order until it awaits payment, pay it, list orders.
package contract
