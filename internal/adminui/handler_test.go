package adminui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// serve sends method path to the handler and returns the response and
// its body.
func serve(t *testing.T, method, path string, hdr http.Header) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	resp := rec.Result()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestEveryAssetIsServedWithItsTypeAndTheSecurityHeaders(t *testing.T) {
	for path, ctype := range map[string]string{
		"/":               "text/html; charset=utf-8",
		Prefix + "ui.js":  "text/javascript; charset=utf-8",
		Prefix + "ui.css": "text/css; charset=utf-8",
	} {
		resp, body := serve(t, http.MethodGet, path, nil)
		if resp.StatusCode != http.StatusOK || body == "" {
			t.Errorf("GET %s answered %d with %d bytes, want 200 with the file", path, resp.StatusCode, len(body))
		}
		if got := resp.Header.Get("Content-Type"); got != ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", path, got, ctype)
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != ContentSecurityPolicy {
			t.Errorf("GET %s: Content-Security-Policy %q, want %q", path, got, ContentSecurityPolicy)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", path, got)
		}
	}
}

func TestThePolicyAllowsOnlyThisOriginAndNothingInline(t *testing.T) {
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(ContentSecurityPolicy, want) {
			t.Errorf("the policy %q lacks %q", ContentSecurityPolicy, want)
		}
	}
	for _, never := range []string{"unsafe-inline", "unsafe-eval", "*", "http:", "https:", "data:"} {
		if strings.Contains(ContentSecurityPolicy, never) {
			t.Errorf("the policy %q allows %q", ContentSecurityPolicy, never)
		}
	}
}

// The policy forbids inline script and style: the page must not need
// them, and must load only files the handler serves, by relative paths
// (the page may sit behind a proxy that mounts it under a path).
func TestThePageLoadsOnlyItsOwnFilesAndHasNothingInline(t *testing.T) {
	_, page := serve(t, http.MethodGet, "/", nil)
	if m := regexp.MustCompile(`(?is)<script[^>]*>\s*[^<\s]|<style|\sstyle=|\son[a-z]+=`).FindString(page); m != "" {
		t.Errorf("the page has inline script or style: %q", m)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 2 {
		t.Fatalf("the page refers to %d files, want its script and style sheet", len(refs))
	}
	for _, ref := range refs {
		if strings.Contains(ref[1], ":") || strings.HasPrefix(ref[1], "/") {
			t.Errorf("the page refers to %q, want a relative path on this listener", ref[1])
			continue
		}
		if resp, _ := serve(t, http.MethodGet, "/"+ref[1], nil); resp.StatusCode != http.StatusOK {
			t.Errorf("the page refers to %q, which answers %d", ref[1], resp.StatusCode)
		}
	}
	_, script := serve(t, http.MethodGet, Prefix+"ui.js", nil)
	if m := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function`).FindString(script); m != "" {
		t.Errorf("the script uses %s: it must build the page from DOM calls and text", m)
	}
}

func TestUnknownPathsAre404(t *testing.T) {
	for _, path := range []string{Prefix, Prefix + "nope.js", Prefix + "../static/index.html", "/index.html"} {
		if resp, _ := serve(t, http.MethodGet, path, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s answered %d, want 404", path, resp.StatusCode)
		}
	}
}

func TestAnUnchangedAssetIsRevalidatedByItsETag(t *testing.T) {
	resp, _ := serve(t, http.MethodGet, Prefix+"ui.js", nil)
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q; want an ETag and no-cache", etag, resp.Header.Get("Cache-Control"))
	}
	again, body := serve(t, http.MethodGet, Prefix+"ui.js", http.Header{"If-None-Match": {etag}})
	if again.StatusCode != http.StatusNotModified || body != "" {
		t.Errorf("GET with If-None-Match %s answered %d with %d bytes, want 304 and no body", etag, again.StatusCode, len(body))
	}
}

func TestHeadAnswersTheHeadersOfGetWithoutTheBody(t *testing.T) {
	get, body := serve(t, http.MethodGet, "/", nil)
	head, none := serve(t, http.MethodHead, "/", nil)
	if head.StatusCode != http.StatusOK || none != "" || head.Header.Get("Content-Length") != get.Header.Get("Content-Length") ||
		get.Header.Get("Content-Length") == "" || len(body) == 0 {
		t.Errorf("HEAD / answered %d, %d bytes, Content-Length %q; GET's %q; want 200, no body, the same length",
			head.StatusCode, len(none), head.Header.Get("Content-Length"), get.Header.Get("Content-Length"))
	}
}
