package membership

import (
	"slices"

	"github.com/troupe-go/troupe/ring"
)

// Table is a membership table: one merged record per NodeID, with the
// address rule applied across identities. It is a plain data structure,
// not safe for concurrent use; the Core owns one.
//
// Iteration order is the order identities were first inserted, never a map
// order, so everything derived from a table is reproducible from a seed.
type Table struct {
	byID   map[ring.NodeID]int // index into recs
	recs   []Member
	byAddr map[string][]ring.NodeID
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{byID: make(map[ring.NodeID]int), byAddr: make(map[string][]ring.NodeID)}
}

// Change is one record that Apply altered: its value before (Prev, zero if
// the identity was new) and after.
type Change struct {
	Prev  Member
	Cur   Member
	IsNew bool
}

// Len returns the number of records, tombstones included.
func (t *Table) Len() int { return len(t.recs) }

// Get returns the record for id.
func (t *Table) Get(id ring.NodeID) (Member, bool) {
	i, ok := t.byID[id]
	if !ok {
		return Member{}, false
	}
	return t.recs[i], true
}

// Records returns a deep copy of every record, sorted by NodeID.
func (t *Table) Records() []Member {
	out := make([]Member, len(t.recs))
	for i, r := range t.recs {
		out[i] = r.Clone()
	}
	slices.SortFunc(out, func(a, b Member) int { return a.ID.Compare(b.ID) })
	return out
}

// snapshot returns a deep copy of every record in insertion order.
func (t *Table) snapshot() []Member {
	out := make([]Member, len(t.recs))
	for i, r := range t.recs {
		out[i] = r.Clone()
	}
	return out
}

// each calls fn for every record in insertion order; fn must not modify the
// table.
func (t *Table) each(fn func(m Member)) {
	for _, r := range t.recs {
		fn(r)
	}
}

// at returns the i-th record in insertion order.
func (t *Table) at(i int) Member { return t.recs[i] }

// Apply merges rec into the table and returns the records that changed.
//
// Besides Merge, Apply enforces the address rule: a process incarnation
// older than another known at the same address belongs to a process that
// has been replaced, so its record is marked left at once, whichever of the
// two records arrives first.
func (t *Table) Apply(rec Member) []Change {
	if i, ok := t.byID[rec.ID]; ok && !mayChange(t.recs[i], rec) {
		// Every older process at this address was retired when this
		// identity was first stored, so nothing else can change either.
		return nil
	}
	rec = rec.Clone()
	normalize(&rec)
	var changes []Change
	if t.newerAt(rec.ID) {
		rec.Status = StatusLeft
		normalize(&rec)
	}
	if c, ok := t.put(rec); ok {
		changes = append(changes, c)
	}
	// A newer process at this address retires every older one.
	for _, other := range slices.Clone(t.byAddr[rec.ID.Addr]) {
		if other.Incarnation >= rec.ID.Incarnation {
			continue
		}
		old := t.recs[t.byID[other]]
		if old.Status == StatusLeft {
			continue
		}
		retired := old.Clone()
		retired.Status = StatusLeft
		normalize(&retired)
		if c, ok := t.put(retired); ok {
			changes = append(changes, c)
		}
	}
	return changes
}

// mayChange is a cheap, allocation-free test of whether merging rec into
// prev can change prev. It may answer true when the merge turns out a
// no-op, never false when it would not be.
func mayChange(prev, rec Member) bool {
	if prev.Status == StatusLeft {
		return rec.Incarnation > prev.Incarnation
	}
	if rec.Status == StatusLeft {
		return true
	}
	switch compareKey(rec, prev) {
	case -1:
		return false
	case 1:
		return true
	}
	return !isSubset(rec.ActorTypes, prev.ActorTypes) || !isSubset(rec.Accusers, prev.Accusers) || (prev.Joining && !rec.Joining)
}

// isSubset reports whether every element of a is in b; both are short.
func isSubset(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

// newerAt reports whether a newer process incarnation than id's is known at
// id's address.
func (t *Table) newerAt(id ring.NodeID) bool {
	for _, other := range t.byAddr[id.Addr] {
		if other.Incarnation > id.Incarnation {
			return true
		}
	}
	return false
}

func (t *Table) put(rec Member) (Change, bool) {
	i, ok := t.byID[rec.ID]
	if !ok {
		t.byID[rec.ID] = len(t.recs)
		t.recs = append(t.recs, rec)
		t.byAddr[rec.ID.Addr] = append(t.byAddr[rec.ID.Addr], rec.ID)
		return Change{Cur: rec.Clone(), IsNew: true}, true
	}
	prev := t.recs[i]
	merged := Merge(prev, rec)
	if merged.Equal(prev) {
		return Change{}, false
	}
	t.recs[i] = merged
	return Change{Prev: prev, Cur: merged.Clone()}, true
}

// set replaces the record for rec.ID without merging. The Core uses it for
// its own record, which only it may write.
func (t *Table) set(rec Member) {
	if i, ok := t.byID[rec.ID]; ok {
		t.recs[i] = rec
		return
	}
	t.put(rec)
}

// Remove forgets id entirely. Used to collect tombstones.
func (t *Table) Remove(id ring.NodeID) {
	i, ok := t.byID[id]
	if !ok {
		return
	}
	last := len(t.recs) - 1
	if i != last {
		t.recs[i] = t.recs[last]
		t.byID[t.recs[i].ID] = i
	}
	t.recs = t.recs[:last]
	delete(t.byID, id)
	ids := slices.DeleteFunc(t.byAddr[id.Addr], func(o ring.NodeID) bool { return o == id })
	if len(ids) == 0 {
		delete(t.byAddr, id.Addr)
	} else {
		t.byAddr[id.Addr] = ids
	}
}
