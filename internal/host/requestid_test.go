package host

import (
	"strings"
	"testing"
)

func TestRequestIDsShowAs32HexDigitsOrAsNamed(t *testing.T) {
	if got := MadeRequestID(0x0123456789abcdef, 42).String(); got != "0123456789abcdef000000000000002a" {
		t.Errorf("made id shows as %q, want 32 lower-case hex digits, prefix then count", got)
	}
	if got := NamedRequestID("req-1").String(); got != "req-1" {
		t.Errorf("named id shows as %q, want req-1", got)
	}
	if got := (RequestID{}).String(); got != "" {
		t.Errorf("zero id shows as %q, want \"\"", got)
	}
}

func TestAHostsRequestIDsShareItsPrefixAndNeverRepeat(t *testing.T) {
	h1, h2 := &Host{reqPrefix: newRequestPrefix()}, &Host{reqPrefix: newRequestPrefix()}
	a, b := h1.NewRequestID(), h1.NewRequestID()
	if a == b || a.hi != b.hi || a.IsZero() {
		t.Fatalf("two ids of one host: %v and %v, want one prefix, two counts", a, b)
	}
	if c := h2.NewRequestID(); c.hi == a.hi {
		t.Fatalf("two hosts drew the prefix %x", c.hi)
	}
}

func TestValidRequestIDsAreVisibleASCIIOf1To64Bytes(t *testing.T) {
	for _, ok := range []string{"a", "~", strings.Repeat("!", 64), "0123456789abcdef0123456789abcdef"} {
		if why := ValidRequestID(ok); why != "" {
			t.Errorf("%q refused (%s), want accepted", ok, why)
		}
	}
	for _, bad := range []string{"", strings.Repeat("a", 65), "a b", "\x00", "\x7f", "é"} {
		if ValidRequestID(bad) == "" {
			t.Errorf("%q accepted, want refused", bad)
		}
	}
}

// A scoped key is a key, or a tenant, one space and a key: no two
// (tenant, key) pairs give one string, and each part keeps its limits.
func TestScopedIdempotencyKeysKeepTenantsApart(t *testing.T) {
	seen := map[string][2]string{}
	for _, p := range [][2]string{{"", "a:b"}, {"a", "b"}, {"a:b", "c"}, {"a", "b:c"}, {"", "x"}, {"x", "x"}} {
		s := ScopedIdempotencyKey(p[0], p[1])
		if prev, ok := seen[s]; ok {
			t.Fatalf("tenant %q key %q and tenant %q key %q scope to one key %q", prev[0], prev[1], p[0], p[1], s)
		}
		seen[s] = p
		if why := ValidScopedIdempotencyKey(s); why != "" {
			t.Errorf("%q refused (%s), want accepted", s, why)
		}
	}
	for _, bad := range []string{"", " k", "t ", "t  k", "t k k", strings.Repeat("t", 65) + " k", "t " + strings.Repeat("k", 256), "t\tk"} {
		if ValidScopedIdempotencyKey(bad) == "" {
			t.Errorf("%q accepted, want refused", bad)
		}
	}
}

func TestARequestIDReadBackFromHowItShowsShowsTheSame(t *testing.T) {
	h := New(Settings{})
	defer h.Close(t.Context())
	for _, id := range []RequestID{
		h.NewRequestID(), MadeRequestID(0, 1), MadeRequestID(1<<63, 0),
		NamedRequestID("order-17"), NamedRequestID("0123456789ABCDEF0123456789ABCDEF"),
		NamedRequestID("00000000000000000000000000000000"), {},
	} {
		shown := id.AppendTo(nil)
		if string(shown) != id.String() || id.Len() != len(shown) {
			t.Fatalf("%q appends as %q (%d bytes)", id, shown, id.Len())
		}
		back := ShownRequestID(shown)
		if back.String() != id.String() {
			t.Fatalf("%q read back as %q", id, back)
		}
		if _, _, made := id.Made(); made && back != id {
			t.Fatalf("made id %q read back as %+v", id, back)
		}
	}
}
