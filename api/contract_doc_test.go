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
	"strings"
	"testing"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/api"
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
