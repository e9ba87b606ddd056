package replication

import "fmt"

// Level is how many replicas must have stored a state change before it
// counts as written and what follows it may leave the owner. The zero value
// is [Majority].
type Level uint8

const (
	// Majority waits for more than half of the key's replica set, counted
	// as placed on the full ring (a dead member still counts).
	Majority Level = iota
	// One waits for the owner's own copy only: a change acknowledged at
	// this level is lost if the owner's node is lost before the other
	// replicas received it.
	One
	// All waits for every replica in the set: a single member down makes
	// the key unavailable for writes, and, since the same count is the
	// quorum of every phase, for reads (the read barrier) and for
	// acquisitions (a new owner cannot be fenced in).
	All
)

// String returns "majority", "one" or "all".
func (l Level) String() string {
	switch l {
	case Majority:
		return "majority"
	case One:
		return "one"
	case All:
		return "all"
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// Quorum returns how many acknowledgements a change needs at this level in
// a replica set of n members (n >= 1).
func (l Level) Quorum(n int) int {
	switch l {
	case One:
		return 1
	case All:
		return n
	}
	return n/2 + 1
}

// Config says where a node keeps its copies of replicated state. The zero
// value keeps them in memory.
type Config struct {
	// DataDir is the directory of the node's durable store. A restarted
	// process given the same DataDir recovers its copies. Empty (the
	// default) keeps copies in memory only.
	DataDir string
	// Sync makes every acknowledgement wait until the write is on disk
	// (fsync, shared by concurrent writes). Default false: a write is
	// acknowledged once the operating system holds it, which survives a
	// crash of the process but not a power loss. Sync needs a DataDir.
	Sync bool
}

// Validate reports a configuration that cannot work, naming the field.
func (c Config) Validate() error {
	if c.Sync && c.DataDir == "" {
		return fmt.Errorf("%w: Sync needs a DataDir", ErrInvalidConfig)
	}
	return nil
}

// Validate reports a level that is none of One, Majority or All.
func (l Level) Validate() error {
	if l > All {
		return fmt.Errorf("%w: unknown Level %d", ErrInvalidConfig, uint8(l))
	}
	return nil
}
