package membership

import "github.com/troupe-go/troupe/cluster"

// The records and configuration are the public cluster package's types:
// the core works on what users configure and observe. These aliases keep
// the protocol code free of a package prefix on every record.
type (
	Config  = cluster.Config
	Timings = cluster.Timings
	Member  = cluster.Member
	Status  = cluster.Status
)

// The statuses, in merge precedence order (see cluster.Status).
const (
	StatusAlive   = cluster.StatusAlive
	StatusLeaving = cluster.StatusLeaving
	StatusSuspect = cluster.StatusSuspect
	StatusDead    = cluster.StatusDead
	StatusLeft    = cluster.StatusLeft
)

// live reports whether a member with status s runs and takes part in the
// overlay: alive or leaving (a leaving member still hands over, so it is
// watched, pinged and gossiped to, though it counts for no majority).
func live(s Status) bool { return s == StatusAlive || s == StatusLeaving }
