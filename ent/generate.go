// Package ent holds seckill's database schema (ent/schema) and the code ent
// generates from it. Regenerate with `go generate ./ent`.
package ent

//go:generate go tool ent generate --feature sql/upsert,sql/execquery ./schema
