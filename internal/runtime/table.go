package runtime

import (
	"sync/atomic"
	"unsafe"
)

// cellTable maps keys to cells: open addressing with linear probing over
// slots that keep each key's 64-bit hash beside its cell. Compared with a
// map[string]*cell it hashes a key once (refs keep the hash, and the same
// hash picks the shard), rehashes by moving slots without touching the
// keys, and holds one pointer per slot for the garbage collector to scan.
//
// Writers (put, remove) are serialised by the shard's mutex. Readers (get)
// take no lock: every slot field is read and written atomically, and a
// reader checks the key on the cell it finds. A reader racing a writer may
// miss a present key (a slot mid-move, a table being replaced), never find
// a wrong one; on a miss the caller looks again under the mutex.
type cellTable[S, M, C any] struct {
	slots atomic.Pointer[[]cellSlot[S, M, C]]
	n     int // live entries; writers only
}

type cellSlot[S, M, C any] struct {
	hash atomic.Uint64 // 0 marks an empty slot; real hashes are forced non-zero
	c    atomic.Pointer[cell[S, M, C]]
}

const tableMinSize = 8

func fixHash(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// get returns the cell of key, or nil. Safe without the writers' lock.
func (t *cellTable[S, M, C]) get(h uint64, key string) *cell[S, M, C] {
	p := t.slots.Load()
	if p == nil {
		return nil
	}
	slots := *p
	mask := uint64(len(slots) - 1)
	for i, n := h&mask, 0; n < len(slots); i, n = (i+1)&mask, n+1 {
		s := &slots[i]
		sh := s.hash.Load()
		if sh == 0 {
			return nil
		}
		if sh == h {
			if c := s.c.Load(); c != nil && sameKey(c.key, key) {
				return c
			}
		}
	}
	return nil
}

// sameKey is c.key == key, without a call when both share their bytes
// (a cell made through a ref keeps the ref's key string).
func sameKey(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// put adds c under hash h; the key must not be present.
func (t *cellTable[S, M, C]) put(h uint64, c *cell[S, M, C]) {
	p := t.slots.Load()
	if p == nil || (t.n+1)*4 > len(*p)*3 {
		p = t.resize(max(tableMinSize, 2*t.size()))
	}
	place(*p, h, c)
	t.n++
}

func (t *cellTable[S, M, C]) size() int {
	if p := t.slots.Load(); p != nil {
		return len(*p)
	}
	return 0
}

// place stores c in the first free slot of its probe run: the cell first,
// then the hash that makes the slot visible to readers.
func place[S, M, C any](slots []cellSlot[S, M, C], h uint64, c *cell[S, M, C]) {
	mask := uint64(len(slots) - 1)
	i := h & mask
	for slots[i].hash.Load() != 0 {
		i = (i + 1) & mask
	}
	slots[i].c.Store(c)
	slots[i].hash.Store(h)
}

// resize copies the live entries into a new table of size slots and
// publishes it.
func (t *cellTable[S, M, C]) resize(size int) *[]cellSlot[S, M, C] {
	next := make([]cellSlot[S, M, C], size)
	if p := t.slots.Load(); p != nil {
		for i := range *p {
			s := &(*p)[i]
			if h := s.hash.Load(); h != 0 {
				place(next, h, s.c.Load())
			}
		}
	}
	t.slots.Store(&next)
	return &next
}

// remove deletes the entry holding c, closing the gap by moving later
// entries of the probe run back (no tombstones), and shrinks a table that
// has become mostly empty.
func (t *cellTable[S, M, C]) remove(h uint64, c *cell[S, M, C]) bool {
	p := t.slots.Load()
	if p == nil || t.n == 0 {
		return false
	}
	slots := *p
	mask := uint64(len(slots) - 1)
	i := h & mask
	for {
		s := &slots[i]
		if s.hash.Load() == 0 {
			return false
		}
		if s.c.Load() == c {
			break
		}
		i = (i + 1) & mask
	}
	// Backward-shift deletion: walk the run after i and move back every
	// entry whose home slot does not lie in (i, j].
	j := i
	for {
		j = (j + 1) & mask
		sh := slots[j].hash.Load()
		if sh == 0 {
			break
		}
		home := sh & mask
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			slots[i].hash.Store(0) // hide the slot while it changes hands
			slots[i].c.Store(slots[j].c.Load())
			slots[i].hash.Store(sh)
			i = j
		}
	}
	slots[i].hash.Store(0)
	slots[i].c.Store(nil)
	t.n--
	if len(slots) > tableMinSize && t.n*8 < len(slots) {
		t.resize(len(slots) / 2)
	}
	return true
}

// each calls f for every cell; writers' lock held.
func (t *cellTable[S, M, C]) each(f func(*cell[S, M, C])) {
	p := t.slots.Load()
	if p == nil {
		return
	}
	for i := range *p {
		s := &(*p)[i]
		if s.hash.Load() != 0 {
			f(s.c.Load())
		}
	}
}
