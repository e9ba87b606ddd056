package cluster

import (
	"fmt"
	"slices"

	"github.com/troupe-go/troupe/ring"
)

// Status is what the cluster believes about a member. The numeric order is
// the merge precedence between two records at the same membership
// incarnation: a later status wins.
type Status uint8

// The five statuses, in merge precedence order.
const (
	// StatusAlive: the member is considered responsive.
	StatusAlive Status = iota
	// StatusLeaving: the member announced an orderly departure and is
	// handing over what it owns.
	StatusLeaving
	// StatusSuspect: some observer has not heard from the member for
	// SuspectAfter; not yet declared failed.
	StatusSuspect
	// StatusDead: observers declared the member failed. It stays in the
	// member set (and the ring) until a majority side removes it.
	StatusDead
	// StatusLeft: the member was removed from the cluster, by its own
	// orderly leave, by a majority after RemoveAfter, or because a newer
	// process took its address. Final for that NodeID.
	StatusLeft
)

func (s Status) String() string {
	switch s {
	case StatusAlive:
		return "alive"
	case StatusLeaving:
		return "leaving"
	case StatusSuspect:
		return "suspect"
	case StatusDead:
		return "dead"
	case StatusLeft:
		return "left"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// InMemberSet reports whether a member with this status still belongs to
// the member set the ring is built from. Dead members stay until removed.
func (s Status) InMemberSet() bool { return s != StatusLeft }

// SeenAlive reports whether the status counts as alive towards a
// majority: only alive does. A leaving member is still in the member set
// (and the ring) while it hands over, but a majority is reckoned without
// it, neither alive nor among the members counted.
func (s Status) SeenAlive() bool { return s == StatusAlive }

// Member is one membership record: what is known about one node, named by
// its ring.NodeID.
//
// The node's incarnation (ID.Incarnation) must grow from one process to
// the next at an address (the start time in nanoseconds does, within clock
// skew): a lower one than a process already known there is taken for the
// older process and marked left at once.
//
// Incarnation is the membership incarnation: only the member itself raises
// it, to order its own announcements (joining, refuting a suspicion,
// leaving). Observers never raise it; they attach their verdict at the
// incarnation they know.
type Member struct {
	ID          ring.NodeID `msgpack:"id"`
	Incarnation uint64      `msgpack:"minc"`
	Status      Status      `msgpack:"status"`
	// ActorTypes are the actor type names the member hosts, sorted.
	ActorTypes []string `msgpack:"types,omitempty"`
	// Accusers are the addresses of the observers that suspect the member
	// at this incarnation, sorted, at most eight. Confirmations from more
	// than one observer are required before dead where the cluster is
	// large enough.
	Accusers []string `msgpack:"accusers,omitempty"`
	// Joining is set while the member has not finished joining: it is in
	// the member set, but no key is placed on it yet. Only the member
	// itself clears it, at a higher Incarnation, once it has learned the
	// table, installed its view and sees a majority; from then on every
	// member and client may route to it.
	Joining bool `msgpack:"joining,omitempty"`
}

// Clone returns a deep copy of m.
func (m Member) Clone() Member {
	m.ActorTypes = slices.Clone(m.ActorTypes)
	m.Accusers = slices.Clone(m.Accusers)
	return m
}

// Equal reports whether two records are identical.
func (m Member) Equal(o Member) bool {
	return m.ID == o.ID && m.Incarnation == o.Incarnation && m.Status == o.Status &&
		slices.Equal(m.ActorTypes, o.ActorTypes) && slices.Equal(m.Accusers, o.Accusers) && m.Joining == o.Joining
}

// String renders the record for logs and test failures.
func (m Member) String() string {
	if m.Joining {
		return fmt.Sprintf("%s@%d:%s(joining)", m.ID, m.Incarnation, m.Status)
	}
	return fmt.Sprintf("%s@%d:%s", m.ID, m.Incarnation, m.Status)
}
