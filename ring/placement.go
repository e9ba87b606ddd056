package ring

import (
	"cmp"
	"math"
	"slices"
)

// Placement is what a node routes by: the current ring and, while the ranges
// that moved in the latest change are on their way to their new replicas, the
// ring before it. Keys of a range that has not arrived yet are served by their
// owner in the previous ring; the caller marks ranges received as handoff
// completes them, and settles the Placement when all have arrived.
//
// A new replica holds no copy of a moved range until it is received, so it
// must not count toward a write or read quorum for that range before then.
//
// The zero Placement is the empty ring with no handoff. Placement is a value:
// methods that change it return a new one and leave the receiver as it was,
// so a snapshot can be shared between goroutines.
type Placement struct {
	current  *Ring
	previous *Ring // the ring before current, while handoff is in progress
	handoff  bool
	received []span // sorted, disjoint, not adjacent
}

// span is an inclusive interval of tokens [lo, hi]; a Range may need two.
type span struct{ lo, hi uint64 }

// NewPlacement returns a Placement on r with no handoff in progress.
func NewPlacement(r *Ring) Placement {
	return Placement{current: r}
}

// Current returns the ring keys are assigned by now.
func (p Placement) Current() *Ring { return p.current }

// Previous returns the ring before the latest change and true while its
// handoff is in progress; otherwise nil and false. The previous ring may be
// nil (empty) during handoff: the first member's join hands off from nothing.
func (p Placement) Previous() (*Ring, bool) { return p.previous, p.handoff }

// InHandoff reports whether ranges moved by the latest change may still be
// on their way to their new replicas.
func (p Placement) InHandoff() bool { return p.handoff }

// Next returns the Placement after a change of members to r: r becomes
// current and the current ring becomes previous, with no range received yet.
// A ring with the current ring's Version is no change and returns p as it
// is. Membership applies one member per step and lets each handoff settle
// before the next; if a change comes anyway, the ring before the previous
// one is forgotten, and whatever it still had on the way must be recovered
// from replicas.
func (p Placement) Next(r *Ring) Placement {
	if r.Version() == p.current.Version() {
		return p
	}
	return Placement{current: r, previous: p.current, handoff: true}
}

// Received returns p with the keys in g marked as arrived at their new
// replicas, so Serving routes them by the current ring. Outside handoff it
// returns p as it is.
func (p Placement) Received(g Range) Placement {
	if !p.handoff {
		return p
	}
	spans := slices.Clone(p.received)
	switch {
	case g.Start == g.End:
		spans = []span{{0, math.MaxUint64}}
	case g.Start < g.End:
		spans = append(spans, span{uint64(g.Start) + 1, uint64(g.End)})
	default:
		spans = append(spans, span{0, uint64(g.End)})
		if g.Start != math.MaxUint64 {
			spans = append(spans, span{uint64(g.Start) + 1, math.MaxUint64})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	merged := spans[:1]
	for _, s := range spans[1:] {
		last := &merged[len(merged)-1]
		if last.hi == math.MaxUint64 || s.lo <= last.hi+1 {
			last.hi = max(last.hi, s.hi)
			continue
		}
		merged = append(merged, s)
	}
	p.received = merged
	return p
}

// hasReceived reports whether t lies in a range marked received.
func (p Placement) hasReceived(t Token) bool {
	_, found := slices.BinarySearchFunc(p.received, uint64(t), func(s span, t uint64) int {
		switch {
		case s.hi < t:
			return -1
		case s.lo > t:
			return 1
		}
		return 0
	})
	return found
}

// Settled returns p with the previous ring dropped, once every moved range has
// arrived (or handoff was abandoned).
func (p Placement) Settled() Placement {
	return Placement{current: p.current}
}

// OwnerNow returns the owner of t in the current ring; see Ring.Owner.
func (p Placement) OwnerNow(t Token, n int, live Liveness) (NodeID, error) {
	return p.current.Owner(t, n, live)
}

// OwnerBefore returns the owner of t in the previous ring while handoff is in
// progress, and in the current ring otherwise; see Ring.Owner.
func (p Placement) OwnerBefore(t Token, n int, live Liveness) (NodeID, error) {
	if p.handoff {
		return p.previous.Owner(t, n, live)
	}
	return p.current.Owner(t, n, live)
}

// Serving returns the member that serves t: its owner in the previous ring
// while handoff is in progress and t's range has not been marked received,
// and its owner in the current ring otherwise. For a key whose range did not
// move the two are the same member.
func (p Placement) Serving(t Token, n int, live Liveness) (NodeID, error) {
	if p.handoff && !p.hasReceived(t) {
		return p.previous.Owner(t, n, live)
	}
	return p.current.Owner(t, n, live)
}

// Moves returns the ranges whose first n replicas differ between the previous
// and the current ring, or nil when no handoff is in progress.
func (p Placement) Moves(n int) []Move {
	if !p.handoff {
		return nil
	}
	return Moves(p.previous, p.current, n)
}
