package idempotency

import (
	"container/list"
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Scope is what a key is unique within.
type Scope struct {
	App, Route, Tenant string
}

// Response is a kept response: status, headers and body.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r Response) size() int {
	n := len(r.Body)
	for k, vs := range r.Header {
		n += len(k)
		for _, v := range vs {
			n += len(v)
		}
	}
	return n
}

// Outcome says what Begin found for a key.
type Outcome uint8

const (
	// Started: the key is new (or its record expired); the caller runs
	// the request as Claim.Attempt and completes it.
	Started Outcome = iota + 1
	// Replay: the key's request completed with the same hash; Claim.Response
	// is its response.
	Replay
	// InProgress: the key's request, with the same hash, has not completed.
	InProgress
	// Conflict: the key was used for a request with another hash.
	Conflict
)

// Claim is Begin's answer.
type Claim struct {
	Outcome Outcome
	// Attempt names a Started attempt, for Complete.
	Attempt uint64
	// Response is the kept response of a Replay.
	Response *Response
}

// Store keeps a record per scoped key. Its methods are called
// concurrently.
type Store interface {
	// Begin looks the key up and, if it holds no record, starts an attempt
	// for a request with hash h. It must be atomic per key: of two Begins
	// for a new key, one is Started and the other finds it.
	Begin(ctx context.Context, s Scope, key string, h Hash) (Claim, error)
	// Complete keeps r as the response of the key's attempt. An attempt
	// that is not the key's current one fails with ErrStaleAttempt.
	Complete(ctx context.Context, s Scope, key string, attempt uint64, r Response) error
}

// MemoryConfig bounds a MemoryStore. The zero value means the defaults.
type MemoryConfig struct {
	// Retention is how long a completed record is kept. Default 24 h.
	Retention time.Duration
	// MaxRecords bounds the completed records kept: past it the oldest
	// completed go first. Default 1,000,000. A record in progress is never
	// dropped.
	MaxRecords int
	// MaxBytes bounds the bytes of the kept responses, the same way.
	// Default 1 GiB.
	MaxBytes int64
	// Now is the clock; default time.Now.
	Now func() time.Time
}

type memKey struct {
	s   Scope
	key string
}

type memRecord struct {
	hash    Hash
	attempt uint64
	resp    *Response // nil while in progress
	size    int
	expires time.Time
	done    *list.Element // in MemoryStore.done, oldest first
}

// MemoryStore is a Store in this process's memory.
type MemoryStore struct {
	cfg MemoryConfig

	mu      sync.Mutex
	records map[memKey]*memRecord
	done    list.List // memKey of completed records, in completion order
	bytes   int64
	next    uint64
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(cfg MemoryConfig) (*MemoryStore, error) {
	switch {
	case cfg.Retention < 0:
		return nil, fmt.Errorf("%w: MemoryConfig.Retention %v is negative", ErrInvalidConfig, cfg.Retention)
	case cfg.MaxRecords < 0:
		return nil, fmt.Errorf("%w: MemoryConfig.MaxRecords %d is negative", ErrInvalidConfig, cfg.MaxRecords)
	case cfg.MaxBytes < 0:
		return nil, fmt.Errorf("%w: MemoryConfig.MaxBytes %d is negative", ErrInvalidConfig, cfg.MaxBytes)
	}
	if cfg.Retention == 0 {
		cfg.Retention = 24 * time.Hour
	}
	if cfg.MaxRecords == 0 {
		cfg.MaxRecords = 1_000_000
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 1 << 30
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &MemoryStore{cfg: cfg, records: make(map[memKey]*memRecord)}, nil
}

// Begin implements Store.
func (m *MemoryStore) Begin(_ context.Context, s Scope, key string, h Hash) (Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire()
	k := memKey{s, key}
	if r, ok := m.records[k]; ok {
		switch {
		case r.hash != h:
			return Claim{Outcome: Conflict}, nil
		case r.resp == nil:
			return Claim{Outcome: InProgress}, nil
		default:
			return Claim{Outcome: Replay, Response: r.resp}, nil
		}
	}
	m.next++
	m.records[k] = &memRecord{hash: h, attempt: m.next}
	return Claim{Outcome: Started, Attempt: m.next}, nil
}

// Complete implements Store.
func (m *MemoryStore) Complete(_ context.Context, s Scope, key string, attempt uint64, resp Response) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := memKey{s, key}
	r, ok := m.records[k]
	if !ok || r.attempt != attempt || r.resp != nil {
		return fmt.Errorf("%w: %q attempt %d", ErrStaleAttempt, key, attempt)
	}
	resp.Header = resp.Header.Clone()
	r.resp = &resp
	r.size = resp.size()
	r.expires = m.cfg.Now().Add(m.cfg.Retention)
	r.done = m.done.PushBack(k)
	m.bytes += int64(r.size)
	m.expire()
	return nil
}

// Len returns the records kept: completed and in progress.
func (m *MemoryStore) Len() (completed, inProgress int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done.Len(), len(m.records) - m.done.Len()
}

// expire drops the completed records past their retention, then the
// oldest completed ones while a bound is exceeded. Completion order is
// expiry order, since the retention is one for all.
func (m *MemoryStore) expire() {
	now := m.cfg.Now()
	for e := m.done.Front(); e != nil; e = m.done.Front() {
		r := m.records[e.Value.(memKey)]
		if now.Before(r.expires) && m.done.Len() <= m.cfg.MaxRecords && m.bytes <= m.cfg.MaxBytes {
			return
		}
		m.done.Remove(e)
		delete(m.records, e.Value.(memKey))
		m.bytes -= int64(r.size)
	}
}
