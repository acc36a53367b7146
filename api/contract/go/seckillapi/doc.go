// Package seckillapi is the Go client oapi-codegen generates from the
// committed document api/openapi/openapi-3.0.json, with the generator's
// defaults, as a team that consumes the API would generate it. The contract
// test (api/contract) generates it afresh on every run: only this file is
// committed.
package seckillapi

//go:generate go tool oapi-codegen -generate types,client -package seckillapi -o seckillapi.gen.go ../../../openapi/openapi-3.0.json
