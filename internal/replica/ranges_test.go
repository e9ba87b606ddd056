package replica

import (
	"math"
	"slices"
	"testing"

	"github.com/troupe-go/troupe/ring"
	"pgregory.net/rapid"
)

// rangeGenerators returns the tokens at the ring's edges and around,
// and generators of tokens (edges often) and of ranges between them.
func rangeGenerators() ([]ring.Token, *rapid.Generator[ring.Token], *rapid.Generator[ring.Range]) {
	edges := []ring.Token{0, 1, 100, 200, math.MaxUint64 - 1, math.MaxUint64}
	token := rapid.Custom(func(t *rapid.T) ring.Token {
		if rapid.Bool().Draw(t, "edge") {
			return rapid.SampledFrom(edges).Draw(t, "e")
		}
		return ring.Token(rapid.Uint64().Draw(t, "t"))
	})
	rng := rapid.Custom(func(t *rapid.T) ring.Range {
		return ring.Range{Start: token.Draw(t, "start"), End: token.Draw(t, "end")}
	})
	return edges, token, rng
}

// TestReceivedRangeStopsOnlyItsTokens checks subtractRange against
// Contains: a token is still received after Received(g) exactly when it
// was received before and g does not contain it.
func TestReceivedRangeStopsOnlyItsTokens(t *testing.T) {
	edges, token, rng := rangeGenerators()
	rapid.Check(t, func(t *rapid.T) {
		before := rapid.SliceOfN(rng, 0, 3).Draw(t, "receiving")
		g := rng.Draw(t, "received")
		after := subtractRange(before, g)
		probes := append(slices.Clone(edges), token.Draw(t, "probe"), g.Start, g.End, g.Start+1, g.End+1)
		for _, r := range before {
			probes = append(probes, r.Start, r.End, r.Start+1, r.End+1)
		}
		for _, p := range probes {
			in := func(rs []ring.Range) bool {
				return slices.ContainsFunc(rs, func(r ring.Range) bool { return r.Contains(p) })
			}
			if want := in(before) && !g.Contains(p); in(after) != want {
				t.Fatalf("token %d: received %v after %v minus %v = %v, want %v", p, in(after), before, g, after, want)
			}
		}
	})
}

// TestIntersectKeepsTheTokensInBoth checks Intersect against Contains: a
// token is in the result exactly when it is in one of ranges and in one
// of with.
func TestIntersectKeepsTheTokensInBoth(t *testing.T) {
	edges, token, rng := rangeGenerators()
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.SliceOfN(rng, 0, 3).Draw(t, "ranges")
		b := rapid.SliceOfN(rng, 0, 3).Draw(t, "with")
		got := Intersect(a, b...)
		probes := append(slices.Clone(edges), token.Draw(t, "probe"))
		for _, r := range append(slices.Clone(a), b...) {
			probes = append(probes, r.Start, r.End, r.Start+1, r.End+1)
		}
		in := func(rs []ring.Range, p ring.Token) bool {
			return slices.ContainsFunc(rs, func(r ring.Range) bool { return r.Contains(p) })
		}
		for _, p := range probes {
			if want := in(a, p) && in(b, p); in(got, p) != want {
				t.Fatalf("token %d: in %v ∩ %v = %v is %v, want %v", p, a, b, got, in(got, p), want)
			}
		}
	})
}

func TestReceivingTheWholeRingAndCatchingUpOnItCounts(t *testing.T) {
	c := New(ring.NodeID{Addr: "a", Incarnation: 1}, Receiving)
	k := Key{Type: "t", ID: "x"}
	if c.counts(k.Token()) {
		t.Fatal("a core started Receiving counts before it caught up")
	}
	c.Received(ring.Range{Start: 5, End: 5})
	if !c.counts(k.Token()) || len(c.Receiving()) != 0 {
		t.Fatalf("after receiving the whole ring the core still receives %v", c.Receiving())
	}
}

// Two arcs that share a token share the first token of one of their
// spans: Start+1 of either, or zero where one wraps.
func TestOverlapMeansASharedToken(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tok := rapid.SampledFrom([]ring.Token{0, 1, 2, 50, 100, math.MaxUint64 - 1, math.MaxUint64})
		a := ring.Range{Start: tok.Draw(t, "a.start"), End: tok.Draw(t, "a.end")}
		b := ring.Range{Start: tok.Draw(t, "b.start"), End: tok.Draw(t, "b.end")}
		shared := false
		for _, p := range []ring.Token{a.Start + 1, b.Start + 1, 0} {
			shared = shared || (a.Contains(p) && b.Contains(p))
		}
		if Overlap(a, b) != shared {
			t.Fatalf("Overlap(%v, %v) = %v, want %v", a, b, Overlap(a, b), shared)
		}
	})
}

// A hand-off's range added to a core receiving the whole ring must not
// narrow what it receives: adding only adds, and only Received or
// CountEverywhere end receiving.
func TestAddingARangeNeverEndsReceivingAnother(t *testing.T) {
	c := New(ring.NodeID{Addr: "a", Incarnation: 1}, Receiving)
	g := ring.Range{Start: 10, End: 20}
	c.AddReceiving(g)
	if got := c.Receiving(); !slices.Equal(got, []ring.Range{{}}) {
		t.Fatalf("after adding %v to the whole ring the core receives %v, want the whole ring", g, got)
	}
	c = New(ring.NodeID{Addr: "a", Incarnation: 1}, Counting)
	h := ring.Range{Start: 100, End: 200}
	c.AddReceiving(g)
	c.AddReceiving(h)
	if got := c.Receiving(); !slices.Equal(got, []ring.Range{g, h}) {
		t.Fatalf("after adding %v and %v the core receives %v", g, h, got)
	}
	c.AddReceiving()
	if got := c.Receiving(); !slices.Equal(got, []ring.Range{g, h}) {
		t.Fatalf("adding no range changed what the core receives to %v", got)
	}
	c.CountEverywhere()
	if got := c.Receiving(); len(got) != 0 {
		t.Fatalf("after CountEverywhere the core receives %v", got)
	}
}
