package admin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve starts a server for o on a loopback listener, closes it when
// the test ends, and returns its base URL.
func serve(t *testing.T, o Options, scheme string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.Listener = ln
	s := Serve(o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return scheme + "://" + s.Addr().String()
}

// get sends GET url with the Authorization header auth (none if empty)
// and returns the status and body. (The tests of package system share
// systemtest.Get; this package's tests cannot import it: systemtest
// imports system, which imports this package.)
func get(t *testing.T, c *http.Client, url, auth string) (int, string) {
	t.Helper()
	h := http.Header{}
	if auth != "" {
		h.Set("Authorization", auth)
	}
	return getHeaders(t, c, url, h)
}

// getHeaders sends GET url with the headers h and returns the status and
// body.
func getHeaders(t *testing.T, c *http.Client, url string, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// client returns a client that closes its idle connections when the test
// ends, so that no goroutine outlives it.
func client(t *testing.T, tr *http.Transport) *http.Client {
	if tr == nil {
		tr = &http.Transport{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func always(ready bool) func() (bool, any) {
	return func() (bool, any) { return ready, map[string]bool{"ready": ready} }
}

func TestReadyzAnswers200WhenReadyAnd503OtherwiseWithTheBody(t *testing.T) {
	c := client(t, nil)
	for _, ready := range []bool{true, false} {
		base := serve(t, Options{Ready: always(ready)}, "http")
		code, body := get(t, c, base+"/readyz", "")
		want := http.StatusServiceUnavailable
		if ready {
			want = http.StatusOK
		}
		var got map[string]bool
		if err := json.Unmarshal([]byte(body), &got); err != nil || got["ready"] != ready {
			t.Errorf("ready=%t: body %q, want JSON with ready %t (%v)", ready, body, ready, err)
		}
		if code != want {
			t.Errorf("ready=%t: /readyz answered %d, want %d", ready, code, want)
		}
		if code, _ := get(t, c, base+"/healthz", ""); code != http.StatusOK {
			t.Errorf("ready=%t: /healthz answered %d, want 200 while the server runs", ready, code)
		}
	}
}

func TestSurfacesSwitchedOffAnswer404(t *testing.T) {
	c := client(t, nil)
	base := serve(t, Options{Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "m") })}, "http")
	for _, p := range []string{"/healthz", "/readyz", "/", "/api/v1/status"} {
		if code, _ := get(t, c, base+p, ""); code != http.StatusNotFound {
			t.Errorf("%s answered %d with health off, want 404", p, code)
		}
	}
	if code, body := get(t, c, base+"/metrics", ""); code != http.StatusOK || body != "m" {
		t.Errorf("/metrics answered %d %q, want 200 from the handler", code, body)
	}
}

func TestOnlyGETIsAllowed(t *testing.T) {
	c := client(t, nil)
	base := serve(t, Options{Ready: always(true)}, "http")
	resp, err := c.Post(base+"/readyz", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz answered %d, want 405", resp.StatusCode)
	}
}

func TestATokenFailsClosedOnEveryPath(t *testing.T) {
	const token = "s3cret-Token_1"
	c := client(t, nil)
	base := serve(t, Options{Token: token, Ready: always(true)}, "http")
	for _, p := range []string{"/healthz", "/readyz", "/nowhere"} {
		for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer wrong", "Bearer " + token + "x", "Basic " + token, token} {
			code, body := get(t, c, base+p, auth)
			if code != http.StatusUnauthorized {
				t.Errorf("%s with Authorization %q answered %d, want 401", p, auth, code)
			}
			if strings.Contains(body, token) {
				t.Errorf("%s: the 401 body %q repeats the token", p, body)
			}
		}
	}
	for _, auth := range []string{"Bearer " + token, "bearer " + token} {
		if code, _ := get(t, c, base+"/readyz", auth); code != http.StatusOK {
			t.Errorf("/readyz with Authorization %q answered %d, want 200", auth, code)
		}
	}
}

func TestTLSServesWithTheConfiguredCertificate(t *testing.T) {
	cert, pool := selfSigned(t)
	base := serve(t, Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}, Token: "t", Ready: always(true)}, "https")
	c := client(t, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}})
	if code, _ := get(t, c, base+"/readyz", "Bearer t"); code != http.StatusOK {
		t.Errorf("/readyz over TLS answered %d, want 200", code)
	}
	plain := client(t, nil)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http"+strings.TrimPrefix(base, "https")+"/readyz", nil)
	req.Header.Set("Authorization", "Bearer t")
	if resp, err := plain.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("/readyz answered 200 over plain HTTP on a TLS listener")
		}
	}
}

func TestValidTokenRefusesBytesAHeaderWouldMangleWithoutRepeatingThem(t *testing.T) {
	for _, tok := range []string{"", "abc", "A-Z_0.9~+/=="} {
		if err := ValidToken(tok); err != nil {
			t.Errorf("ValidToken(%q) = %v, want nil", tok, err)
		}
	}
	for _, tok := range []string{"has space", "new\nline", "quo\"te", "ünï"} {
		err := ValidToken(tok)
		if err == nil {
			t.Errorf("ValidToken(%q) = nil, want an error", tok)
			continue
		}
		if strings.Contains(err.Error(), tok) {
			t.Errorf("ValidToken's error %q repeats the token", err)
		}
	}
}

// selfSigned returns a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "troupe admin test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// apiStub answers every request under /api/v1/ with its method and path.
var apiStub = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.WriteString(w, r.Method+" "+r.URL.Path)
})

func TestTheAPIServesEverythingUnderItsPrefixWhateverTheMethod(t *testing.T) {
	c := client(t, nil)
	base := serve(t, Options{API: apiStub}, "http")
	if code, body := get(t, c, base+"/api/v1/members", ""); code != http.StatusOK || body != "GET /api/v1/members" {
		t.Errorf("GET /api/v1/members answered %d %q, want the API's answer", code, body)
	}
	// The API answers other methods itself (with a JSON 405).
	resp, err := c.Post(base+"/api/v1/status", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "POST /api/v1/status" {
		t.Errorf("POST /api/v1/status reached %q, want the API handler", b)
	}
	if code, _ := get(t, c, base+"/readyz", ""); code != http.StatusNotFound {
		t.Errorf("/readyz answered %d with only the API on, want 404", code)
	}
}

func TestThePrefixWithoutItsSlashReachesTheAPINotARedirect(t *testing.T) {
	c := client(t, nil)
	base := serve(t, Options{API: apiStub}, "http")
	if code, body := get(t, c, base+"/api/v1", ""); code != http.StatusOK || body != "GET /api/v1" {
		t.Errorf("GET /api/v1 answered %d %q, want the API's answer (not the mux's redirect)", code, body)
	}
}

func TestATokenGuardsTheAPIWithAJSONError(t *testing.T) {
	const token = "api-Token_7"
	c := client(t, nil)
	base := serve(t, Options{Token: token, API: apiStub}, "http")
	code, body := get(t, c, base+"/api/v1/status", "")
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusUnauthorized || e.Error.Code != "unauthorized" {
		t.Errorf("/api/v1/status without the token answered %d %q (%v), want 401 with the JSON error code unauthorized", code, body, err)
	}
	if strings.Contains(body, token) {
		t.Errorf("the 401 body %q repeats the token", body)
	}
	if code, _ := get(t, c, base+"/api/v1/status", "Bearer "+token); code != http.StatusOK {
		t.Errorf("/api/v1/status with the token answered %d, want 200", code)
	}
}

// uiStub answers every request it gets with its method and path.
var uiStub = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.WriteString(w, "ui "+r.Method+" "+r.URL.Path)
})

func TestTheUIServesTheRootAndItsPrefixOnlyAndOnlyGET(t *testing.T) {
	c := client(t, nil)
	base := serve(t, Options{API: apiStub, UI: uiStub}, "http")
	for _, p := range []string{"/", "/ui/ui.js"} {
		if code, body := get(t, c, base+p, ""); code != http.StatusOK || body != "ui GET "+p {
			t.Errorf("GET %s answered %d %q, want the UI's answer", p, code, body)
		}
	}
	for _, p := range []string{"/index.html", "/uix"} {
		if code, _ := get(t, c, base+p, ""); code != http.StatusNotFound {
			t.Errorf("GET %s answered %d with the UI on, want 404: the UI has / and /ui/ only", p, code)
		}
	}
	resp, err := c.Post(base+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST / answered %d, want 405", resp.StatusCode)
	}
	if code, body := get(t, c, base+"/api/v1/status", ""); code != http.StatusOK || body != "GET /api/v1/status" {
		t.Errorf("/api/v1/status answered %d %q with the UI on, want the API's answer", code, body)
	}
}

func TestATokenGuardsTheUIToo(t *testing.T) {
	const token = "ui-Token_3"
	c := client(t, nil)
	base := serve(t, Options{Token: token, API: apiStub, UI: uiStub}, "http")
	for _, p := range []string{"/", "/ui/ui.js"} {
		if code, body := get(t, c, base+p, ""); code != http.StatusUnauthorized || strings.HasPrefix(body, "ui ") {
			t.Errorf("GET %s without the token answered %d %q, want 401 before the UI", p, code, body)
		}
		if code, _ := get(t, c, base+p, "Bearer "+token); code != http.StatusOK {
			t.Errorf("GET %s with the token answered %d, want 200", p, code)
		}
	}
}
