package cluster

import (
	"cmp"
	"fmt"
	"slices"
)

// NodeID names one process lifetime of a cluster member: the address peers
// dial (the advertised address) and the process incarnation, a number the
// process picks at start and never reuses. A restart at the same address is
// a new NodeID, so records about the old process can never be confused with
// the new one. The incarnation must grow from one process to the next at
// an address (the start time in nanoseconds does, within clock skew): a
// lower one than a process already known there is taken for the older
// process and marked left at once. The shape matches ring.Member so the placement layer can map
// one to the other field by field.
type NodeID struct {
	Addr        string `msgpack:"addr"`
	Incarnation uint64 `msgpack:"inc"`
}

// String renders the identity as addr#incarnation.
func (id NodeID) String() string { return fmt.Sprintf("%s#%d", id.Addr, id.Incarnation) }

// IsZero reports whether id names no node.
func (id NodeID) IsZero() bool { return id.Addr == "" && id.Incarnation == 0 }

// Compare orders identities by address, then process incarnation. Every
// node uses this order wherever an order must be derived alike.
func (id NodeID) Compare(o NodeID) int {
	if c := cmp.Compare(id.Addr, o.Addr); c != 0 {
		return c
	}
	return cmp.Compare(id.Incarnation, o.Incarnation)
}

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

// valid reports whether s is one of the five statuses.
func (s Status) valid() bool { return s <= StatusLeft }

// InMemberSet reports whether a member with this status still belongs to
// the member set the ring is built from. Dead members stay until removed.
func (s Status) InMemberSet() bool { return s != StatusLeft }

// SeenAlive reports whether the status counts towards a majority.
func (s Status) SeenAlive() bool { return s == StatusAlive || s == StatusLeaving }

// maxAccusers bounds the accuser list carried by a record. Only a few
// confirmations are ever needed; the bound keeps records small.
const maxAccusers = 8

// Member is one membership record: what is known about one NodeID.
//
// Incarnation is the membership incarnation: only the member itself raises
// it, to order its own announcements (joining, refuting a suspicion,
// leaving). Observers never raise it; they attach their verdict at the
// incarnation they know.
type Member struct {
	ID          NodeID `msgpack:"id"`
	Incarnation uint64 `msgpack:"minc"`
	Status      Status `msgpack:"status"`
	// ActorTypes are the actor type names the member hosts, sorted.
	ActorTypes []string `msgpack:"types,omitempty"`
	// Accusers are the addresses of the observers that suspect the member
	// at this incarnation, sorted, at most eight. Confirmations from more
	// than one observer are required before dead where the cluster is
	// large enough.
	Accusers []string `msgpack:"accusers,omitempty"`
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
		slices.Equal(m.ActorTypes, o.ActorTypes) && slices.Equal(m.Accusers, o.Accusers)
}

// String renders the record for logs and test failures.
func (m Member) String() string {
	return fmt.Sprintf("%s@%d:%s", m.ID, m.Incarnation, m.Status)
}

// Supersedes reports whether m carries newer information than o about the
// same NodeID, that is whether Merge(o, m) differs from o.
func (m Member) Supersedes(o Member) bool {
	return !Merge(o, m).Equal(o)
}

// Merge combines two records about the same NodeID into the record that
// reflects both. The rules, in order:
//
//  1. The result carries the highest membership incarnation of either, so
//     evidence never lowers it and stale alive gossip cannot undo a verdict.
//  2. The record with the newer incarnation wins; at equal incarnations the
//     status later in precedence (alive < leaving < suspect < dead < left)
//     wins; at equal incarnation and status, actor types and accusers are
//     united.
//  3. left overrides any incarnation: if either record is left, so is the
//     result, and as a tombstone it carries no actor types or accusers.
//
// Merge is commutative, associative and idempotent (a join semilattice),
// so any delivery order of any set of records converges to one value.
// Merging records of different NodeIDs is a programming error and returns a
// unchanged.
func Merge(a, b Member) Member {
	if a.ID != b.ID {
		return a
	}
	left := a.Status == StatusLeft || b.Status == StatusLeft
	var out Member
	switch c := compareKey(a, b); {
	case c > 0:
		out = a.Clone()
	case c < 0:
		out = b.Clone()
	default:
		out = a.Clone()
		out.ActorTypes = unionSorted(a.ActorTypes, b.ActorTypes, 0)
		out.Accusers = unionSorted(a.Accusers, b.Accusers, maxAccusers)
	}
	if left {
		out.Status = StatusLeft
		out.ActorTypes, out.Accusers = nil, nil
	}
	return out
}

// compareKey orders records by (membership incarnation, status).
func compareKey(a, b Member) int {
	if c := cmp.Compare(a.Incarnation, b.Incarnation); c != 0 {
		return c
	}
	return cmp.Compare(a.Status, b.Status)
}

// unionSorted returns the sorted union of two sorted string lists, keeping
// at most limit entries (the smallest) when limit > 0. Keeping the smallest
// entries of a union is itself associative, so truncation does not break
// the merge laws.
func unionSorted(a, b []string, limit int) []string {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var s string
		switch {
		case j >= len(b) || (i < len(a) && a[i] < b[j]):
			s = a[i]
			i++
		case i >= len(a) || b[j] < a[i]:
			s = b[j]
			j++
		default:
			s = a[i]
			i++
			j++
		}
		if n := len(out); n > 0 && out[n-1] == s {
			continue
		}
		out = append(out, s)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}

// normalize sorts and deduplicates the list fields of m so that records
// built by hand or decoded from a peer obey the invariants Merge relies on.
// A left record is a tombstone and carries neither list.
func (m *Member) normalize() {
	if m.Status == StatusLeft {
		m.ActorTypes, m.Accusers = nil, nil
		return
	}
	m.ActorTypes = sortedSet(m.ActorTypes, 0)
	if m.Status == StatusAlive || m.Status == StatusLeaving {
		m.Accusers = nil
		return
	}
	m.Accusers = sortedSet(m.Accusers, maxAccusers)
}

func sortedSet(s []string, limit int) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	s = slices.Compact(s)
	if limit > 0 && len(s) > limit {
		s = s[:limit]
	}
	return s
}
