package bench

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// Alternating pairs run this bench against builds from before the probe
// took keep: their api refuses the field (422), and the probe is asked
// again without it, its workflows then theirs to keep.
func TestEngineProbeOfAnAPIFromBeforeKeep(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"keep"`) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"status":422,"title":"Unprocessable Entity","detail":"validation failed","code":"VALIDATION_FAILED","errors":[{"message":"unexpected property","location":"body.keep"}]}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"workflows": 10, "seconds": 1, "workflows_per_second": 10, "starts_seconds": 0.5, "relays": []string{"r"}})
	}))
	defer srv.Close()
	e, err := newTarget(srv.URL, 1).engineCeiling(context.Background(), Options{EngineWorkflows: 10}, "token")
	if err != nil || !e.Legacy || e.Workflows != 10 || calls.Load() != 2 {
		t.Fatalf("probe of an old api: %+v %v after %d calls; want it measured without keep, on the second call", e, err, calls.Load())
	}
}
