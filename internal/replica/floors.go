package replica

import (
	"math"
	"slices"

	"github.com/troupe-go/troupe/ring"
)

// Floor is a range-level promise: this replica refuses, for every key of
// Range, a message of an epoch whose term is below Epoch.Term, and a
// prepare that does not list Epoch.Node and every member of Copiers, or
// does not name every member of Departed gone, whatever its term (a
// hand-off's copy fenced the range here, see MsgFence). Epoch's Node is
// the copier that fenced last; Copiers the copiers of earlier fences;
// Departed the members whose departure from the ring the fences were for
// (a leave or a removal hands their ranges to the copier). A refusal
// names them all, so that an owner whose view shows the changes (see
// AcquireOptions) acquires again above the floor, and one whose view
// does not steps down until its caller's view shows them.
type Floor struct {
	Range ring.Range
	Epoch Epoch
	// Copiers lists the copiers of earlier fences over Range, Epoch.Node
	// excepted, as Departed lists departures: a view that lags the join
	// of one of them and shows the last copier's is refused too.
	Copiers []ring.NodeID
	// Departed lists the departures of every fence that raised the floor
	// over Range, in the order a fence last named them, at most
	// maxDeparted of them (the least recently named go first): a later
	// fence keeps an earlier one's, so that a view lagging both changes
	// is refused by the floor the second leaves.
	Departed []ring.NodeID
}

// maxDeparted bounds the departures, and the earlier copiers, a floor
// names: the least recently named go first. A view lags a change by
// gossip's propagation time, so the members of the last few changes of a
// range are all a lagging owner can miss.
const maxDeparted = 8

// floorSpan is a floor over a span of tokens that does not wrap.
type floorSpan struct {
	span
	epoch    Epoch
	copiers  []ring.NodeID
	departed []ring.NodeID
}

// same reports whether f and g are one floor (over any spans).
func (f floorSpan) same(g floorSpan) bool {
	return f.epoch == g.epoch && slices.Equal(f.copiers, g.copiers) && slices.Equal(f.departed, g.departed)
}

// passedBy reports whether a prepare that lists reads and names gone
// passes the floor: it lists every copier, or names gone a copier the
// floor names departed too, and names every departure gone.
func (f floorSpan) passedBy(reads, gone []ring.NodeID) bool {
	entered := func(y ring.NodeID) bool { return slices.Contains(reads, y) }
	left := func(y ring.NodeID) bool { return slices.Contains(gone, y) }
	shown := func(y ring.NodeID) bool { return copierShown(y, f.departed, entered, left) }
	return shown(f.epoch.Node) && !slices.ContainsFunc(f.copiers, func(y ring.NodeID) bool { return !shown(y) }) && subset(f.departed, gone)
}

// copierShown reports whether a view that shows what entered and gone
// report shows copier y of a floor naming departed: its entry, or, when y
// departed since (the floor names it departed), its departure. A view that
// shows y gone gives sets without y, as they are after y's departure,
// whether it saw y's entry or not (a process never comes back under its
// NodeID).
func copierShown(y ring.NodeID, departed []ring.NodeID, entered, gone func(ring.NodeID) bool) bool {
	return entered(y) || (slices.Contains(departed, y) && gone(y))
}

// joinDeparted returns a's departures followed by b's, each once, in the
// order a fence last named them (one b names again moves to the end),
// without the oldest beyond maxDeparted; a itself when that changes
// nothing. It never writes into a or b, which floors share.
func joinDeparted(a, b []ring.NodeID) []ring.NodeID { return joinNamed(a, b, maxDeparted) }

// joinNamed is joinDeparted keeping at most most members.
func joinNamed(a, b []ring.NodeID, most int) []ring.NodeID {
	if len(b) == 0 {
		return a
	}
	if len(a) >= len(b) && slices.Equal(a[len(a)-len(b):], b) {
		return a // named last already, in this order
	}
	out := make([]ring.NodeID, 0, len(a)+len(b))
	for _, d := range a {
		if !slices.Contains(b, d) {
			out = append(out, d)
		}
	}
	for _, d := range b {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	if len(out) > most {
		out = out[len(out)-most:]
	}
	return out
}

// floors is a set of floors: spans sorted by their first token, not
// overlapping, with adjacent spans of one epoch merged. A token in no
// span has the zero floor.
type floors []floorSpan

// at returns the floor of token t.
func (fs floors) at(t ring.Token) Epoch { return fs.find(t).epoch }

// find returns the span of token t, the zero span when it has no floor.
func (fs floors) find(t ring.Token) floorSpan {
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
		return floorSpan{}
	}
	return fs[i]
}

// raise returns fs with the floor of every token of g raised to e where
// it is older (a pointwise maximum), naming e's copier among its copiers
// (with copiers, earlier ones) and departed among its departures (see
// Floor), and whether anything changed.
func (fs floors) raise(g ring.Range, e Epoch, copiers, departed []ring.NodeID) (floors, bool) {
	if e.IsZero() {
		return fs, false
	}
	copiers = joinDeparted(nil, copiers)
	departed = joinDeparted(nil, departed)
	changed := false
	for _, s := range spans(g) {
		var ch bool
		fs, ch = fs.raiseSpan(s, e, copiers, departed)
		changed = changed || ch
	}
	return fs, changed
}

// without returns ids without id, a copy when it held it.
func without(ids []ring.NodeID, id ring.NodeID) []ring.NodeID {
	if !slices.Contains(ids, id) {
		return ids
	}
	return slices.DeleteFunc(slices.Clone(ids), func(x ring.NodeID) bool { return x == id })
}

func (fs floors) raiseSpan(s span, e Epoch, copiers, departed []ring.NodeID) (floors, bool) {
	out := make(floors, 0, len(fs)+2)
	changed := false
	// next is the first token of s not yet covered; past: s is covered.
	next, past := s.lo, false
	gapUpTo := func(hi ring.Token) {
		if !past && next <= hi {
			out = append(out, floorSpan{span{next, hi}, e, without(copiers, e.Node), departed})
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
			out = append(out, floorSpan{span{f.lo, s.lo - 1}, f.epoch, f.copiers, f.departed})
		}
		lo, hi := max(f.lo, s.lo), min(f.hi, s.hi)
		if lo > 0 {
			gapUpTo(lo - 1)
		}
		top := f.epoch
		if top.Compare(e) < 0 {
			top = e
		}
		// Every copier named, the top one apart: it is among the last
		// named, so maxDeparted earlier ones are kept besides it.
		named := f.copiers
		for _, batch := range [][]ring.NodeID{{f.epoch.Node}, copiers, {e.Node}} {
			named = joinNamed(named, batch, maxDeparted+1)
		}
		if len(named) > maxDeparted && !slices.Contains(named, top.Node) {
			named = named[len(named)-maxDeparted:]
		}
		raised := floorSpan{span{lo, hi}, top, without(named, top.Node), joinDeparted(f.departed, departed)}
		if !raised.same(f) {
			changed = true
		}
		out = append(out, raised)
		if hi == math.MaxUint64 {
			past = true
		} else {
			next = hi + 1
		}
		if f.hi > s.hi {
			out = append(out, floorSpan{span{s.hi + 1, f.hi}, f.epoch, f.copiers, f.departed})
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

// merged joins adjacent spans of one floor.
func (fs floors) merged() floors {
	out := fs[:0]
	for _, f := range fs {
		if n := len(out); n > 0 && out[n-1].same(f) && out[n-1].hi < math.MaxUint64 && out[n-1].hi+1 == f.lo {
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
		out[i] = Floor{Range: rangeOf(f.span), Epoch: f.epoch, Copiers: f.copiers, Departed: f.departed}
	}
	return out
}

// Floors returns this replica's floors (see Floor), in token order.
func (c *Core) Floors() []Floor { return c.floors.list() }

// RestoreFloors loads floors read from the store at start, with Restore.
func (c *Core) RestoreFloors(fs ...Floor) {
	for _, f := range fs {
		c.floors, _ = c.floors.raise(f.Range, f.Epoch, f.Copiers, f.Departed)
	}
}

// floorOf returns the floor of the token of the key ks holds when a
// message of epoch e about it must be refused for it: its term is above e's and above k's promise
// (a newer promise is named instead, as any refusal names it).
func (c *Core) floorOf(ks *keyState, e Epoch) (floorSpan, bool) {
	if len(c.floors) == 0 {
		return floorSpan{}, false
	}
	f := c.floors.find(ks.token)
	return f, f.epoch.Term > e.Term && f.epoch.Term > ks.promised.Term
}

// floorTerm returns the term of the floor of the token of the key ks
// holds.
func (c *Core) floorTerm(ks *keyState) uint64 {
	if len(c.floors) == 0 {
		return 0
	}
	return c.floors.at(ks.token).Term
}
