// Package web is the demo page the api serves at "/" (docs/design.md §6.4): sales with
// a countdown and live stock, a buy button, results over the websocket, a
// link from each order to its workflow in the Temporal Web UI, and an
// operator view with live stats. Plain HTML, CSS and JavaScript (ES modules
// the browser loads itself: static/app.js and static/app/), embedded in the
// binary: no build step, no CDN, works offline.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// contentTypes are set explicitly: the system's MIME database must not
// decide how a browser reads our script.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
	".json": "application/json",
}

// csp allows the page only its own scripts, styles and API (the websocket
// included: 'self' covers ws:// and wss:// of the same host).
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"

// docsCSP is the API reference's (/docs): Stoplight Elements, served from
// here, sets inline styles and reads the OpenAPI document; it may reach
// nothing else, and runs sandboxed as huma's own docs page did.
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"sandbox allow-same-origin allow-scripts"

type asset struct {
	body        []byte
	contentType string
	etag        string
}

var assets = mustLoad()

func mustLoad() map[string]asset {
	out := map[string]asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		ext := path.Ext(p)
		ct, ok := contentTypes[ext]
		if !ok {
			if ct = mime.TypeByExtension(ext); ct == "" {
				ct = "application/octet-stream"
			}
		}
		sum := sha256.Sum256(b)
		out[strings.TrimPrefix(p, "static/")] = asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("web: embedded files: " + err.Error())
	}
	return out
}

// Handler serves the page: index.html at "/", the other files by name.
// Mount it as the catch-all "GET /" beside the API.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		switch name {
		case "":
			name = "index.html"
		case "docs":
			// The API reference, with its renderer (docs/elements),
			// from the binary rather than a CDN: it works offline.
			name = "docs/index.html"
		}
		a, ok := assets[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache") // revalidate: the ETag makes that cheap
		h.Set("ETag", a.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		if strings.HasSuffix(name, ".html") {
			policy := csp
			if strings.HasPrefix(name, "docs/") {
				policy = docsCSP
			}
			h.Set("Content-Security-Policy", policy)
			h.Set("Referrer-Policy", "same-origin")
			h.Set("X-Frame-Options", "DENY")
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}
