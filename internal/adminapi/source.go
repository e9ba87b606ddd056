package adminapi

import (
	"context"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/noderecord"
	"github.com/troupe-go/troupe/ring"
)

// Source is what the API reports on: one process. Its methods are called
// from the HTTP server's goroutines, concurrently; they must be safe for
// that and must not wait on the message path. Node, View and Definitions
// are cheap (a load of a snapshot or of what was built once); Readiness
// and Counts cost a walk of the checks and of the hosted types' tables,
// and only the endpoints that report them call them.
type Source interface {
	// Node describes this process: what does not change while it runs.
	Node() Node
	// Readiness returns the system's readiness, check by check.
	Readiness() (ready bool, checks []Check)
	// View returns the membership view and placement's rings, taken
	// from one snapshot. clustered is false for a standalone system,
	// which has neither.
	View() (v View, clustered bool)
	// Definitions returns the actor types this process hosts, as
	// defined: what placement needs of them. It does not change while the
	// process runs; the caller must not modify it.
	Definitions() []Definition
	// Counts returns, per hosted actor type, what runs of it here now.
	Counts() []Count
	// Records reads the node records of this member's cluster from its
	// record store, waiting within ctx. ok is false for a process that
	// keeps none (a standalone system). An error means the store could
	// not give a snapshot: the API fails closed.
	Records(ctx context.Context) (r Records, ok bool, err error)
}

// Records is a snapshot of a cluster's node records, and how to read it.
type Records struct {
	Snapshot noderecord.Snapshot
	Timings  noderecord.Timings
	// Self is the key of the answering member's own record.
	Self noderecord.Key
	// Derived is set when the records other than Self's were derived by
	// this member from its membership view (the in-process store) rather
	// than published by their processes.
	Derived bool
}

// Node describes the process serving the API.
type Node struct {
	// Addr is the member's advertised address; "" for a standalone
	// system. Its incarnation is the view's (View.Self).
	Addr string
	// Started is when the system started.
	Started time.Time
	// BuildVersion is the Troupe module's version ("(devel)" when
	// unknown).
	BuildVersion string
	// Role is the role of the cluster's members: the role their node
	// records are published under (system.RecordRole).
	Role string
}

// Check is one readiness check.
type Check struct {
	Name string
	OK   bool
	// Cause is why it fails, as a stable code ("" when it passes).
	Cause  string
	Reason string
}

// View is the cluster as this member places keys on it.
type View struct {
	// Self is this member's identity in the view: zero before its first
	// incarnation has started.
	Self ring.NodeID
	// Owning is false while this member lost the majority of the
	// cluster: the router then refuses the keys the ring gives it.
	Owning bool
	// Records are the membership records as the view holds them: older
	// processes at an address and members that left may be among them.
	Records []cluster.Member
	// Rings is each actor type's full ring (dead members included), nil
	// entries absent.
	Rings map[string]*ring.Ring
}

// Definition is an actor type this process hosts, as its definition
// places it.
type Definition struct {
	Name string
	// Replicas is how many copies of each key's state it keeps (1 for a
	// type without stored state).
	Replicas int
	// Pinned is set for a type whose keys name their member.
	Pinned bool
}

// Count is what runs of a hosted actor type here.
type Count struct {
	Name string
	// Activations are its activated keys here, idle ones included.
	Activations int
	// Queued are the messages waiting in its mailboxes here.
	Queued int
}
