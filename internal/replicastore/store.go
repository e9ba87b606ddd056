package replicastore

import (
	"context"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/ring"
)

// Store persists a node's replicated records, one per key and slot (a
// promise is the record of kind replica.KindPromise, with no name).
//
// Every method is safe for concurrent use. Writes to one record must be
// ordered by the caller (the replication driver is single-threaded per
// node): concurrent Puts of the same record leave one of them.
type Store interface {
	// Get returns the record in slot stored for key; ok is false when
	// there is none.
	Get(ctx context.Context, key replica.Key, slot replica.Slot) (rec replica.Record, ok bool, err error)
	// Held calls fn for each of recs, in order, with the record stored
	// in its key and slot (ok false when there is none), without its
	// value unless it is a promise (whose value, its horizon, is
	// compared): what a catch-up compares with the records a source
	// lists, in one read of the store and no copy of the values. fn
	// must not call the store.
	Held(ctx context.Context, recs []replica.Record, fn func(i int, held replica.Record, ok bool)) error
	// Put stores recs, replacing the records of the same key and slot, in
	// order; a record that Erases deletes its slot's record instead. It
	// returns once all are as durable as the store promises; when it fails,
	// any of them may have been stored.
	Put(ctx context.Context, recs ...replica.Record) error
	// Range calls fn for each record whose key's ring token lies in g (a
	// ring.Range: after Start up to and including End, wrapping past the
	// largest token; Start == End is the whole ring), in ring order from
	// Start. It stops when fn returns false. A hand-off sends a moving
	// range (ring.Moves) this way.
	Range(ctx context.Context, g ring.Range, fn func(replica.Record) bool) error
	// Receiving returns the ring ranges last recorded by SetReceiving
	// (or by the store itself after a stop that may have lost
	// acknowledged writes); recorded is false when none ever was.
	Receiving(ctx context.Context) (ranges []ring.Range, recorded bool, err error)
	// SetReceiving records the ranges the replica is still receiving,
	// replacing the previous ones. When they add a token to the
	// previous ones, it returns once they are as durable as a Put with
	// Sync would be, whatever the store's options: a replica that
	// restarts must not count on ranges it had not caught up. When they
	// only remove tokens (a range received), they are as durable as a
	// Put: losing them only makes the replica receive those ranges
	// again, and the records received there are as durable as they
	// would have been without the removal (kept by the kernel when the
	// process dies; after a power loss without Sync the store reports
	// the whole ring receiving anyway, see Badger.Unclean; with Sync
	// each Put synced them).
	SetReceiving(ctx context.Context, ranges []ring.Range) error
	// Floors returns the floors last recorded by SetFloors (none when
	// none ever was).
	Floors(ctx context.Context) ([]replica.Floor, error)
	// SetFloors records the replica's floors (its range-level promises,
	// see replica.Floor), replacing the previous ones, and returns once
	// they are as durable as a Put with Sync would be, whatever the
	// store's options: a replica that restarts must not refuse less than
	// it promised.
	SetFloors(ctx context.Context, floors []replica.Floor) error
	// Close releases the store; later calls return replication.ErrClosed.
	Close() error
}
