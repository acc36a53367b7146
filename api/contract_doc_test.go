package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/stock"
)

var update = flag.Bool("update", false, "rewrite the committed OpenAPI documents under api/openapi from the served ones")

// committed names the documents of api/openapi and the paths that serve them.
var committed = []struct{ file, path string }{
	{"openapi.json", "/openapi.json"},
	{"openapi-3.0.json", "/openapi-3.0.json"},
}

// offlineServer is the api of `seckill serve` (no dev tokens) built on
// clients that are never dialled: building it and serving its document
// needs no service, so the document cannot depend on a deployment.
func offlineServer(t *testing.T, cfg api.Config) *httptest.Server {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	tc, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	signer, err := auth.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(cfg, api.Deps{
		Stock: stock.New(rdb, redsync.New(goredis.NewPool(rdb))), Temporal: tc, Signer: signer, IDs: orderid.New(1),
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs
}

func fetch(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return b
}

// canonical is the committed form of a document: indented JSON, so that a
// change to the contract reads as a diff in review.
func canonical(t *testing.T, doc []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// TestCommittedDocument: the documents in api/openapi are the ones the api
// serves. A change to the API changes them in the same commit (go test
// ./api -run TestCommittedDocument -update), where review and the
// breaking-change check of .ci/run see it.
func TestCommittedDocument(t *testing.T) {
	hs := offlineServer(t, api.Config{})
	for _, c := range committed {
		served := canonical(t, fetch(t, hs.URL+c.path))
		file := filepath.Join("openapi", c.file)
		if *update {
			if err := os.WriteFile(file, served, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (create it with: go test ./api -run TestCommittedDocument -update)", err)
		}
		if !bytes.Equal(served, want) {
			t.Errorf("%s differs from the document served at %s: %s\nIf the change is meant, rewrite it with: go test ./api -run TestCommittedDocument -update",
				file, c.path, firstDifference(want, served))
		}
	}
}

// firstDifference shows the first line where two documents part.
func firstDifference(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range min(len(w), len(g)) {
		if w[i] != g[i] {
			return fmt.Sprintf("line %d: committed %q, served %q", i+1, w[i], g[i])
		}
	}
	return fmt.Sprintf("committed has %d lines, served %d", len(w), len(g))
}

// document is the parts of an OpenAPI document the tests below look at.
type document struct {
	Info struct {
		Contact *struct{ Name, URL string } `json:"contact"`
		License *struct{ Name string }      `json:"license"`
	} `json:"info"`
	Servers  []struct{ URL string } `json:"servers"`
	Security []map[string][]string  `json:"security"`
	Paths    map[string]map[string]struct {
		OperationID string                 `json:"operationId"`
		Security    *[]map[string][]string `json:"security"`
		Parameters  []struct {
			Name, In string
			Schema   struct{ Type, Pattern string }
		} `json:"parameters"`
		RequestBody *json.RawMessage `json:"requestBody"`
		Responses   map[string]struct {
			Content map[string]struct {
				Schema struct {
					Ref string `json:"$ref"`
				}
				Examples map[string]struct{ Value map[string]any }
			}
		} `json:"responses"`
	} `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]struct {
				Type    any
				Pattern string
				Enum    []string
			}
		} `json:"schemas"`
	} `json:"components"`
}

func committedDocument(t *testing.T) (document, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("openapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d document
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d, b
}

// pascal is the name generators derive from an operation id
// ("get-sale" -> "GetSale").
func pascal(id string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(id, func(r rune) bool { return r == '-' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// The committed document says what generated clients rely on
// (docs/design.md §6.5, "The OpenAPI contract").
func TestDocumentForGeneratedClients(t *testing.T) {
	d, raw := committedDocument(t)
	if d.Info.Contact == nil || d.Info.Contact.Name == "" || d.Info.License == nil || d.Info.License.Name == "" {
		t.Error("info lacks a contact or a licence")
	}
	if len(d.Servers) == 0 || !strings.HasPrefix(d.Servers[0].URL, "/") {
		t.Errorf("servers %+v, want a relative URL, the same for every deployment", d.Servers)
	}
	if len(d.Security) != 1 || d.Security[0]["bearer"] == nil {
		t.Errorf("global security %v, want bearer", d.Security)
	}
	// payment-notify is a provider's webhook: its signature, not a token,
	// authenticates it.
	publicOps := map[string]bool{"list-sales": true, "get-sale": true, "healthz": true, "readyz": true, "info": true, "payment-notify": true}
	seen := map[string]bool{}
	for path, methods := range d.Paths {
		for method, op := range methods {
			seen[op.OperationID] = true
			name := pascal(op.OperationID)
			for _, suffix := range []string{"Response", "Params", "JSONBody", "JSONRequestBody", "RequestBody"} {
				if _, ok := d.Components.Schemas[name+suffix]; ok {
					t.Errorf("schema %s%s collides with the name generators give operation %s", name, suffix, op.OperationID)
				}
			}
			switch {
			case op.Security == nil:
				t.Errorf("%s %s declares no security: say bearer, or public with security: []", method, path)
			case publicOps[op.OperationID] != (len(*op.Security) == 0):
				t.Errorf("%s: security %v, public %v", op.OperationID, *op.Security, publicOps[op.OperationID])
			}
			for _, p := range op.Parameters {
				isID := p.Name == "id" || strings.HasSuffix(p.Name, "_id")
				if p.In == "path" && isID && (p.Schema.Type != "string" || p.Schema.Pattern != "^[0-9]+$") {
					t.Errorf("%s: path parameter %s is %+v, want a string of digits like the ids in bodies", op.OperationID, p.Name, p.Schema)
				}
			}
			if _, ok := op.Responses["500"]; !ok {
				t.Errorf("%s does not document 500", op.OperationID)
			}
			if len(op.Parameters) > 0 || op.RequestBody != nil {
				if _, ok := op.Responses["422"]; !ok {
					t.Errorf("%s takes input but does not document 422", op.OperationID)
				}
			}
			if op.Security == nil || len(*op.Security) > 0 {
				if _, ok := op.Responses["401"]; !ok {
					t.Errorf("%s needs a token but does not document 401", op.OperationID)
				}
			}
			for status, r := range op.Responses {
				if status < "400" || (op.OperationID == "readyz" && status == "503") {
					continue
				}
				mt, ok := r.Content["application/problem+json"]
				if !ok || mt.Schema.Ref != "#/components/schemas/Problem" || len(mt.Examples) == 0 {
					t.Errorf("%s %s: %+v, want a problem with examples", op.OperationID, status, r.Content)
					continue
				}
				for name, ex := range mt.Examples {
					if fmt.Sprint(ex.Value["status"]) != status || !slices.Contains(wire.Codes, fmt.Sprint(ex.Value["code"])) {
						t.Errorf("%s %s: example %s is %v", op.OperationID, status, name, ex.Value)
					}
				}
			}
		}
	}
	for op := range publicOps {
		if !seen[op] {
			t.Errorf("operation %s is missing", op)
		}
	}

	// Ids are strings of digits in every body (but a payment provider's
	// ids, which are the provider's strings); the codes are an enum.
	for name, s := range d.Components.Schemas {
		for prop, p := range s.Properties {
			providers := prop == "payment_id" || (name == "PaymentAction" && prop == "id")
			if (prop == "id" || strings.HasSuffix(prop, "_id")) && prop != "user_id" && prop != "workflow_id" && !providers {
				if p.Type != "string" || p.Pattern != "^[0-9]+$" {
					t.Errorf("%s.%s is %v %q, want a string of digits", name, prop, p.Type, p.Pattern)
				}
			}
		}
	}
	if got := d.Components.Schemas["Problem"].Properties["code"].Enum; !slices.Equal(got, wire.Codes) {
		t.Errorf("Problem.code enum %v, want wire.Codes %v", got, wire.Codes)
	}

	// Descriptions are written for the API's users: no Go identifiers or
	// server flags.
	if m := regexp.MustCompile(`\b[a-z]+\.[A-Z][A-Za-z]+\b|--[a-z][a-z-]+`).Find(raw); m != nil {
		t.Errorf("the document names an internal: %q", m)
	}
}

// seckill dev serves the same document plus its dev-token operation
// (docs/design.md, "The OpenAPI contract").
func TestDevDocument(t *testing.T) {
	var dev, serve map[string]any
	if err := json.Unmarshal(fetch(t, offlineServer(t, api.Config{DevTokens: true}).URL+"/openapi.json"), &dev); err != nil {
		t.Fatal(err)
	}
	_, raw := committedDocument(t)
	if err := json.Unmarshal(raw, &serve); err != nil {
		t.Fatal(err)
	}
	paths := dev["paths"].(map[string]any)
	if _, ok := paths["/v1/dev/token"]; !ok {
		t.Fatal("dev mode does not document POST /v1/dev/token")
	}
	delete(paths, "/v1/dev/token")
	schemas := dev["components"].(map[string]any)["schemas"].(map[string]any)
	for _, name := range []string{"DevToken", "DevTokenBody"} {
		if _, ok := schemas[name]; !ok {
			t.Errorf("dev mode lacks schema %s", name)
		}
		delete(schemas, name)
	}
	a, _ := json.Marshal(dev)
	b, _ := json.Marshal(serve)
	if !bytes.Equal(a, b) {
		t.Errorf("dev mode's document differs from the committed one by more than its dev-token operation: %s", firstDifference(canonical(t, b), canonical(t, a)))
	}
}
