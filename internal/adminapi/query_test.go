package adminapi

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestACursorRoundTripsAnyAddress(t *testing.T) {
	for _, addr := range []string{"10.0.0.1:7400", "[::1]:7400", "host-ä.example:1", strings.Repeat("a", maxCursorAddr)} {
		got, ok := decodeCursor(encodeCursor(addr))
		if !ok || got != addr {
			t.Errorf("decodeCursor(encodeCursor(%q)) = %q, %t; want the address back", addr, got, ok)
		}
	}
	if _, ok := decodeCursor(encodeCursor(strings.Repeat("a", maxCursorAddr+1))); ok {
		t.Errorf("a cursor of an address over %d bytes decoded, want it refused", maxCursorAddr)
	}
}

// FuzzDecodeCursor: no input panics, and whatever decodes is the one
// spelling encodeCursor gives, of a UTF-8 address within the bound.
func FuzzDecodeCursor(f *testing.F) {
	for _, s := range []string{encodeCursor("10.0.0.1:7400"), encodeCursor("x"), "a1.", "a1.====", "a1.AB\nCD", "b1.QQ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, c string) {
		addr, ok := decodeCursor(c)
		if !ok {
			return
		}
		if addr == "" || len(addr) > maxCursorAddr || !utf8.ValidString(addr) {
			t.Errorf("decodeCursor(%q) = %q: empty, too long or not UTF-8", c, addr)
		}
		if again := encodeCursor(addr); again != c {
			t.Errorf("decodeCursor(%q) = %q, which encodes as %q: two spellings of one cursor", c, addr, again)
		}
	})
}

// FuzzParseMembersQuery: no query panics, and an accepted one is within
// the documented bounds.
func FuzzParseMembersQuery(f *testing.F) {
	for _, s := range []string{"", "limit=10", "status=alive,dead&status=joining", "type=cart&after=" + encodeCursor("a:1"),
		"limit=1001", "%zz", "status=", "after=a1.%0A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		mq, err := parseMembersQuery(raw)
		if err != nil {
			if err.code != CodeBadParameter || err.msg == "" {
				t.Errorf("parseMembersQuery(%q): error %+v, want bad_parameter with a message", raw, err)
			}
			return
		}
		if mq.limit < 1 || mq.limit > maxLimit {
			t.Errorf("parseMembersQuery(%q): limit %d outside 1..%d", raw, mq.limit, maxLimit)
		}
		for _, s := range mq.statuses {
			if !slices.Contains(statuses[:], s) {
				t.Errorf("parseMembersQuery(%q): status %q accepted", raw, s)
			}
		}
		if len(mq.after) > maxCursorAddr {
			t.Errorf("parseMembersQuery(%q): after of %d bytes", raw, len(mq.after))
		}
	})
}
