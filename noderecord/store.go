package noderecord

import (
	"context"
	"time"
)

// Store holds the live node records of one or more clusters. Its
// methods are safe for concurrent use. Every call that waits takes a
// context first; a call whose context's deadline passes fails with
// ErrTimeout, and a backend that cannot serve fails with ErrUnavailable:
// a caller that gets either fails closed rather than answer from an old
// view.
type Store interface {
	// Put applies the ordering rule (Decide) to r against the record
	// stored under r.Key(), atomically, and on acceptance stores r with
	// Observed set to now, on a lease of ttl that the next accepted
	// update renews; a ttl of zero or less means the default,
	// DefaultTimings().LeaseTTL. An ignored update (Duplicate, Stale) is
	// not an error and changes nothing, its lease included. A backend may
	// round ttl up (etcd: to whole seconds). It returns ErrInvalidRecord
	// for a record Validate refuses.
	Put(ctx context.Context, r Record, ttl time.Duration) (PutResult, error)
	// Get returns the live record under k, or ErrNotFound.
	Get(ctx context.Context, k Key) (Record, error)
	// Remove deletes the record under k if it is of incarnation, so that
	// a late removal by a previous life of the process cannot delete
	// its successor's record. It reports whether it deleted one.
	Remove(ctx context.Context, k Key, incarnation string) (bool, error)
	// Snapshot lists a cluster's live records, all as of one revision:
	// a linearizable read, never older than a write that completed
	// before it started.
	Snapshot(ctx context.Context, cluster string) (Snapshot, error)
	// Watch streams a cluster's changes after revision after, in order;
	// the empty revision means after the current one. Resuming from the
	// revision of a Snapshot, a PutResult or the last Event seen loses
	// nothing. When after is no longer in the store's history, Watch or
	// the watcher's first Next returns ErrCompacted, and the caller
	// relists (Snapshot, then Watch from its revision). The watch ends
	// with ctx or Close, whichever comes first, and when the backend's
	// own watch fails (see Watcher.Next).
	Watch(ctx context.Context, cluster string, after Revision) (Watcher, error)
	// Close releases the store; calls after it return ErrClosed.
	Close() error
}

// Watcher is one watch's stream of events. Next and Close may be called
// from different goroutines; Next from one goroutine at a time.
type Watcher interface {
	// Next returns the next event, waiting for one until ctx ends; ctx's
	// end (ErrTimeout for its deadline) leaves the watch open, and Next
	// may be called again.
	//
	// Any other error ends the watch, and every later Next returns an
	// error too, never an event: ErrCompacted when the watcher fell
	// behind the store's history; ErrClosed after Close (the watcher's
	// or the store's) or once Watch's context ended; ErrUnavailable when
	// the backend's own watch failed (it reported an error, was
	// cancelled, or ended without the caller closing it) or the backend
	// cannot serve. A watch never stops silently: when the backend's
	// watch fails, Next returns the error at once rather than wait for
	// ctx. (A backend that is still resuming its watch, such as etcd's
	// client reconnecting, is not failing: Next waits, and ctx bounds
	// the wait.) The caller then takes a Snapshot again and watches from
	// its revision.
	Next(ctx context.Context) (Event, error)
	// Close ends the watch.
	Close() error
}

// Revision identifies a state of a store. It is opaque: compare two
// from the same store for equality, hand one back to Watch, show it, but
// do not parse it or order it. The empty Revision means none.
type Revision string

// PutResult is what Put did.
type PutResult struct {
	Decision Decision
	// Revision is the store's revision after the write, or at which
	// the update was found stale or duplicate.
	Revision Revision
}

// Snapshot is a cluster's live records at one revision.
type Snapshot struct {
	// Records are ordered by role, then node.
	Records  []Record
	Revision Revision
	// At is when the snapshot was read, by the clock that sets
	// Observed: the time to measure heartbeat age against
	// (Timings.Health).
	At time.Time
	// Unreadable counts the records the store holds that this binary
	// cannot read (written in a newer format, say), left out of Records
	// rather than failing the whole snapshot during an upgrade.
	Unreadable int
}

// EventKind says what changed.
type EventKind uint8

// The event kinds.
const (
	// EventPut: a record was stored (an accepted update).
	EventPut EventKind = iota + 1
	// EventDelete: a record was removed, or its lease lapsed.
	EventDelete
)

func (k EventKind) String() string {
	switch k {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return "event(?)"
}

// Event is one change to a cluster's records.
type Event struct {
	Kind EventKind
	Key  Key
	// Record is the record stored, for EventPut; zero for EventDelete.
	Record Record
	// Revision is the store's revision after this change; Watch from it
	// resumes after this event.
	Revision Revision
}
