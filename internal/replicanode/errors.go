package replicanode

import (
	"errors"
	"fmt"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/ring"
)

// ErrUnavailable is matched by the error of a call whose level (or read
// barrier, acquisition or catch-up) was not met before its context ended.
// A write that ends so may or may not have happened (its error says so):
// a later owner adopts it if a replica of its quorum holds it. The error
// also matches the context's.
var ErrUnavailable = errors.New("troupe: replication: not done before the deadline")

// ErrTooManyWrites is matched, with ErrUnavailable, by the error of a
// write refused because Config.MaxWritesInFlight writes of its key wait
// for their level. Such a write did not happen.
var ErrTooManyWrites = errors.New("troupe: replication: too many writes of the key in flight")

// ErrValueTooLarge is matched by the error of a write whose value, key and
// slot name together exceed Config.MaxValue. Such a write did not happen.
var ErrValueTooLarge = errors.New("troupe: replication: value too large")

// ErrStaleOwner is matched by a *StaleOwnerError: a replica refused this
// node's epoch because it promised a newer owner's, so this node no longer
// serves the key.
var ErrStaleOwner = errors.New("troupe: replication: a newer owner holds the key")

// ErrResigned is matched by the error of a call that waited on a key this
// node resigned (Resign, or an acquisition abandoned at its deadline). A
// write that ends so may or may not have happened.
var ErrResigned = errors.New("troupe: replication: key resigned")

// ErrCatchUpQuorum is returned by CatchUp when its quorum is not a
// majority of its sources (or is more than there are).
var ErrCatchUpQuorum = errors.New("troupe: replication: catch-up quorum is not a majority of its sources")

// ErrCatchUpSource is returned by CatchUp when its sources name this
// node: it cannot catch up from itself.
var ErrCatchUpSource = errors.New("troupe: replication: catch-up source is this node")

// ErrSourceReceiving is matched by the error of a catch-up source that is
// itself still receiving part of the range: it may lack what a quorum
// holds, so it cannot count as a source.
var ErrSourceReceiving = errors.New("troupe: replication: catch-up source is still receiving the range")

// ErrSweepGaveUp is matched by the error of a Collect whose sweep gave up:
// a replica of the key's set did not answer it, or did without counting
// (it was still receiving the key's range). Nothing is lost; the key
// holds its tombstones (those not yet forgotten) for a later Collect.
var ErrSweepGaveUp = errors.New("troupe: replication: a replica did not answer the collection")

// ErrClosed is returned by calls on a closed node, and by calls that were
// waiting when it closed.
var ErrClosed = errors.New("troupe: replication node is closed")

// StaleOwnerError says that a key's owner was fenced: a replica promised
// Newer, a later epoch than this node's. What was waiting fails with it; a
// write that fails so may or may not have happened.
//
// With Floor set, Newer is the floor a hand-off's copy raised over the
// key's range, and its Node the copier that fenced last, Copiers the
// earlier ones, and Departed the members whose departure from the ring
// the floor names: a copier is neither in the key's sets nor among the
// copiers the acquisition named (see AcquireOptions.Copiers), or a
// departure was not named gone (AcquireOptions.Gone) while the key's set
// still holds it or the copier is not in it: acquire again, naming them,
// once the view shows the copiers entered and the departed members gone.
type StaleOwnerError struct {
	Key   replica.Key
	Newer replica.Epoch
	Floor bool
	// Copiers are the copiers of the floor's earlier fences, to be named
	// as Newer.Node is (AcquireOptions.Copiers).
	Copiers  []ring.NodeID
	Departed []ring.NodeID
}

func (e *StaleOwnerError) Error() string {
	if e.Floor {
		var more string
		if len(e.Copiers) > 0 {
			more += fmt.Sprintf(" after hand-offs to %v", e.Copiers)
		}
		if len(e.Departed) > 0 {
			more += fmt.Sprintf(" for the departure of %v", e.Departed)
		}
		return fmt.Sprintf("%v: %s/%s: its range was fenced at term %d by a hand-off to %v%s", ErrStaleOwner, e.Key.Type, e.Key.ID, e.Newer.Term, e.Newer.Node, more)
	}
	return fmt.Sprintf("%v: %s/%s is owned at epoch %d by %v", ErrStaleOwner, e.Key.Type, e.Key.ID, e.Newer.Term, e.Newer.Node)
}

// Is makes a StaleOwnerError match ErrStaleOwner.
func (e *StaleOwnerError) Is(target error) bool { return target == ErrStaleOwner }

// ErrSourceIncomplete is matched by the error of a catch-up source that
// did not send a record its index listed: it cannot count as a source.
var ErrSourceIncomplete = errors.New("troupe: replication: catch-up source did not send a record it listed")
