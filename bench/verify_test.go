package bench

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/seckill/seckill/auth"
)

// A 404 to the buyer is a lost 202; an answer is not; a server that keeps
// failing makes the check an error, not a pass.
func TestVerifyAccepted(t *testing.T) {
	signer, err := auth.NewSigner("verify-secret-verify-secret-verify-secret")
	if err != nil {
		t.Fatal(err)
	}
	gone := map[string]bool{"/v1/orders/13": true, "/v1/orders/7": true}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/orders/99":
			w.WriteHeader(http.StatusInternalServerError)
		case gone[r.URL.Path]:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"status":404,"code":"NOT_FOUND"}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"id":"` + strings.TrimPrefix(r.URL.Path, "/v1/orders/") + `","status":"PENDING"}`))
		}
	}))
	defer srv.Close()
	list := []Accepted{{"1", "5", "a"}, {"1", "7", "b"}, {"1", "13", "c"}, {"1", "21", "d"}}
	lost, err := VerifyAccepted(context.Background(), srv.URL, signer, list, 3)
	if err != nil || lost.Checked != 4 || lost.Lost != 2 || !slices.Equal(lost.Sample, []string{"13", "7"}) {
		t.Fatalf("%+v %v; want 4 checked, 13 and 7 lost", lost, err)
	}
	if _, err := VerifyAccepted(context.Background(), srv.URL, signer, []Accepted{{"1", "99", "e"}}, 1); err == nil {
		t.Fatal("a server that fails every read passed the check")
	}

	var b bytes.Buffer
	if err := WriteAccepted(&b, list); err != nil {
		t.Fatal(err)
	}
	back, err := ReadAccepted(&b)
	if err != nil || !slices.Equal(back, list) {
		t.Fatalf("round trip: %v %v", back, err)
	}
	if _, err := ReadAccepted(strings.NewReader(`{"sale_id":"1","order_id":"5"}`)); err == nil {
		t.Fatal("an entry without its buyer was read")
	}
}
