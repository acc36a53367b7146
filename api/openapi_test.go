package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/speakeasy-api/openapi/openapi"
)

func TestOpenAPIDocument(t *testing.T) {
	s := start(t, options{})
	r := s.do("GET", "/openapi.json", "", nil)
	if r.status != http.StatusOK {
		t.Fatalf("openapi.json: %d", r.status)
	}
	doc, verrs, err := openapi.Unmarshal(context.Background(), bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range verrs {
		t.Errorf("invalid OpenAPI: %v", e)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi version %q, want 3.1.0", doc.OpenAPI)
	}

	var spec struct {
		Paths map[string]map[string]struct {
			OperationID string                     `json:"operationId"`
			Responses   map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &spec); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{ // operation -> error statuses it must document
		"create-sale":  {"401", "403", "413", "422"},
		"list-sales":   {"422"},
		"get-sale":     {"404"},
		"sale-stats":   {"401", "403", "404"},
		"purchase":     {"401", "404", "409", "429", "503"},
		"get-order":    {"401", "404"},
		"list-orders":  {"401"},
		"pay-order":    {"401", "404", "409", "503"},
		"cancel-order": {"401", "404", "409", "503"},
		"end-sale":     {"401", "403", "404", "503"},
		"add-units":    {"401", "403", "404", "409", "422", "503"},
		"cancel-sale":  {"401", "403", "404", "503"},
		"healthz":      nil,
		"readyz":       {"503"},
	}
	seen := map[string]bool{}
	for _, methods := range spec.Paths {
		for _, op := range methods {
			seen[op.OperationID] = true
			for _, code := range want[op.OperationID] {
				resp, ok := op.Responses[code]
				if !ok {
					t.Errorf("%s does not document %s", op.OperationID, code)
					continue
				}
				if code != "503" || op.OperationID != "readyz" {
					if !bytes.Contains(resp, []byte("application/problem+json")) {
						t.Errorf("%s %s is not problem+json: %s", op.OperationID, code, resp)
					}
				}
			}
		}
	}
	for op := range want {
		if !seen[op] {
			t.Errorf("operation %s missing from the document", op)
		}
	}
	if !bytes.Contains(r.body, []byte(`"code"`)) {
		t.Error("the error schema lacks the code field")
	}

	// A PENDING order's place in line is documented, and optional.
	var schemas struct {
		Components struct {
			Schemas map[string]struct {
				Required   []string `json:"required"`
				Properties map[string]struct {
					Type        any    `json:"type"`
					Description string `json:"description"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.body, &schemas); err != nil {
		t.Fatal(err)
	}
	order := schemas.Components.Schemas["Order"]
	for _, field := range []string{"queue_position", "eta_seconds"} {
		if p, ok := order.Properties[field]; !ok || p.Description == "" || p.Type != "integer" {
			t.Errorf("Order.%s: %+v (present %v), want a documented integer", field, p, ok)
		}
		if slices.Contains(order.Required, field) {
			t.Errorf("Order.%s is required; it is absent unless the order waits in line", field)
		}
	}
}
