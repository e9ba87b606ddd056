package actor

// cellTable maps keys to cells: open addressing with linear probing over
// slots that keep each key's 64-bit hash beside its cell. Compared with a
// map[string]*cell it hashes a key once (the same hash picks the shard),
// rehashes by moving slots without touching the keys, and holds one
// pointer per slot instead of two, which the garbage collector scans.
// The caller serialises access (the shard's lock).
type cellTable[S, M any] struct {
	slots []slot16[S, M]
	n     int // live entries
}

type slot16[S, M any] struct {
	hash uint64 // 0 marks an empty slot; real hashes are forced non-zero
	c    *cell[S, M]
}

const tableMinSize = 8

func fixHash(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// get returns the cell of key, or nil.
func (t *cellTable[S, M]) get(h uint64, key string) *cell[S, M] {
	if t.n == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.hash == 0 {
			return nil
		}
		if s.hash == h && s.c.key == key {
			return s.c
		}
	}
}

// put adds c under hash h; the key must not be present.
func (t *cellTable[S, M]) put(h uint64, c *cell[S, M]) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	t.place(h, c)
	t.n++
}

func (t *cellTable[S, M]) place(h uint64, c *cell[S, M]) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i].hash != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = slot16[S, M]{hash: h, c: c}
}

func (t *cellTable[S, M]) grow() {
	old := t.slots
	size := max(tableMinSize, 2*len(old))
	t.slots = make([]slot16[S, M], size)
	for _, s := range old {
		if s.hash != 0 {
			t.place(s.hash, s.c)
		}
	}
}

// remove deletes the entry holding c, closing the gap by moving later
// entries of the probe run back (no tombstones), and shrinks a table that
// has become mostly empty.
func (t *cellTable[S, M]) remove(h uint64, c *cell[S, M]) bool {
	if t.n == 0 {
		return false
	}
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for {
		s := &t.slots[i]
		if s.hash == 0 {
			return false
		}
		if s.c == c {
			break
		}
		i = (i + 1) & mask
	}
	// Backward-shift deletion: walk the run after i and move back every
	// entry whose home slot does not lie in (i, j].
	j := i
	for {
		j = (j + 1) & mask
		s := t.slots[j]
		if s.hash == 0 {
			break
		}
		home := s.hash & mask
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = s
			i = j
		}
	}
	t.slots[i] = slot16[S, M]{}
	t.n--
	if len(t.slots) > tableMinSize && t.n*8 < len(t.slots) {
		t.shrink()
	}
	return true
}

func (t *cellTable[S, M]) shrink() {
	old := t.slots
	t.slots = make([]slot16[S, M], len(old)/2)
	for _, s := range old {
		if s.hash != 0 {
			t.place(s.hash, s.c)
		}
	}
}

// each calls f for every cell.
func (t *cellTable[S, M]) each(f func(*cell[S, M])) {
	for _, s := range t.slots {
		if s.hash != 0 {
			f(s.c)
		}
	}
}
