package replicastore

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"sync"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// Memory is a Store in memory: what it holds is lost with the process.
// The zero value is not usable; use NewMemory.
type Memory struct {
	mu        sync.Mutex
	keys      map[replica.Key]*memRecs
	receiving []ring.Range
	recorded  bool
	floors    []replica.Floor
	closed    bool
}

// memRecs holds a key's records in a Memory, one per slot: a key has a
// handful, so a scan finds one. Keyed by the key as it is, a Put or Get
// neither hashes the key onto the ring nor builds the key a disk store
// would (Range does, for the keys it walks), and a Put of a record the
// store holds writes over it in place: no map assignment, and no
// allocation while its value fits the buffer of the one it replaces
// (every read copies under the lock, so nothing outside sees that
// buffer).
type memRecs struct{ recs []replica.Record }

func (e *memRecs) find(slot replica.Slot) int {
	for i := range e.recs {
		if e.recs[i].Kind == slot.Kind && e.recs[i].Name == slot.Name {
			return i
		}
	}
	return -1
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{keys: make(map[replica.Key]*memRecs)}
}

// get returns the record held in key's slot; the caller holds mu and
// copies its value before letting it go.
func (m *Memory) get(key replica.Key, slot replica.Slot) (replica.Record, bool) {
	e := m.keys[key]
	if e == nil {
		return replica.Record{}, false
	}
	if i := e.find(slot); i >= 0 {
		return e.recs[i], true
	}
	return replica.Record{}, false
}

var _ Store = (*Memory)(nil)

// Get implements Store.
func (m *Memory) Get(_ context.Context, key replica.Key, slot replica.Slot) (replica.Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return replica.Record{}, false, replication.ErrClosed
	}
	r, ok := m.get(key, slot)
	r.Value = slices.Clone(r.Value)
	return r, ok, nil
}

// Held implements Store.
func (m *Memory) Held(_ context.Context, recs []replica.Record, fn func(int, replica.Record, bool)) error {
	m.mu.Lock()
	defer m.mu.Unlock() // fn does not call the store
	if m.closed {
		return replication.ErrClosed
	}
	for i, r := range recs {
		h, ok := m.get(r.Key, r.Slot())
		if h.Kind == replica.KindPromise {
			h.Value = slices.Clone(h.Value)
		} else {
			h.Value = nil
		}
		fn(i, h, ok)
	}
	return nil
}

// Put implements Store.
func (m *Memory) Put(_ context.Context, recs ...replica.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return replication.ErrClosed
	}
	for _, r := range recs {
		e := m.keys[r.Key]
		i := -1
		if e != nil {
			i = e.find(r.Slot())
		}
		switch {
		case r.Erases():
			if i < 0 {
				continue
			}
			e.recs = slices.Delete(e.recs, i, i+1)
			if len(e.recs) == 0 {
				delete(m.keys, r.Key)
			}
		case i >= 0:
			// The held value's buffer is the store's own: reused, unless
			// it is much larger than the value (a shrunk state would
			// keep it all).
			old := e.recs[i].Value
			if r.Value != nil && cap(old) >= len(r.Value) && cap(old) <= 2*len(r.Value)+64 {
				r.Value = append(old[:0], r.Value...)
			} else {
				r.Value = slices.Clone(r.Value)
			}
			e.recs[i] = r
		default:
			r.Value = slices.Clone(r.Value)
			if e == nil {
				e = &memRecs{}
				m.keys[r.Key] = e
			}
			e.recs = append(e.recs, r)
		}
	}
	return nil
}

// Range implements Store.
func (m *Memory) Range(ctx context.Context, g ring.Range, fn func(replica.Record) bool) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return replication.ErrClosed
	}
	type walked struct {
		enc  string // the key as a disk store orders it: by token first
		key  replica.Key
		slot replica.Slot
	}
	var keys []walked
	for k, e := range m.keys {
		if !g.Contains(k.Token()) {
			continue
		}
		for _, r := range e.recs {
			keys = append(keys, walked{string(appendKey(nil, k, r.Slot())), k, r.Slot()})
		}
	}
	// The walk goes in the order of the encoded keys, from after Start.
	slices.SortFunc(keys, func(a, b walked) int { return strings.Compare(a.enc, b.enc) })
	i, _ := slices.BinarySearchFunc(keys, g.Start, func(w walked, start ring.Token) int {
		if ring.Token(binary.BigEndian.Uint64([]byte(w.enc[1:9]))) <= start {
			return -1
		}
		return 1
	})
	keys = slices.Concat(keys[i:], keys[:i])
	m.mu.Unlock()
	// Each record is copied as fn takes it, not the whole rest of the
	// range up front: a caller that stops early (a catch-up chunk)
	// copies only what it took.
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return replication.ErrClosed
		}
		r, ok := m.get(k.key, k.slot)
		r.Value = slices.Clone(r.Value)
		m.mu.Unlock()
		if !ok {
			continue // removed since the keys were taken
		}
		if !fn(r) {
			return nil
		}
	}
	return nil
}

// Receiving implements Store.
func (m *Memory) Receiving(context.Context) ([]ring.Range, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, false, replication.ErrClosed
	}
	return slices.Clone(m.receiving), m.recorded, nil
}

// SetReceiving implements Store.
func (m *Memory) SetReceiving(_ context.Context, ranges []ring.Range) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return replication.ErrClosed
	}
	m.receiving, m.recorded = slices.Clone(ranges), true
	return nil
}

// Floors implements Store.
func (m *Memory) Floors(context.Context) ([]replica.Floor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, replication.ErrClosed
	}
	return slices.Clone(m.floors), nil
}

// SetFloors implements Store.
func (m *Memory) SetFloors(_ context.Context, floors []replica.Floor) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return replication.ErrClosed
	}
	m.floors = slices.Clone(floors)
	return nil
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.keys = nil
	return nil
}
