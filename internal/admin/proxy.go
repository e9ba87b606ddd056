package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultUserHeader is the header a trusted proxy names the user in when
// Proxies.UserHeader is empty: oauth2-proxy, Pomerium and nginx's
// auth_request setups can all send it.
const DefaultUserHeader = "X-Forwarded-User"

// forwardedFor is the header a trusted proxy names the client's address
// in. RFC 7239's Forwarded is not read: one header, one rule.
const forwardedFor = "X-Forwarded-For"

// maxUserBytes bounds a user name a proxy sends.
const maxUserBytes = 256

// Proxies says which reverse proxies in front of the server are trusted
// and how they name the client and the user.
type Proxies struct {
	// Trusted are the networks of the trusted proxies. A request whose
	// TCP peer is in none of them is direct: its X-Forwarded-For and
	// user header are removed, never believed.
	Trusted []netip.Prefix
	// UserHeader names the header a trusted proxy puts the user it
	// authenticated in. Empty: DefaultUserHeader.
	UserHeader string
	// RequireUser refuses (401) every request that does not come from a
	// trusted proxy naming a user, on top of the bearer token if one is
	// set.
	RequireUser bool
}

// Peer is who sent a request, as far as the server believes it.
type Peer struct {
	// Addr is the TCP peer's address (a proxy's, behind one); invalid
	// when the listener gives no IP address.
	Addr netip.Addr
	// Proxied is set when Addr is a trusted proxy.
	Proxied bool
	// Client is the client's address: from X-Forwarded-For when Proxied
	// (the nearest address that is not a trusted proxy), else Addr.
	Client netip.Addr
	// User is the user a trusted proxy named; "" otherwise.
	User string
}

// LogValue is what the server logs of a peer: the client, the proxy
// when there is one, and the user when named.
func (p Peer) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("client", addrText(p.Client))}
	if p.Proxied {
		attrs = append(attrs, slog.String("proxy", addrText(p.Addr)))
	}
	if p.User != "" {
		attrs = append(attrs, slog.String("user", p.User))
	}
	return slog.GroupValue(attrs...)
}

func addrText(a netip.Addr) string {
	if !a.IsValid() {
		return "unknown"
	}
	return a.String()
}

type peerKey struct{}

// PeerOf returns the peer the server found for the request of ctx.
func PeerOf(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// userHeader returns the header the user is named in.
func (p *Proxies) userHeader() string {
	if p.UserHeader == "" {
		return DefaultUserHeader
	}
	return http.CanonicalHeaderKey(p.UserHeader)
}

func (p *Proxies) trusts(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, n := range p.Trusted {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// peer works out who sent r. From an untrusted peer it removes the
// identity headers from r, so that nothing after it can believe them.
func (p *Proxies) peer(r *http.Request) Peer {
	var pr Peer
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		pr.Addr = ap.Addr().Unmap()
	}
	pr.Client = pr.Addr
	uh := p.userHeader()
	if !p.trusts(pr.Addr) {
		r.Header.Del(forwardedFor)
		r.Header.Del(uh)
		return pr
	}
	pr.Proxied = true
	pr.Client = p.client(pr.Addr, r.Header.Values(forwardedFor))
	pr.User = user(r.Header.Values(uh))
	return pr
}

// client walks X-Forwarded-For from its right end, where the nearest
// proxy appended its own peer: each trusted proxy's entry was written by
// the proxy before it, down to the first address that is not a trusted
// proxy, the client. An entry that does not parse ends the walk: what
// lies left of it cannot be believed, and the last hop walked is the
// client.
func (p *Proxies) client(hop netip.Addr, values []string) netip.Addr {
	entries := strings.Split(strings.Join(values, ","), ",")
	for i := len(entries) - 1; i >= 0; i-- {
		a, ok := parseHop(strings.TrimSpace(entries[i]))
		if !ok {
			return hop
		}
		hop = a
		if !p.trusts(a) {
			return a
		}
	}
	return hop
}

// parseHop parses an X-Forwarded-For entry: an address, with a port
// for the proxies that add one.
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

// user returns the user a trusted proxy named: one value, printable
// UTF-8 within maxUserBytes. Anything else names no one.
func user(values []string) string {
	if len(values) != 1 {
		return ""
	}
	u := strings.TrimSpace(values[0])
	if len(u) > maxUserBytes || !utf8.ValidString(u) || strings.IndexFunc(u, unicode.IsControl) >= 0 {
		return ""
	}
	return u
}

// ValidUserHeader reports whether name may be Proxies.UserHeader: a
// header field name (RFC 9110's token), and none that carries
// credentials or the forwarded address, which would then be logged as a
// user.
func ValidUserHeader(name string) error {
	if name == "" {
		return fmt.Errorf("is empty")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return fmt.Errorf("byte %d is not allowed in a header name", i)
		}
	}
	switch http.CanonicalHeaderKey(name) {
	case "Authorization", "Proxy-Authorization", "Cookie", forwardedFor, "Forwarded":
		return fmt.Errorf("%s carries credentials or addresses, not a user name", http.CanonicalHeaderKey(name))
	}
	return nil
}
