package membership

import (
	"math/bits"
	"slices"

	"github.com/troupe-go/troupe/ring"
)

// broadcasts is the queue of records waiting to be piggybacked. Each record
// is sent at most limit times in all (to any peers), then dropped; a newer
// record about the same NodeID replaces the queued one and starts over.
// Anti-entropy repairs whatever bounded retransmission misses.
type broadcasts struct {
	items []*broadcast
	byID  map[ring.NodeID]*broadcast
	fresh bool // a record was queued since the last eager push
}

type broadcast struct {
	rec   Member
	sends int
	seq   uint64 // queue order, for deterministic ties
}

func newBroadcasts() *broadcasts { return &broadcasts{byID: make(map[ring.NodeID]*broadcast)} }

// queue adds or replaces the record for rec.ID.
func (q *broadcasts) queue(rec Member, seq uint64) {
	if b, ok := q.byID[rec.ID]; ok {
		b.rec, b.sends, b.seq = rec.Clone(), 0, seq
		q.fresh = true
		return
	}
	b := &broadcast{rec: rec.Clone(), seq: seq}
	q.items = append(q.items, b)
	q.byID[rec.ID] = b
	q.fresh = true
}

// pick returns up to n records, least-sent first, counting one send for
// each, and drops records that reached limit sends.
func (q *broadcasts) pick(n, limit int) []Member {
	if len(q.items) == 0 {
		return nil
	}
	slices.SortStableFunc(q.items, func(a, b *broadcast) int {
		if a.sends != b.sends {
			return a.sends - b.sends
		}
		switch {
		case a.seq > b.seq: // newest first among equals
			return -1
		case a.seq < b.seq:
			return 1
		}
		return 0
	})
	n = min(n, len(q.items))
	out := make([]Member, 0, n)
	for _, b := range q.items[:n] {
		out = append(out, b.rec.Clone())
		b.sends++
	}
	q.items = slices.DeleteFunc(q.items, func(b *broadcast) bool {
		if b.sends >= limit {
			delete(q.byID, b.rec.ID)
			return true
		}
		return false
	})
	return out
}

// retransmitLimit is lambda×ceil(log2(n+1)), at least 1.
func retransmitLimit(lambda, n int) int {
	return max(1, lambda*bits.Len(uint(n)))
}
