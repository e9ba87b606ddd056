package replica

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The token index yields, for any range, exactly the keys whose token the
// range contains, however keys and scans interleave: ranges that wrap,
// the whole ring, tokens at a range's ends, equal tokens.
func TestTheTokenIndexYieldsTheKeysOfARange(t *testing.T) {
	_, token, rng := rangeGenerators() // the ring's edges often: ends and equal tokens
	rapid.Check(t, func(t *rapid.T) {
		var x tokenIndex
		var all []*keyState
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			if rapid.IntRange(0, 2).Draw(t, "op") < 2 {
				ks := &keyState{token: token.Draw(t, "key")}
				all = append(all, ks)
				x.add(ks)
				continue
			}
			g := rng.Draw(t, "range")
			var got, want []*keyState
			x.each(g, func(ks *keyState) { got = append(got, ks) })
			for _, ks := range all {
				if g.Contains(ks.token) {
					want = append(want, ks)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("range %v: %d keys, want %d", g, len(got), len(want))
			}
			for _, ks := range want {
				if !slices.Contains(got, ks) {
					t.Fatalf("range %v: key at %d missing", g, ks.token)
				}
			}
		}
	})
}
