package ring

import "testing"

// The package decodes nothing. FuzzKeyToken checks the one encoder: the
// stack-buffer fast path and the heap path give the digest of the documented
// encoding for any actor type and key, and distinct pairs encode distinctly.
func FuzzKeyToken(f *testing.F) {
	f.Add("counter", "page-views", "counter", "page-view")
	f.Add("ab", "c", "a", "bc")
	f.Add("", "", "", "\x00")
	f.Fuzz(func(t *testing.T, typ1, key1, typ2, key2 string) {
		if got, want := KeyToken(typ1, key1), digestToken(appendKeyInput(nil, typ1, key1)); got != want {
			t.Fatalf("KeyToken(%q, %q) = %#x, want the digest of the documented encoding %#x", typ1, key1, uint64(got), uint64(want))
		}
		same := typ1 == typ2 && key1 == key2
		if enc1, enc2 := appendKeyInput(nil, typ1, key1), appendKeyInput(nil, typ2, key2); (string(enc1) == string(enc2)) != same {
			t.Fatalf("encodings of (%q, %q) and (%q, %q) equal = %v, want %v", typ1, key1, typ2, key2, !same, same)
		}
	})
}
