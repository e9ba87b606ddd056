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
	recs      map[memKey]replica.Record
	receiving []ring.Range
	recorded  bool
	floors    []replica.Floor
	closed    bool
}

// memKey names a record in a Memory: its key and slot as they are, so
// that a Put or Get neither hashes the key onto the ring nor builds the
// key a disk store would (Range does, for the keys it walks).
type memKey struct {
	key  replica.Key
	slot replica.Slot
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{recs: make(map[memKey]replica.Record)}
}

var _ Store = (*Memory)(nil)

// Get implements Store.
func (m *Memory) Get(_ context.Context, key replica.Key, slot replica.Slot) (replica.Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return replica.Record{}, false, replication.ErrClosed
	}
	r, ok := m.recs[memKey{key, slot}]
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
		h, ok := m.recs[memKey{r.Key, r.Slot()}]
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
		if r.Erases() {
			delete(m.recs, memKey{r.Key, r.Slot()})
			continue
		}
		r.Value = slices.Clone(r.Value)
		m.recs[memKey{r.Key, r.Slot()}] = r
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
		enc string // the key as a disk store orders it: by token first
		k   memKey
	}
	var keys []walked
	for k, r := range m.recs {
		if g.Contains(r.Key.Token()) {
			keys = append(keys, walked{string(appendKey(nil, k.key, k.slot)), k})
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
		r, ok := m.recs[k.k]
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
	m.recs = nil
	return nil
}
