package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// HealthcheckCmd probes a URL and exits 0 on 200: for container
// healthchecks in images without curl.
type HealthcheckCmd struct {
	URL     string        `name:"url" default:"http://127.0.0.1:8080/readyz" help:"URL to probe."`
	Timeout time.Duration `name:"timeout" default:"3s" help:"How long to wait."`
}

func (c *HealthcheckCmd) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", c.URL, resp.StatusCode)
	}
	return nil
}
