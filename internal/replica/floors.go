package replica

import (
	"math"
	"slices"

	"github.com/troupe-go/troupe/ring"
)

// Floor is a range-level promise: this replica refuses, for every key of
// Range, a message of an epoch whose term is below Term (a hand-off's
// copy fenced the range here, see MsgFence).
type Floor struct {
	Range ring.Range
	Term  uint64
}

// floorSpan is a floor over a span of tokens that does not wrap.
type floorSpan struct {
	span
	term uint64
}

// floors is a set of floors: spans sorted by their first token, not
// overlapping, with adjacent spans of one term merged. A token in no span
// has floor 0.
type floors []floorSpan

// at returns the floor of token t.
func (fs floors) at(t ring.Token) uint64 {
	i, found := slices.BinarySearchFunc(fs, t, func(f floorSpan, t ring.Token) int {
		switch {
		case f.hi < t:
			return -1
		case f.lo > t:
			return 1
		}
		return 0
	})
	if !found {
		return 0
	}
	return fs[i].term
}

// raise returns fs with the floor of every token of g raised to term
// where it is lower (a pointwise maximum), and whether anything changed.
func (fs floors) raise(g ring.Range, term uint64) (floors, bool) {
	if term == 0 {
		return fs, false
	}
	changed := false
	for _, s := range spans(g) {
		var ch bool
		fs, ch = fs.raiseSpan(s, term)
		changed = changed || ch
	}
	return fs, changed
}

func (fs floors) raiseSpan(s span, term uint64) (floors, bool) {
	out := make(floors, 0, len(fs)+2)
	changed := false
	// next is the first token of s not yet covered; past: s is covered.
	next, past := s.lo, false
	gapUpTo := func(hi ring.Token) {
		if !past && next <= hi {
			out = append(out, floorSpan{span{next, hi}, term})
			changed = true
		}
	}
	for _, f := range fs {
		if f.hi < s.lo || f.lo > s.hi {
			if f.lo > s.hi {
				gapUpTo(s.hi)
				past = true
			}
			out = append(out, f)
			continue
		}
		if f.lo < s.lo {
			out = append(out, floorSpan{span{f.lo, s.lo - 1}, f.term})
		}
		lo, hi := max(f.lo, s.lo), min(f.hi, s.hi)
		if lo > 0 {
			gapUpTo(lo - 1)
		}
		if f.term < term {
			changed = true
		}
		out = append(out, floorSpan{span{lo, hi}, max(f.term, term)})
		if hi == math.MaxUint64 {
			past = true
		} else {
			next = hi + 1
		}
		if f.hi > s.hi {
			out = append(out, floorSpan{span{s.hi + 1, f.hi}, f.term})
		}
		if hi == s.hi {
			past = true
		}
	}
	gapUpTo(s.hi)
	return out.merged(), changed
}

// merged joins adjacent spans of one term.
func (fs floors) merged() floors {
	out := fs[:0]
	for _, f := range fs {
		if n := len(out); n > 0 && out[n-1].term == f.term && out[n-1].hi < math.MaxUint64 && out[n-1].hi+1 == f.lo {
			out[n-1].hi = f.hi
			continue
		}
		out = append(out, f)
	}
	return out
}

// list returns fs as Floors, in token order.
func (fs floors) list() []Floor {
	out := make([]Floor, len(fs))
	for i, f := range fs {
		out[i] = Floor{Range: rangeOf(f.span), Term: f.term}
	}
	return out
}

// Floors returns this replica's floors (see Floor), in token order.
func (c *Core) Floors() []Floor { return c.floors.list() }

// RestoreFloors loads floors read from the store at start, with Restore.
func (c *Core) RestoreFloors(fs ...Floor) {
	for _, f := range fs {
		c.floors, _ = c.floors.raise(f.Range, f.Term)
	}
}

// promiseOf returns the epoch below which a message about k is refused:
// k's promise, or the floor of k's token when that is above it.
func (c *Core) promiseOf(k Key, ks *keyState) Epoch {
	p := ks.promised
	if len(c.floors) == 0 {
		return p
	}
	if f := c.floors.at(k.Token()); f > p.Term {
		return Epoch{Term: f}
	}
	return p
}
