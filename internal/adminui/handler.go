package adminui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"time"
)

// Prefix is the path the page's assets are served under; the page itself
// is at "/".
const Prefix = "/ui/"

// ContentSecurityPolicy is the policy of every response: this listener's
// own script, style and API, nothing inline, nothing framed. Trusted
// types make an HTML-string sink (innerHTML) throw, which the script
// never uses.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'"

//go:embed static
var static embed.FS

// asset is one file the handler serves.
type asset struct {
	contentType string
	body        []byte
	etag        string
}

// handler serves the page and its assets from memory.
type handler struct {
	assets map[string]asset // by request path
}

// Handler returns the handler of "/" and of everything under Prefix:
// GET and HEAD of the page and its assets, 404 for any other path. The
// caller routes only those paths to it and checks the method.
func Handler() http.Handler {
	files := []struct{ path, file, contentType string }{
		{"/", "static/index.html", "text/html; charset=utf-8"},
		{Prefix + "ui.js", "static/ui.js", "text/javascript; charset=utf-8"},
		{Prefix + "ui.css", "static/ui.css", "text/css; charset=utf-8"},
	}
	h := &handler{assets: make(map[string]asset, len(files))}
	for _, f := range files {
		b, err := static.ReadFile(f.file)
		if err != nil {
			panic("adminui: embedded file missing: " + f.file) // a build mistake the package's tests catch
		}
		sum := sha256.Sum256(b)
		h.assets[f.path] = asset{contentType: f.contentType, body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	a, ok := h.assets[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	hdr.Set("Content-Type", a.contentType)
	// Revalidated on every load, cheaply by ETag: after an upgrade the
	// page and its script change together.
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
