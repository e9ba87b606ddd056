package idempotency_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/troupe-go/troupe/client/idempotency"
)

func TestParseKeyAcceptsBareAndQuotedKeys(t *testing.T) {
	for in, want := range map[string]string{
		"8e03978e-40d5-43e8-bc93-6894a57f9324":   "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`: "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`"with space"`:                           "with space",
		`"a\"b\\c"`:                              `a"b\c`,
		`"`:                                      `"`,
		strings.Repeat("k", idempotency.MaxKeyLen): strings.Repeat("k", idempotency.MaxKeyLen),
	} {
		got, err := idempotency.ParseKey(in)
		if err != nil || got != want {
			t.Errorf("ParseKey(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestParseKeyRefusesWithATypedError(t *testing.T) {
	for _, in := range []string{"", `""`, "a b", "\x00", "\x7f", "é", strings.Repeat("k", idempotency.MaxKeyLen+1),
		`"` + strings.Repeat("k", idempotency.MaxKeyLen+1) + `"`, `"a\b"`, `"a\"`, `"a"b"`, `"tab	"`} {
		if k, err := idempotency.ParseKey(in); !errors.Is(err, idempotency.ErrKeyInvalid) {
			t.Errorf("ParseKey(%q) = %q, %v; want ErrKeyInvalid", in, k, err)
		}
	}
}

// FuzzParseKey checks that every key ParseKey accepts is 1 to MaxKeyLen
// visible ASCII characters or spaces, and that quoting an accepted key as
// a structured-field string parses back to it.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"a b"`, `"a\"b"`, `"`, `""`, "\xff", strings.Repeat("x", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := idempotency.ParseKey(in)
		if err != nil {
			if !errors.Is(err, idempotency.ErrKeyInvalid) {
				t.Fatalf("ParseKey(%q): untyped error %v", in, err)
			}
			return
		}
		if k == "" || len(k) > idempotency.MaxKeyLen {
			t.Fatalf("ParseKey(%q) accepted %q of %d bytes", in, k, len(k))
		}
		for i := 0; i < len(k); i++ {
			if (k[i] < 0x21 || k[i] > 0x7e) && k[i] != ' ' {
				t.Fatalf("ParseKey(%q) accepted byte %#x", in, k[i])
			}
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
		if back, err := idempotency.ParseKey(quoted); err != nil || back != k {
			t.Fatalf("ParseKey(%q) = %q, %v; want %q", quoted, back, err, k)
		}
	})
}

func TestRequestHashIsCanonicalAndUnambiguous(t *testing.T) {
	q := func(s string) url.Values {
		v, err := url.ParseQuery(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	h := idempotency.RequestHash
	base := h("POST", "/p", q("a=1&b=2&a=3"), []byte("body"))
	if got := h("POST", "/p", q("b=2&a=1&a=3"), []byte("body")); got != base {
		t.Error("reordering parameters changed the hash")
	}
	for i, other := range []idempotency.Hash{
		h("POST", "/p", q("a=3&b=2&a=1"), []byte("body")), // values of one name keep their order
		h("PUT", "/p", q("a=1&b=2&a=3"), []byte("body")),
		h("POST", "/p", q("a=1&b=2&a=3"), []byte("bodx")),
		h("POST", "/pb", q("a=1&b=2&a=3"), []byte("ody")), // bytes moved between fields
		h("POST", "/p", q("a=1&b=2&a=3&c="), []byte("body")),
		h("POST", "/p", q("a=1&b=2a=3"), []byte("body")),
	} {
		if other == base {
			t.Errorf("case %d hashes like the base request", i)
		}
	}
	if a, b := h("POST", "/p", nil, nil), h("POST", "/p", url.Values{}, []byte{}); a != b {
		t.Error("a nil and an empty query or body hash differently")
	}
}
