package adminapi

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/placement"
	"github.com/troupe-go/troupe/ring"
)

// tagRevision starts a revision's digested bytes: a placement version
// (internal/placement) starts with 'P', so the two are never spelt alike.
const tagRevision = 'R'

// digest is an opaque 128-bit token of a canonical encoding.
type digest struct{ b []byte }

func newDigest(tag byte) *digest { return &digest{b: []byte{tag}} }

func (d *digest) uint(v uint64) { d.b = binary.BigEndian.AppendUint64(d.b, v) }

func (d *digest) str(s string) {
	d.uint(uint64(len(s)))
	d.b = append(d.b, s...)
}

func (d *digest) id(id ring.NodeID) {
	d.str(id.Addr)
	d.uint(id.Incarnation)
}

func (d *digest) sum() string { return placement.Digest(d.b) }

// revision digests every record of the view in canonical order: equal
// views give equal revisions whatever order the records came in.
// Accusers are left out: they are the failure detector's, not the view's.
func revision(records []cluster.Member) string {
	rs := slices.Clone(records)
	slices.SortFunc(rs, func(a, b cluster.Member) int { return a.ID.Compare(b.ID) })
	d := newDigest(tagRevision)
	d.uint(uint64(len(rs)))
	for _, m := range rs {
		d.id(m.ID)
		d.uint(m.Incarnation)
		d.uint(uint64(m.Status))
		joining := uint64(0)
		if m.Joining {
			joining = 1
		}
		d.uint(joining)
		d.uint(uint64(len(m.ActorTypes)))
		for _, t := range m.ActorTypes {
			d.str(t)
		}
	}
	return d.sum()
}

// serves reports whether a ring member in status takes keys: alive or
// merely suspected, as placement reckons it.
func serves(status string) bool { return status == "alive" || status == "suspect" }

// statusOf returns m's status as the API names it.
func statusOf(m cluster.Member) string {
	if m.Joining {
		return "joining"
	}
	return m.Status.String()
}

// pinnedAt returns the process that serves the pinned keys of addr as
// the router picks it (internal/remote's view.byAddr): the newest at addr
// among the records neither left, leaving nor joining.
func pinnedAt(records []cluster.Member, addr string) (ring.NodeID, bool) {
	var id ring.NodeID
	found := false
	for _, m := range records {
		if m.ID.Addr != addr || m.Status == cluster.StatusLeft || m.Status == cluster.StatusLeaving || m.Joining {
			continue
		}
		if !found || id.Incarnation < m.ID.Incarnation {
			id, found = m.ID, true
		}
	}
	return id, found
}

// byAddr orders members by address, then incarnation.
func byAddr(a, b cluster.Member) int {
	return cmp.Or(cmp.Compare(a.ID.Addr, b.ID.Addr), cmp.Compare(a.ID.Incarnation, b.ID.Incarnation))
}

// current returns the members as users see them: for each address the
// record of its newest process, unless it left; sorted by address.
func current(records []cluster.Member) []cluster.Member {
	newest := make(map[string]cluster.Member, len(records))
	for _, m := range records {
		if cur, ok := newest[m.ID.Addr]; !ok || cur.ID.Incarnation < m.ID.Incarnation {
			newest[m.ID.Addr] = m
		}
	}
	out := make([]cluster.Member, 0, len(newest))
	for _, m := range newest {
		if m.Status != cluster.StatusLeft {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, byAddr)
	return out
}
