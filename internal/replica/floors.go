package replica

import (
	"math"
	"slices"

	"github.com/troupe-go/troupe/ring"
)

// Floor is a range-level promise: this replica refuses, for every key of
// Range, a message of an epoch whose term is below Epoch.Term, and a
// prepare that does not list Epoch.Node, whatever its term (a hand-off's
// copy fenced the range here, see MsgFence). Epoch's Node is the copier
// that fenced: a refusal names it, so that an owner whose replica set
// holds the copier (its view shows the change) acquires again above it,
// and one whose set does not steps down until its caller names it.
type Floor struct {
	Range ring.Range
	Epoch Epoch
}

// floorSpan is a floor over a span of tokens that does not wrap.
type floorSpan struct {
	span
	epoch Epoch
}

// floors is a set of floors: spans sorted by their first token, not
// overlapping, with adjacent spans of one epoch merged. A token in no
// span has the zero floor.
type floors []floorSpan

// at returns the floor of token t.
func (fs floors) at(t ring.Token) Epoch {
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
		return Epoch{}
	}
	return fs[i].epoch
}

// raise returns fs with the floor of every token of g raised to e where
// it is older (a pointwise maximum), and whether anything changed.
func (fs floors) raise(g ring.Range, e Epoch) (floors, bool) {
	if e.IsZero() {
		return fs, false
	}
	changed := false
	for _, s := range spans(g) {
		var ch bool
		fs, ch = fs.raiseSpan(s, e)
		changed = changed || ch
	}
	return fs, changed
}

func (fs floors) raiseSpan(s span, e Epoch) (floors, bool) {
	out := make(floors, 0, len(fs)+2)
	changed := false
	// next is the first token of s not yet covered; past: s is covered.
	next, past := s.lo, false
	gapUpTo := func(hi ring.Token) {
		if !past && next <= hi {
			out = append(out, floorSpan{span{next, hi}, e})
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
			out = append(out, floorSpan{span{f.lo, s.lo - 1}, f.epoch})
		}
		lo, hi := max(f.lo, s.lo), min(f.hi, s.hi)
		if lo > 0 {
			gapUpTo(lo - 1)
		}
		top := f.epoch
		if top.Compare(e) < 0 {
			top = e
			changed = true
		}
		out = append(out, floorSpan{span{lo, hi}, top})
		if hi == math.MaxUint64 {
			past = true
		} else {
			next = hi + 1
		}
		if f.hi > s.hi {
			out = append(out, floorSpan{span{s.hi + 1, f.hi}, f.epoch})
		}
		if hi == s.hi {
			past = true
		}
	}
	gapUpTo(s.hi)
	return out.merged(), changed
}

// highest returns the highest term of a floor over a token of g that
// names another copier than x.
func (fs floors) highest(g ring.Range, x ring.NodeID) uint64 {
	var high uint64
	for _, s := range spans(g) {
		for _, f := range fs {
			if f.hi >= s.lo && f.lo <= s.hi && f.epoch.Node != x {
				high = max(high, f.epoch.Term)
			}
		}
	}
	return high
}

// merged joins adjacent spans of one epoch.
func (fs floors) merged() floors {
	out := fs[:0]
	for _, f := range fs {
		if n := len(out); n > 0 && out[n-1].epoch == f.epoch && out[n-1].hi < math.MaxUint64 && out[n-1].hi+1 == f.lo {
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
		out[i] = Floor{Range: rangeOf(f.span), Epoch: f.epoch}
	}
	return out
}

// Floors returns this replica's floors (see Floor), in token order.
func (c *Core) Floors() []Floor { return c.floors.list() }

// RestoreFloors loads floors read from the store at start, with Restore.
func (c *Core) RestoreFloors(fs ...Floor) {
	for _, f := range fs {
		c.floors, _ = c.floors.raise(f.Range, f.Epoch)
	}
}

// floorOf returns the floor of the token of the key ks holds when a
// message of epoch e about it must be refused for it: its term is above e's and above k's promise
// (a newer promise is named instead, as any refusal names it).
func (c *Core) floorOf(ks *keyState, e Epoch) (Epoch, bool) {
	if len(c.floors) == 0 {
		return Epoch{}, false
	}
	f := c.floors.at(ks.token)
	return f, f.Term > e.Term && f.Term > ks.promised.Term
}

// floorTerm returns the term of the floor of the token of the key ks
// holds.
func (c *Core) floorTerm(ks *keyState) uint64 {
	if len(c.floors) == 0 {
		return 0
	}
	return c.floors.at(ks.token).Term
}
