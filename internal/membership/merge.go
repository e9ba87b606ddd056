package membership

import (
	"cmp"
	"slices"

	"github.com/troupe-go/troupe/cluster"
)

// maxAccusers bounds the accuser list carried by a record. Only a few
// confirmations are ever needed; the bound keeps records small.
const maxAccusers = 8

// validStatus reports whether s is one of the five statuses.
func validStatus(s Status) bool { return s <= cluster.StatusLeft }

// Merge combines two records about the same NodeID into the record that
// reflects both. The rules, in order:
//
//  1. The result carries the highest membership incarnation of either, so
//     evidence never lowers it and stale alive gossip cannot undo a verdict.
//  2. The record with the newer incarnation wins; at equal incarnations the
//     status later in precedence (alive < leaving < suspect < dead < left)
//     wins; at equal incarnation and status, actor types and accusers are
//     united, and the member counts as joining only if both say so.
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
		// Joining only ever clears: a record that says the member is
		// ready wins, so the merge stays commutative.
		out.Joining = a.Joining && b.Joining
	}
	if left {
		out.Status = StatusLeft
		out.ActorTypes, out.Accusers = nil, nil
		out.Joining = false
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
func normalize(m *Member) {
	if m.Status == StatusLeft {
		m.ActorTypes, m.Accusers = nil, nil
		m.Joining = false
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
