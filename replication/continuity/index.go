package continuity

import (
	"container/heap"
	"time"
)

// index is what a member's ledger knows: the ended records its member
// owns, by key, with when each ended and what it takes. It is a plain
// data structure, driven by the ledger actor and tested without it.
// Entries are hints: a record may have moved to another owner or been
// forgotten since, which its owner checks when told to evict it.
type index struct {
	byKey map[string]*entry
	age   byAge // the oldest end first
	bytes int64
}

type entry struct {
	key   string
	ended time.Time
	size  int64
	at    int // position in age
}

func newIndex() *index { return &index{byKey: make(map[string]*entry)} }

// add counts key's record, which ended at ended and takes size bytes. A
// key already counted keeps the later of its two ends: one key holds one
// record at a time, and the later end is the current record's.
func (x *index) add(key string, ended time.Time, size int64) {
	if e, ok := x.byKey[key]; ok {
		if ended.Before(e.ended) {
			return
		}
		x.bytes += size - e.size
		e.ended, e.size = ended, size
		heap.Fix(&x.age, e.at)
		return
	}
	e := &entry{key: key, ended: ended, size: size}
	x.byKey[key] = e
	x.bytes += size
	heap.Push(&x.age, e)
}

// remove forgets key's record that ended at ended; a key counted for
// another end (a later record under the key) stays.
func (x *index) remove(key string, ended time.Time) {
	e, ok := x.byKey[key]
	if !ok || !e.ended.Equal(ended) {
		return
	}
	heap.Remove(&x.age, e.at)
	x.drop(e)
}

func (x *index) drop(e *entry) {
	delete(x.byKey, e.key)
	x.bytes -= e.size
}

// over removes and returns the oldest records while there are more than
// b.MaxRecords or they take more than b.MaxBytes: those to evict, oldest
// first. b has its defaults filled in.
func (x *index) over(b Bounds) []entry {
	var out []entry
	for len(x.age) > 0 && (len(x.age) > b.MaxRecords || x.bytes > b.MaxBytes) {
		e := heap.Pop(&x.age).(*entry)
		x.drop(e)
		out = append(out, *e)
	}
	return out
}

func (x *index) usage() Usage { return Usage{Records: len(x.age), Bytes: x.bytes} }

// byAge is a heap of entries, the oldest end first (then by key, so that
// the order is the same on every run).
type byAge []*entry

func (h byAge) Len() int { return len(h) }
func (h byAge) Less(i, j int) bool {
	if !h[i].ended.Equal(h[j].ended) {
		return h[i].ended.Before(h[j].ended)
	}
	return h[i].key < h[j].key
}
func (h byAge) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}
func (h *byAge) Push(x any) {
	e := x.(*entry)
	e.at = len(*h)
	*h = append(*h, e)
}
func (h *byAge) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
