package main

import (
	"bufio"
	"context"
	"os"
	"time"

	"github.com/seckill/seckill/client"
)

// ExportCmd writes a sale's orders to standard output as CSV or NDJSON:
// the command-line twin of GET /v1/sales/{id}/orders/export, for
// fulfilment (`seckill export --sale N --status PAID > paid.csv`).
type ExportCmd struct {
	API    string    `name:"api" env:"SECKILL_API" default:"http://127.0.0.1:8080" help:"Base URL of the api."`
	Token  string    `name:"token" env:"SECKILL_TOKEN,ADMIN_TOKEN" required:"" help:"An admin's bearer token (seckill token --role admin; seckill dev prints one as ADMIN_TOKEN)."`
	Sale   string    `name:"sale" required:"" help:"The sale's id."`
	Status string    `name:"status" enum:",PENDING,AWAITING_PAYMENT,PAID,CANCELLED,EXPIRED,FAILED,REFUNDED,REFUNDED_RESTOCKED" default:"" help:"Only the orders of this status (empty: all)."`
	Since  time.Time `name:"since" help:"Only the orders admitted at or after this instant (RFC 3339)."`
	Until  time.Time `name:"until" help:"Only the orders admitted before this instant (RFC 3339)."`
	Format string    `name:"format" enum:"csv,ndjson" default:"csv" help:"csv or ndjson."`
}

func (c *ExportCmd) Run(ctx context.Context) error {
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	q := client.SaleOrdersQuery{Status: c.Status, Since: c.Since, Until: c.Until}
	if err := client.New(c.API, c.Token, nil).ExportSaleOrders(ctx, c.Sale, q, c.Format, out); err != nil {
		out.Flush()
		return err
	}
	return out.Flush()
}
