package continuity

import (
	"container/heap"
	"time"
)

// index is what a member's ledger knows: the ended records its member
// owns, by key, with when each ended, when its retention ends and what it
// takes. It is a plain data structure, driven by the ledger actor and
// tested without it. Entries are hints: a record may have moved to
// another owner or been forgotten since, which its owner checks when
// told to evict it.
type index struct {
	byKey  map[string]*entry
	age    entryHeap // the oldest end first
	expiry entryHeap // the earliest end of retention first
	bytes  int64
	// sweepAt is when the ledger's sweep timer fires; zero when unset.
	sweepAt time.Time
}

type entry struct {
	key     string
	ended   time.Time
	expires time.Time
	size    int64
	at      [2]int // positions in age and expiry
}

func newIndex() *index {
	return &index{byKey: make(map[string]*entry), age: entryHeap{which: byEnd}, expiry: entryHeap{which: byExpiry}}
}

// add counts key's record, which ended at ended, is kept until expires
// and takes size bytes. A key already counted keeps the later of its two
// ends: one key holds one record at a time, and the later end is the
// current record's.
func (x *index) add(key string, ended, expires time.Time, size int64) {
	if e, ok := x.byKey[key]; ok {
		if ended.Before(e.ended) {
			return
		}
		x.bytes += size - e.size
		e.ended, e.expires, e.size = ended, expires, size
		heap.Fix(&x.age, e.at[byEnd])
		heap.Fix(&x.expiry, e.at[byExpiry])
		return
	}
	e := &entry{key: key, ended: ended, expires: expires, size: size}
	x.byKey[key] = e
	x.bytes += size
	heap.Push(&x.age, e)
	heap.Push(&x.expiry, e)
}

// remove forgets key's record that ended at ended; a key counted for
// another end (a later record under the key) stays.
func (x *index) remove(key string, ended time.Time) {
	e, ok := x.byKey[key]
	if !ok || !e.ended.Equal(ended) {
		return
	}
	x.drop(e)
}

// drop removes e from the index.
func (x *index) drop(e *entry) {
	heap.Remove(&x.age, e.at[byEnd])
	heap.Remove(&x.expiry, e.at[byExpiry])
	delete(x.byKey, e.key)
	x.bytes -= e.size
}

// over removes and returns the oldest records while there are more than
// b.MaxRecords or they take more than b.MaxBytes: those to evict, oldest
// first. b has its defaults filled in.
func (x *index) over(b Bounds) []entry {
	var out []entry
	for len(x.age.es) > 0 && (len(x.age.es) > b.MaxRecords || x.bytes > b.MaxBytes) {
		e := x.age.es[0]
		x.drop(e)
		out = append(out, *e)
	}
	return out
}

// expired removes and returns the records whose retention ended at now
// or before, the earliest first.
func (x *index) expired(now time.Time) []entry {
	var out []entry
	for len(x.expiry.es) > 0 && !x.expiry.es[0].expires.After(now) {
		e := x.expiry.es[0]
		x.drop(e)
		out = append(out, *e)
	}
	return out
}

// nextExpiry returns when the earliest retention ends; false when the
// index is empty.
func (x *index) nextExpiry() (time.Time, bool) {
	if len(x.expiry.es) == 0 {
		return time.Time{}, false
	}
	return x.expiry.es[0].expires, true
}

func (x *index) usage() Usage { return Usage{Records: len(x.age.es), Bytes: x.bytes} }

// The orders of an index's heaps, which also index entry.at.
const (
	byEnd    = 0
	byExpiry = 1
)

// entryHeap is a heap of entries by end (then by key, so that the order
// is the same on every run) or by end of retention.
type entryHeap struct {
	which int
	es    []*entry
}

func (h *entryHeap) Len() int { return len(h.es) }
func (h *entryHeap) Less(i, j int) bool {
	a, b := h.es[i], h.es[j]
	ta, tb := a.ended, b.ended
	if h.which == byExpiry {
		ta, tb = a.expires, b.expires
	}
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.key < b.key
}
func (h *entryHeap) Swap(i, j int) {
	h.es[i], h.es[j] = h.es[j], h.es[i]
	h.es[i].at[h.which], h.es[j].at[h.which] = i, j
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.at[h.which] = len(h.es)
	h.es = append(h.es, e)
}
func (h *entryHeap) Pop() any {
	e := h.es[len(h.es)-1]
	h.es[len(h.es)-1] = nil
	h.es = h.es[:len(h.es)-1]
	return e
}
