package replicastore

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// Memory is a Store in memory: what it holds is lost with the process.
// The zero value is not usable; use NewMemory.
type Memory struct {
	mu        sync.Mutex
	recs      map[string]replica.Record
	receiving []ring.Range
	recorded  bool
	floors    []replica.Floor
	closed    bool
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{recs: make(map[string]replica.Record)}
}

var _ Store = (*Memory)(nil)

// Get implements Store.
func (m *Memory) Get(_ context.Context, key replica.Key, slot replica.Slot) (replica.Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return replica.Record{}, false, replication.ErrClosed
	}
	r, ok := m.recs[string(appendKey(nil, key, slot))]
	r.Value = slices.Clone(r.Value)
	return r, ok, nil
}

// Put implements Store.
func (m *Memory) Put(_ context.Context, recs ...replica.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return replication.ErrClosed
	}
	for _, r := range recs {
		r.Value = slices.Clone(r.Value)
		m.recs[string(appendKey(nil, r.Key, r.Slot()))] = r
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
	keys := make([]string, 0, len(m.recs))
	for k, r := range m.recs {
		if g.Contains(r.Key.Token()) {
			keys = append(keys, k)
		}
	}
	// The encoded keys sort by token; the walk starts after Start.
	slices.Sort(keys)
	i, _ := slices.BinarySearchFunc(keys, g.Start, func(k string, start ring.Token) int {
		if ring.Token(binary.BigEndian.Uint64([]byte(k[1:9]))) <= start {
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
		r, ok := m.recs[k]
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
