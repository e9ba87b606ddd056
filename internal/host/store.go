package host

import (
	"context"
	"time"

	"github.com/troupe-go/troupe/replication"
)

// Store keeps the state of the keys of durable and replicated actor types
// (package system implements it over the replication driver). A key is
// acquired by one activation at a time: Acquire makes this node its owner
// (fencing any earlier one), Write and Delete return once the key's
// write level is met, Resign gives the key up. Every method is safe for
// concurrent use; calls for one key come from its activation, in order.
type Store interface {
	// Acquire makes this node the owner of typ/key. replicas is the
	// number of copies (1: this node only, as for a pinned or
	// non-replicated durable type); level the write level. pinned keys
	// live on the member their ref names, whatever the ring: their only
	// copy stays here.
	Acquire(ctx context.Context, typ, key string, replicas int, level replication.Level, pinned bool) error
	// Read returns the key's stored value once a quorum confirmed that
	// this node still owns it, after every write of the key made before
	// it met the level (the answers kept for keyed asks rely on it); ok is
	// false when nothing (or a tombstone) is stored.
	Read(ctx context.Context, typ, key string) (value []byte, ok bool, err error)
	// ReadAll is Read, with the key's records beside its state (the
	// pages of answers kept for keyed asks): their values by name,
	// erased ones left out.
	ReadAll(ctx context.Context, typ, key string) (value []byte, ok bool, aside map[string][]byte, err error)
	// Write stores value as the key's state; Delete stores a tombstone.
	Write(ctx context.Context, typ, key string, value []byte) error
	Delete(ctx context.Context, typ, key string) error
	// WriteAside stores value under name beside the key's state, or
	// erases what is stored there (value nil), and returns once the write
	// and every earlier write of the key met the write level. Read and
	// ReadAll confirm it as they confirm the state.
	WriteAside(ctx context.Context, typ, key, name string, value []byte) error
	// Resign gives the key up without waiting.
	Resign(typ, key string)
	// MaxValue is the largest value Write accepts, in bytes.
	MaxValue(typ, key string) int
	// Retry reports whether err, the attempt-th failure (from 1) of the
	// Acquire or Read of typ/key at an activation's start, is worth
	// acquiring again for, and after how long: another acquisition
	// superseded this node's before anything ran on it (a hand-off's
	// fence, another member that acquired the key meanwhile on a view
	// that disagrees for a moment) while this node still places the key
	// on itself.
	Retry(typ, key string, err error, attempt int) (wait time.Duration, ok bool)
}
