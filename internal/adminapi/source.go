package adminapi

import (
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/ring"
)

// Source is what the API reports on: one process. Its methods are called
// from the HTTP server's goroutines, concurrently; they must be safe for
// that, must not wait on the message path, and should cost no more than
// a walk of the view and of the hosted types.
type Source interface {
	// Node describes this process: its identity, start and readiness.
	Node() Node
	// View returns the membership view and placement's rings, taken
	// from one snapshot. clustered is false for a standalone system,
	// which has neither.
	View() (v View, clustered bool)
	// Types returns the actor types this process hosts.
	Types() []Type
}

// Node describes the process serving the API.
type Node struct {
	// ID is the member's identity; zero for a standalone system.
	ID ring.NodeID
	// Started is when the system started.
	Started time.Time
	// BuildVersion is the Troupe module's version ("(devel)" when
	// unknown).
	BuildVersion string
	// Ready and Checks are the system's readiness, check by check.
	Ready  bool
	Checks []Check
}

// Check is one readiness check.
type Check struct {
	Name   string
	OK     bool
	Reason string
}

// View is the cluster as this member places keys on it.
type View struct {
	// Records are the membership records as the view holds them: older
	// processes at an address and members that left may be among them.
	Records []cluster.Member
	// Rings is each actor type's full ring (dead members included), nil
	// entries absent.
	Rings map[string]*ring.Ring
}

// Type is an actor type this process hosts.
type Type struct {
	Name string
	// Activations are its activated keys here, idle ones included.
	Activations int
	// Queued are the messages waiting in its mailboxes here.
	Queued int
	// Replicas is how many copies of each key's state it keeps (1 for a
	// type without stored state).
	Replicas int
	// Pinned is set for a type whose keys name their member.
	Pinned bool
}
