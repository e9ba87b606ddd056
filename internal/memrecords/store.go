package memrecords

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/troupe-go/troupe/noderecord"
)

// DefaultHistory is the Config.History of a zero Config.
const DefaultHistory = 1024

// Config configures a Store. The zero value is the default.
type Config struct {
	// History bounds the changes kept for watchers to resume from; a
	// watcher further behind gets noderecord.ErrCompacted. Default
	// DefaultHistory.
	History int
	// Clock sets Observed and times leases. Default the real clock.
	Clock Clock
}

// Store is the in-process noderecord.Store. Create it with New.
type Store struct {
	history int
	clock   Clock

	mu      sync.Mutex
	rev     uint64
	records map[noderecord.Key]*entry
	// changes holds revisions compacted+1 ... rev, one per revision.
	changes   []change
	compacted uint64
	// changed is closed and replaced at each change, compaction,
	// availability change and at Close: it wakes the watchers.
	changed     chan struct{}
	unavailable error
	// watches counts the watchers made; those numbered below failBelow
	// fail with failed (see FailWatches).
	watches   uint64
	failBelow uint64
	failed    error
	closed    bool
	stopTimer func() bool
	timerAt   time.Time
}

type entry struct {
	data        []byte // encoded, so that every read returns a fresh copy
	incarnation string
	seq         uint64
	expires     time.Time
}

type change struct {
	kind noderecord.EventKind
	key  noderecord.Key
	data []byte // the record, for a put
}

var _ noderecord.Store = (*Store)(nil)

// New returns an empty store.
func New(cfg Config) *Store {
	if cfg.History <= 0 {
		cfg.History = DefaultHistory
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	return &Store{
		history: cfg.History,
		clock:   cfg.Clock,
		records: map[noderecord.Key]*entry{},
		changed: make(chan struct{}),
	}
}

// Put implements noderecord.Store.
func (s *Store) Put(ctx context.Context, r noderecord.Record, ttl time.Duration) (noderecord.PutResult, error) {
	if err := ctx.Err(); err != nil {
		return noderecord.PutResult{}, opError("put", ctxError(err))
	}
	if ttl <= 0 {
		ttl = noderecord.DefaultTimings().LeaseTTL
	}
	if err := r.Validate(); err != nil {
		return noderecord.PutResult{}, opError("put", err)
	}
	k := r.Key()
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.beginLocked()
	if err != nil {
		return noderecord.PutResult{}, opError("put", err)
	}
	var stored *noderecord.Record
	if e, ok := s.records[k]; ok {
		stored = &noderecord.Record{Incarnation: e.incarnation, Seq: e.seq}
	}
	d := noderecord.Decide(stored, r)
	if !d.Accepted() {
		return noderecord.PutResult{Decision: d, Revision: s.revision()}, nil
	}
	r.Observed = now
	data, err := noderecord.Encode(r)
	if err != nil {
		return noderecord.PutResult{}, opError("put", err)
	}
	s.records[k] = &entry{data: data, incarnation: r.Incarnation, seq: r.Seq, expires: now.Add(ttl)}
	s.appendLocked(change{kind: noderecord.EventPut, key: k, data: data})
	s.scheduleLocked(now)
	return noderecord.PutResult{Decision: d, Revision: s.revision()}, nil
}

// Get implements noderecord.Store.
func (s *Store) Get(ctx context.Context, k noderecord.Key) (noderecord.Record, error) {
	if err := ctx.Err(); err != nil {
		return noderecord.Record{}, opError("get", ctxError(err))
	}
	if err := k.Validate(); err != nil {
		return noderecord.Record{}, opError("get", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.beginLocked(); err != nil {
		return noderecord.Record{}, opError("get", err)
	}
	e, ok := s.records[k]
	if !ok {
		return noderecord.Record{}, fmt.Errorf("troupe: get node record %s: %w", k, noderecord.ErrNotFound)
	}
	return decode(e.data)
}

// Remove implements noderecord.Store.
func (s *Store) Remove(ctx context.Context, k noderecord.Key, incarnation string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, opError("remove", ctxError(err))
	}
	if err := k.Validate(); err != nil {
		return false, opError("remove", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.beginLocked(); err != nil {
		return false, opError("remove", err)
	}
	e, ok := s.records[k]
	if !ok || e.incarnation != incarnation {
		return false, nil
	}
	delete(s.records, k)
	s.appendLocked(change{kind: noderecord.EventDelete, key: k})
	return true, nil
}

// Snapshot implements noderecord.Store.
func (s *Store) Snapshot(ctx context.Context, cluster string) (noderecord.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return noderecord.Snapshot{}, opError("snapshot", ctxError(err))
	}
	if err := noderecord.ValidateCluster(cluster); err != nil {
		return noderecord.Snapshot{}, opError("snapshot", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.beginLocked()
	if err != nil {
		return noderecord.Snapshot{}, opError("snapshot", err)
	}
	snap := noderecord.Snapshot{Revision: s.revision(), At: now}
	for k, e := range s.records {
		if k.Cluster != cluster {
			continue
		}
		r, err := decode(e.data)
		if err != nil {
			return noderecord.Snapshot{}, err
		}
		snap.Records = append(snap.Records, r)
	}
	slices.SortFunc(snap.Records, func(a, b noderecord.Record) int {
		return cmp.Or(cmp.Compare(a.Role, b.Role), cmp.Compare(a.Node, b.Node))
	})
	return snap, nil
}

// Watch implements noderecord.Store.
func (s *Store) Watch(ctx context.Context, cluster string, after noderecord.Revision) (noderecord.Watcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, opError("watch", ctxError(err))
	}
	if err := noderecord.ValidateCluster(cluster); err != nil {
		return nil, opError("watch", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.beginLocked(); err != nil {
		return nil, opError("watch", err)
	}
	cursor := s.rev
	if after != "" {
		n, err := strconv.ParseUint(string(after), 10, 64)
		if err != nil || n > s.rev {
			return nil, fmt.Errorf("troupe: watch node records from %q: %w", after, noderecord.ErrInvalidRevision)
		}
		if n < s.compacted {
			return nil, fmt.Errorf("troupe: watch node records from %s: %w (history starts after %d)", after, noderecord.ErrCompacted, s.compacted)
		}
		cursor = n
	}
	s.watches++
	return &watcher{s: s, id: s.watches, cluster: cluster, cursor: cursor, ctx: ctx, closed: make(chan struct{})}, nil
}

// Close implements noderecord.Store: every call after it, and every
// watcher's Next, returns noderecord.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.stopTimer != nil {
		s.stopTimer()
		s.stopTimer = nil
	}
	s.wakeLocked()
	return nil
}

// Compact drops the whole history: a watch from any revision before the
// current one gets noderecord.ErrCompacted.
func (s *Store) Compact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compacted = s.rev
	s.changes = nil
	s.wakeLocked()
}

// SetUnavailable makes every call, and every watcher's Next, fail with
// noderecord.ErrUnavailable wrapping reason, until it is called with
// nil. Records and their leases are kept meanwhile, and lapse as usual.
func (s *Store) SetUnavailable(reason error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unavailable = reason
	s.wakeLocked()
}

// FailWatches ends every watch open now with noderecord.ErrUnavailable
// wrapping reason, as a backend's own watch that fails would; the store
// and later watches keep serving. For the tests of callers, and the
// contract suite's (recordtest.Harness.BreakWatches).
func (s *Store) FailWatches(reason error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failBelow, s.failed = s.watches+1, reason
	s.wakeLocked()
}

// beginLocked refuses a call on a closed or unavailable store, and
// deletes the records whose leases lapsed, before anything is read.
func (s *Store) beginLocked() (time.Time, error) {
	if s.closed {
		return time.Time{}, noderecord.ErrClosed
	}
	if s.unavailable != nil {
		return time.Time{}, fmt.Errorf("%w: %w", noderecord.ErrUnavailable, s.unavailable)
	}
	now := s.clock.Now()
	s.expireLocked(now)
	return now, nil
}

func (s *Store) expireLocked(now time.Time) {
	var due []noderecord.Key
	for k, e := range s.records {
		if !now.Before(e.expires) {
			due = append(due, k)
		}
	}
	// In key order, so that the events of one expiry replay alike.
	slices.SortFunc(due, func(a, b noderecord.Key) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Role, b.Role), cmp.Compare(a.Node, b.Node))
	})
	for _, k := range due {
		delete(s.records, k)
		s.appendLocked(change{kind: noderecord.EventDelete, key: k})
	}
}

// scheduleLocked sets the timer for the earliest lease deadline, so
// that watchers see a lapse without waiting for another call.
func (s *Store) scheduleLocked(now time.Time) {
	var next time.Time
	for _, e := range s.records {
		if next.IsZero() || e.expires.Before(next) {
			next = e.expires
		}
	}
	if next.Equal(s.timerAt) {
		return
	}
	if s.stopTimer != nil {
		s.stopTimer()
		s.stopTimer = nil
	}
	s.timerAt = next
	if !next.IsZero() && !s.closed {
		s.stopTimer = s.clock.AfterFunc(next.Sub(now), s.onTimer)
	}
}

func (s *Store) onTimer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	now := s.clock.Now()
	s.expireLocked(now)
	s.timerAt, s.stopTimer = time.Time{}, nil
	s.scheduleLocked(now)
}

func (s *Store) appendLocked(c change) {
	s.rev++
	s.changes = append(s.changes, c)
	if over := len(s.changes) - s.history; over > 0 {
		s.changes = slices.Delete(s.changes, 0, over)
		s.compacted += uint64(over)
	}
	s.wakeLocked()
}

func (s *Store) wakeLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Store) revision() noderecord.Revision {
	return noderecord.Revision(strconv.FormatUint(s.rev, 10))
}

type watcher struct {
	s       *Store
	id      uint64 // in the order of Watch calls, from 1
	cluster string
	ctx     context.Context // the watch's own
	closed  chan struct{}
	once    sync.Once

	mu     sync.Mutex // one Next at a time
	cursor uint64     // the last revision delivered or skipped
	ended  error      // the error that ended the watch; every later Next returns it
}

// Next implements noderecord.Watcher. Every error but ctx's ends the
// watch.
func (w *watcher) Next(ctx context.Context) (noderecord.Event, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended != nil {
		return noderecord.Event{}, w.ended
	}
	for {
		ev, wait, err := w.poll()
		if err != nil {
			w.ended = err
			return noderecord.Event{}, err
		}
		if wait == nil {
			return ev, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return noderecord.Event{}, opError("watch", ctxError(ctx.Err()))
		case <-w.ctx.Done():
			w.ended = fmt.Errorf("troupe: watch node records: %w: %w", noderecord.ErrClosed, w.ctx.Err())
			return noderecord.Event{}, w.ended
		case <-w.closed:
			w.ended = fmt.Errorf("troupe: watch node records: %w", noderecord.ErrClosed)
			return noderecord.Event{}, w.ended
		}
	}
}

// poll returns the next event, or a channel to wait on for one.
func (w *watcher) poll() (noderecord.Event, <-chan struct{}, error) {
	select {
	case <-w.closed:
		return noderecord.Event{}, nil, fmt.Errorf("troupe: watch node records: %w", noderecord.ErrClosed)
	default:
	}
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.beginLocked(); err != nil {
		return noderecord.Event{}, nil, opError("watch", err)
	}
	if w.id < s.failBelow {
		return noderecord.Event{}, nil, fmt.Errorf("troupe: watch node records: %w: %w", noderecord.ErrUnavailable, s.failed)
	}
	if w.cursor < s.compacted {
		return noderecord.Event{}, nil, fmt.Errorf("troupe: watch node records after %d: %w (history starts after %d)", w.cursor, noderecord.ErrCompacted, s.compacted)
	}
	for w.cursor < s.rev {
		w.cursor++
		c := s.changes[w.cursor-s.compacted-1]
		if c.key.Cluster != w.cluster {
			continue
		}
		ev := noderecord.Event{Kind: c.kind, Key: c.key, Revision: noderecord.Revision(strconv.FormatUint(w.cursor, 10))}
		if c.kind == noderecord.EventPut {
			r, err := decode(c.data)
			if err != nil {
				return noderecord.Event{}, nil, err
			}
			ev.Record = r
		}
		return ev, nil, nil
	}
	return noderecord.Event{}, s.changed, nil
}

// Close implements noderecord.Watcher.
func (w *watcher) Close() error {
	w.once.Do(func() { close(w.closed) })
	return nil
}

func decode(data []byte) (noderecord.Record, error) {
	r, err := noderecord.Decode(data)
	if err != nil {
		// The store encoded it: a bug, not input.
		return noderecord.Record{}, fmt.Errorf("troupe: memrecords: stored record does not decode: %w", err)
	}
	return r, nil
}

func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", noderecord.ErrTimeout, err)
	}
	return err
}

func opError(op string, err error) error {
	return fmt.Errorf("troupe: %s node record: %w", op, err)
}
