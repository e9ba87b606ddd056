package admin

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// seen is what peerEcho saw of a request.
type seen struct {
	Client        string
	Proxy         string
	Proxied       bool
	User          string
	ForwardedFor  string
	ForwardedUser string
	AuthRequest   string
}

// peerEcho answers with the peer the server found and the identity
// headers that reached it.
var peerEcho = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	p, ok := PeerOf(r.Context())
	if !ok {
		http.Error(w, "no peer in the context", http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(seen{Client: p.Client.String(), Proxy: p.Addr.String(), Proxied: p.Proxied, User: p.User,
		ForwardedFor: r.Header.Get("X-Forwarded-For"), ForwardedUser: r.Header.Get("X-Forwarded-User"),
		AuthRequest: r.Header.Get("X-Auth-Request-User")})
})

// peerSeen sends GET /api/v1/x with the headers h (name, value pairs) and
// returns what peerEcho saw.
func peerSeen(t *testing.T, base string, h ...string) seen {
	t.Helper()
	hdr := http.Header{}
	for i := 0; i < len(h); i += 2 {
		hdr.Add(h[i], h[i+1])
	}
	code, body := getHeaders(t, client(t, nil), base+"/api/v1/x", hdr)
	var s seen
	if err := json.Unmarshal([]byte(body), &s); code != http.StatusOK || err != nil {
		t.Fatalf("GET with %q answered %d %q (%v), want 200 with the peer", h, code, body, err)
	}
	return s
}

var (
	loopback = netip.MustParsePrefix("127.0.0.0/8")
	tenNet   = netip.MustParsePrefix("10.0.0.0/8")
)

func TestIdentityHeadersFromAnUntrustedPeerAreIgnoredAndRemoved(t *testing.T) {
	for name, p := range map[string]Proxies{
		"no trusted proxy":          {},
		"another network trusted":   {Trusted: []netip.Prefix{tenNet}},
		"another network, a header": {Trusted: []netip.Prefix{tenNet}, UserHeader: "X-Auth-Request-User"},
	} {
		base := serve(t, Options{API: peerEcho, Proxies: p}, "http")
		got := peerSeen(t, base, "X-Forwarded-For", "203.0.113.9", "X-Forwarded-User", "mallory", "X-Auth-Request-User", "mallory")
		want := seen{Client: "127.0.0.1", Proxy: "127.0.0.1", AuthRequest: "mallory"}
		if p.UserHeader != "" {
			want = seen{Client: "127.0.0.1", Proxy: "127.0.0.1", ForwardedUser: "mallory"}
		}
		if got != want {
			t.Errorf("%s: a direct request claiming 203.0.113.9 and mallory was seen as %+v, want %+v: the client's own address, no user, the headers removed",
				name, got, want)
		}
	}
}

func TestATrustedProxyNamesTheClientAndTheUser(t *testing.T) {
	base := serve(t, Options{API: peerEcho, Proxies: Proxies{Trusted: []netip.Prefix{tenNet, loopback}}}, "http")
	for _, tc := range []struct {
		xff    []string
		client string
	}{
		{nil, "127.0.0.1"},
		{[]string{"203.0.113.9"}, "203.0.113.9"},
		{[]string{"198.51.100.7, 203.0.113.9"}, "203.0.113.9"},          // the nearest untrusted address, not the leftmost
		{[]string{"203.0.113.9, 10.1.2.3, 127.0.0.5"}, "203.0.113.9"},   // past the trusted hops
		{[]string{"203.0.113.9", "10.1.2.3"}, "203.0.113.9"},            // over two header lines
		{[]string{"203.0.113.9, not-an-address, 10.1.2.3"}, "10.1.2.3"}, // nothing left of garbage is believed
		{[]string{"10.1.2.3, 10.4.5.6"}, "10.1.2.3"},                    // proxies all the way: the farthest
		{[]string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{[]string{"::ffff:203.0.113.9"}, "203.0.113.9"},
	} {
		h := []string{"X-Forwarded-User", "alice"}
		for _, v := range tc.xff {
			h = append(h, "X-Forwarded-For", v)
		}
		got := peerSeen(t, base, h...)
		if got.Client != tc.client || !got.Proxied || got.Proxy != "127.0.0.1" || got.User != "alice" {
			t.Errorf("X-Forwarded-For %q from a trusted proxy: seen %+v, want client %s via 127.0.0.1, user alice", tc.xff, got, tc.client)
		}
	}
	for _, h := range [][]string{
		{"X-Forwarded-User", "alice", "X-Forwarded-User", "bob"}, // two users name no one
		{"X-Forwarded-User", "al\tice"},
		{"X-Forwarded-User", strings.Repeat("a", maxUserBytes+1)},
	} {
		if got := peerSeen(t, base, h...); got.User != "" {
			t.Errorf("user headers %q: seen user %q, want none", h, got.User)
		}
	}
}

func TestTheUserHeaderIsTheConfiguredOneOnly(t *testing.T) {
	base := serve(t, Options{API: peerEcho, Proxies: Proxies{Trusted: []netip.Prefix{loopback}, UserHeader: "x-auth-request-user"}}, "http")
	if got := peerSeen(t, base, "X-Forwarded-User", "mallory", "X-Auth-Request-User", "alice"); got.User != "alice" {
		t.Errorf("with UserHeader X-Auth-Request-User: seen user %q, want alice", got.User)
	}
	if got := peerSeen(t, base, "X-Forwarded-User", "mallory"); got.User != "" {
		t.Errorf("with UserHeader X-Auth-Request-User, X-Forwarded-User alone: seen user %q, want none", got.User)
	}
}

func TestRequireUserFailsClosedAndKeepsTheToken(t *testing.T) {
	const token = "proxy-Token_9"
	c := client(t, nil)
	trusted := serve(t, Options{API: apiStub, Token: token, Proxies: Proxies{Trusted: []netip.Prefix{loopback}, RequireUser: true}}, "http")
	untrusted := serve(t, Options{API: apiStub, Proxies: Proxies{Trusted: []netip.Prefix{tenNet}, RequireUser: true}}, "http")
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, tc := range []struct {
		name string
		base string
		h    http.Header
		want int
	}{
		{"user and token from a trusted proxy", trusted, hdr("Authorization", "Bearer "+token, "X-Forwarded-User", "alice"), http.StatusOK},
		{"token, no user", trusted, hdr("Authorization", "Bearer "+token), http.StatusUnauthorized},
		{"user, no token", trusted, hdr("X-Forwarded-User", "alice"), http.StatusUnauthorized},
		{"user, a wrong token", trusted, hdr("Authorization", "Bearer nope", "X-Forwarded-User", "alice"), http.StatusUnauthorized},
		{"an empty user", trusted, hdr("Authorization", "Bearer "+token, "X-Forwarded-User", " "), http.StatusUnauthorized},
		{"a user from an untrusted peer", untrusted, hdr("X-Forwarded-User", "alice"), http.StatusUnauthorized},
		{"nothing from an untrusted peer", untrusted, hdr(), http.StatusUnauthorized},
	} {
		code, body := getHeaders(t, c, tc.base+"/api/v1/status", tc.h)
		if code != tc.want {
			t.Errorf("%s: answered %d %q, want %d", tc.name, code, body, tc.want)
		}
		if code == http.StatusUnauthorized && (!strings.Contains(body, `"code":"unauthorized"`) || strings.Contains(body, token)) {
			t.Errorf("%s: the 401 body %q is not the API's unauthorized error, or repeats the token", tc.name, body)
		}
	}
}

// lockedBuffer is a bytes.Buffer the server's goroutines may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestTheLogNamesTheBelievedClientAndUserButNoCredential(t *testing.T) {
	const token = "log-Token_4"
	logs := new(lockedBuffer)
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := client(t, nil)
	trusted := serve(t, Options{API: apiStub, Token: token, Logger: log, Proxies: Proxies{Trusted: []netip.Prefix{loopback}}}, "http")
	getHeaders(t, c, trusted+"/api/v1/status", http.Header{"Authorization": {"Bearer guess-Secret"},
		"X-Forwarded-For": {"203.0.113.9"}, "X-Forwarded-User": {"alice"}})
	getHeaders(t, c, trusted+"/api/v1/status", http.Header{"Authorization": {"Bearer " + token},
		"X-Forwarded-For": {"198.51.100.7"}, "X-Forwarded-User": {"bob"}})
	out := logs.String()
	for _, want := range []string{
		`msg="troupe: admin request refused" path=/api/v1/status peer.client=203.0.113.9 peer.proxy=127.0.0.1 peer.user=alice`,
		`msg="troupe: admin request" method=GET path=/api/v1/status peer.client=198.51.100.7 peer.proxy=127.0.0.1 peer.user=bob`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not hold %s; it is:\n%s", want, out)
		}
	}

	logs = new(lockedBuffer)
	log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	untrusted := serve(t, Options{API: apiStub, Token: token, Logger: log, Proxies: Proxies{Trusted: []netip.Prefix{tenNet}}}, "http")
	getHeaders(t, c, untrusted+"/api/v1/status", http.Header{"Authorization": {"Bearer guess-Secret"},
		"X-Forwarded-For": {"203.0.113.9"}, "X-Forwarded-User": {"mallory"}})
	out += logs.String()
	if want := `msg="troupe: admin request refused" path=/api/v1/status peer.client=127.0.0.1 why=`; !strings.Contains(logs.String(), want) {
		t.Errorf("the log of a direct request does not hold %s; it is:\n%s", want, logs)
	}
	for _, never := range []string{token, "guess-Secret", "mallory"} {
		if strings.Contains(out, never) {
			t.Errorf("the log holds %q:\n%s", never, out)
		}
	}
}

func TestValidUserHeaderRefusesNonNamesAndCredentialHeaders(t *testing.T) {
	for _, ok := range []string{"X-Forwarded-User", "x-auth-request-user", "X-Remote_User"} {
		if err := ValidUserHeader(ok); err != nil {
			t.Errorf("ValidUserHeader(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "X User", "X-User:", "Authorization", "authorization", "Cookie", "X-Forwarded-For", "Proxy-Authorization", "Forwarded"} {
		if err := ValidUserHeader(bad); err == nil {
			t.Errorf("ValidUserHeader(%q) = nil, want an error", bad)
		}
	}
}
