package replica

import (
	"math"

	"github.com/troupe-go/troupe/ring"
)

// span is a closed interval [lo, hi] of tokens, which does not wrap.
type span struct{ lo, hi ring.Token }

// spans returns the tokens of g as one or two spans.
func spans(g ring.Range) []span {
	switch {
	case g.Start < g.End:
		return []span{{g.Start + 1, g.End}}
	case g.Start == math.MaxUint64:
		// After the largest token wraps to zero.
		return []span{{0, g.End}}
	default:
		out := []span{{0, g.End}}
		if g.Start < math.MaxUint64 {
			out = append(out, span{g.Start + 1, math.MaxUint64})
		}
		return out
	}
}

// rangeOf returns the ring.Range holding exactly the tokens of s.
func rangeOf(s span) ring.Range {
	if s.lo == 0 {
		if s.hi == math.MaxUint64 {
			return ring.Range{}
		}
		return ring.Range{Start: math.MaxUint64, End: s.hi}
	}
	return ring.Range{Start: s.lo - 1, End: s.hi}
}

// subtractRange returns the tokens of ranges that are not in g, as ranges.
func subtractRange(ranges []ring.Range, g ring.Range) []ring.Range {
	cut := spans(g)
	var out []ring.Range
	for _, r := range ranges {
		rest := spans(r)
		for _, c := range cut {
			var next []span
			for _, s := range rest {
				if c.hi < s.lo || c.lo > s.hi {
					next = append(next, s)
					continue
				}
				if s.lo < c.lo {
					next = append(next, span{s.lo, c.lo - 1})
				}
				if s.hi > c.hi {
					next = append(next, span{c.hi + 1, s.hi})
				}
			}
			rest = next
		}
		for _, s := range rest {
			out = append(out, rangeOf(s))
		}
	}
	return out
}

// Subtract returns the tokens of ranges that are in none of cut, as
// ranges.
func Subtract(ranges []ring.Range, cut ...ring.Range) []ring.Range {
	for _, g := range cut {
		ranges = subtractRange(ranges, g)
	}
	return ranges
}

// Intersect returns the tokens of ranges that are also in one of with,
// as ranges: Subtract(ranges, Subtract(ranges, with...)...) in one pass
// over the pairs, where that costs a pass over ranges per range of it
// (a node receiving hundreds of ranges asks this of each request).
func Intersect(ranges []ring.Range, with ...ring.Range) []ring.Range {
	var out []ring.Range
	for _, r := range ranges {
		for _, x := range spans(r) {
			for _, w := range with {
				for _, y := range spans(w) {
					if lo, hi := max(x.lo, y.lo), min(x.hi, y.hi); lo <= hi {
						out = append(out, rangeOf(span{lo, hi}))
					}
				}
			}
		}
	}
	return out
}

// Overlap reports whether ranges a and b share a token.
func Overlap(a, b ring.Range) bool {
	for _, x := range spans(a) {
		for _, y := range spans(b) {
			if x.lo <= y.hi && y.lo <= x.hi {
				return true
			}
		}
	}
	return false
}
