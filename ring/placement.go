package ring

// Placement is what a node routes by: the current ring and, while handoff of
// the ranges that moved is under way, the ring before it. A key whose range is
// still being received keeps being served from its owner in the previous ring.
// The zero Placement is the empty ring with no handoff. Placement is a small
// value; methods that change it return a new one.
type Placement struct {
	current  *Ring
	previous *Ring // nil once handoff is complete
	handoff  bool
}

// NewPlacement returns a Placement on r with no handoff in progress.
func NewPlacement(r *Ring) Placement {
	return Placement{current: r}
}

// Current returns the ring keys are assigned by now.
func (p Placement) Current() *Ring { return p.current }

// Previous returns the ring before the latest change and true while its
// handoff is in progress; otherwise nil and false.
func (p Placement) Previous() (*Ring, bool) { return p.previous, p.handoff }

// InHandoff reports whether ranges moved by the latest change may still be
// on their way to their new replicas.
func (p Placement) InHandoff() bool { return p.handoff }

// Next returns the Placement after a change of members to r: r becomes
// current and the current ring becomes previous. A ring with the current
// ring's Version is no change and returns p unchanged. Membership applies one
// member per step and settles each handoff before the next; if a change comes
// anyway, the ring before the previous one is forgotten, and the ranges it
// still had on their way have to be recovered from replicas.
func (p Placement) Next(r *Ring) Placement {
	if r.Version() == p.current.Version() {
		return p
	}
	return Placement{current: r, previous: p.current, handoff: true}
}

// Settled returns p with the previous ring dropped, once every moved range has
// arrived (or handoff was abandoned).
func (p Placement) Settled() Placement {
	return Placement{current: p.current}
}

// OwnerNow returns the owner of t in the current ring; see Ring.Owner.
func (p Placement) OwnerNow(t Token, n int, live Liveness) (Member, error) {
	return p.current.Owner(t, n, live)
}

// OwnerBefore returns the owner of t in the previous ring while handoff is in
// progress, and in the current ring otherwise; see Ring.Owner.
func (p Placement) OwnerBefore(t Token, n int, live Liveness) (Member, error) {
	if p.handoff {
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
