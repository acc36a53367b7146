package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestHandlerServesTheFiles(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/", "text/html; charset=utf-8", `<script type="module" src="app.js">`},
		{"/index.html", "text/html; charset=utf-8", "<!doctype html>"},
		{"/app.js", "text/javascript; charset=utf-8", `from "./app/live.js"`},
		{"/app/live.js", "text/javascript; charset=utf-8", "new WebSocket("},
		{"/style.css", "text/css; charset=utf-8", "@media (max-width: 600px)"},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", tc.path, resp.StatusCode)
		}
		if got := resp.Header.Get("Content-Type"); got != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.ctype)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q", tc.path, got)
		}
		if !strings.Contains(string(b), tc.contains) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
		}
		// A revalidation with the ETag costs no body.
		req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
		req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
		resp2, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp2.Body.Close()
		if resp2.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", tc.path, resp2.StatusCode)
		}
	}
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("index has CSP %q", csp)
	}
	for _, p := range []string{"/nope", "/static/app.js", "/../web.go", "/v2/"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
}

// pageScripts are the embedded scripts of the demo page (the API
// reference's renderer under docs/ is vendored, not ours).
func pageScripts() []string {
	var out []string
	for name := range assets {
		if strings.HasSuffix(name, ".js") && !strings.HasPrefix(name, "docs/") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// The page never parses server text as HTML, loads nothing from elsewhere
// and has no inline script or style (the CSP forbids them).
func TestPageIsSelfContainedAndEscapes(t *testing.T) {
	scripts := pageScripts()
	if len(scripts) < 2 {
		t.Fatalf("the page's scripts: %v", scripts)
	}
	for _, name := range scripts {
		js := string(assets[name].body)
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			if strings.Contains(js, bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
	}
	html := string(assets["index.html"].body)
	if regexp.MustCompile(`(?i)<script>|<style|\sstyle=|\son[a-z]+=`).MatchString(html) {
		t.Error("index.html has inline script, style or event handlers")
	}
	for name, a := range assets {
		if regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).Match(a.body) || strings.Contains(string(a.body), "@import url(http") {
			t.Errorf("%s loads something from another origin", name)
		}
	}
}

// /docs is the API reference with its renderer served from here: it names
// no other origin (huma's own page loaded Stoplight Elements from a CDN
// and was blank offline), and runs under a CSP of its own.
func TestDocsAreServedFromTheBinary(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/docs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<elements-api") {
		t.Fatalf("GET /docs: %d\n%s", resp.StatusCode, body)
	}
	if regexp.MustCompile(`https?://`).Match(body) {
		t.Errorf("/docs names another origin:\n%s", body)
	}
	if got := resp.Header.Get("Content-Security-Policy"); got != docsCSP {
		t.Errorf("/docs CSP %q, want %q", got, docsCSP)
	}
	for _, src := range regexp.MustCompile(`(?:src|href)="(/docs/[^"]+)"`).FindAllStringSubmatch(string(body), -1) {
		r, err := http.Get(srv.URL + src[1])
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", src[1], r.StatusCode)
		}
	}
}

// A purchase answered UNCONFIRMED may have taken a unit: the page asks again
// with the same Idempotency-Key (e2e's TestDemoPage, step 4), and when it
// gives up its words never say that nothing changed, as they do for a plain
// UNAVAILABLE.
func TestPageNeverSaysNothingChangedOfAnUnconfirmedPurchase(t *testing.T) {
	if !strings.Contains(string(assets["app/buyer/buy.js"].body), `"Idempotency-Key": idempotencyKey()`) {
		t.Error("app/buyer/buy.js does not send a purchase's Idempotency-Key")
	}
	js := string(assets["app/messages.js"].body)
	text := func(code string) string {
		m := regexp.MustCompile(`(?s)\n    case "` + code + `":\n(.*?)\n    (case|default)`).FindStringSubmatch(js)
		if m == nil {
			t.Fatalf("describe() in app/messages.js has no case %s", code)
		}
		return m[1]
	}
	// A plain UNAVAILABLE changed nothing; a pay or cancel the workflow has
	// not confirmed is UNAVAILABLE too, and its detail says it may still
	// take effect: the page shows the detail rather than its own words.
	if s := text("UNAVAILABLE"); !strings.Contains(s, "Nothing was changed") || !strings.Contains(s, "${p.detail}") {
		t.Errorf("UNAVAILABLE must tell the api's detail, and say nothing changed only without one:\n%s", s)
	}
	s := text("UNCONFIRMED")
	if strings.Contains(strings.ToLower(s), "nothing was changed") || !strings.Contains(s, "not known whether you hold a unit") {
		t.Errorf("UNCONFIRMED must say the outcome is unknown, never that nothing changed:\n%s", s)
	}
}
