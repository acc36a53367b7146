package web

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
)

var (
	moduleScript = regexp.MustCompile(`<script type="module" src="([^"]+)"></script>`)
	// Static imports and re-exports: `import {…} from "…"`, `import "…"`,
	// `export {…} from "…"`. The page has no dynamic import(), so these are
	// every file the browser fetches for it.
	importFrom    = regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^"';]*?\bfrom\s*["']([^"']+)["']`)
	importBare    = regexp.MustCompile(`(?m)^\s*import\s*["']([^"']+)["']`)
	importDynamic = regexp.MustCompile(`\bimport\s*\(`)
)

// The browser loads the page's script as ES modules, following each
// import: every module it reaches must be served, with a JavaScript type (a
// browser refuses a module of any other), and every script file we keep
// must be one of them. A module left out of the embed, or a file beside the
// others that nothing imports, fails here rather than as a blank page.
func TestPageModulesAreServed(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	get := func(u *url.URL) (string, string) {
		t.Helper()
		resp, err := http.Get(u.String())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d, want 200", u.Path, resp.StatusCode)
		}
		return string(b), resp.Header.Get("Content-Type")
	}
	base, err := url.Parse(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := get(base)
	entries := moduleScript.FindAllStringSubmatch(page, -1)
	if len(entries) != 1 {
		t.Fatalf("the page has %d module scripts, want its one entry:\n%s", len(entries), page)
	}

	seen := map[string]bool{}
	queue := []*url.URL{base.ResolveReference(&url.URL{Path: entries[0][1]})}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		if seen[u.Path] {
			continue
		}
		seen[u.Path] = true
		js, ctype := get(u)
		if ctype != "text/javascript; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q, want text/javascript", u.Path, ctype)
		}
		if importDynamic.MatchString(js) {
			t.Errorf("%s imports dynamically: this test would not see what it loads", u.Path)
		}
		var specs []string
		for _, re := range []*regexp.Regexp{importFrom, importBare} {
			for _, m := range re.FindAllStringSubmatch(js, -1) {
				specs = append(specs, m[1])
			}
		}
		for _, spec := range specs {
			// No bare names: without a bundler or an import map, the
			// browser resolves only paths; and nothing from another origin.
			if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") || !strings.HasSuffix(spec, ".js") {
				t.Errorf("%s imports %q: want a relative path to a .js file", u.Path, spec)
				continue
			}
			queue = append(queue, u.ResolveReference(&url.URL{Path: spec}))
		}
	}

	// Every script on disk (web/static, the vendored docs aside) is reached.
	var onDisk []string
	err = fs.WalkDir(os.DirFS("static"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p == "docs" {
			return fs.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".js") {
			onDisk = append(onDisk, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(onDisk) < 2 {
		t.Fatalf("scripts on disk: %v", onDisk)
	}
	for _, p := range onDisk {
		if !seen["/"+p] {
			t.Errorf("web/static/%s is not imported by the page (or not served)", p)
		}
	}
	if len(seen) != len(onDisk) {
		t.Errorf("the page loads %d modules, web/static holds %d scripts", len(seen), len(onDisk))
	}
}
