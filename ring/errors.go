package ring

import "errors"

// ErrEmptyRing is returned by owner queries on a ring without members. A node
// that has not joined a cluster yet, or a Client that has not learnt the
// membership, has nowhere to route.
var ErrEmptyRing = errors.New("troupe: ring has no members")

// ErrNoLiveReplica is returned when every replica of a key is dead in the
// caller's view. The replicas stay in the ring until membership removes them,
// so the key is unavailable rather than silently re-placed on a node that does
// not hold its state.
var ErrNoLiveReplica = errors.New("troupe: no replica of the key is alive or suspect")

// ErrReplicaCount is returned when a caller asks for an owner among fewer than
// one replica.
var ErrReplicaCount = errors.New("troupe: replica count must be at least 1")
