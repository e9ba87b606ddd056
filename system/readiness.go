package system

import (
	"fmt"

	"github.com/troupe-go/troupe/cluster"
)

// Readiness says whether a system is ready to serve, check by check.
type Readiness struct {
	// Ready is true when every check passes.
	Ready bool `json:"ready"`
	// Checks are the checks that apply to this system, in a fixed order.
	Checks []ReadinessCheck `json:"checks"`
}

// ReadinessCheck is one readiness check.
type ReadinessCheck struct {
	// Name names the check: one of the ReadyCheck* constants.
	Name string `json:"name"`
	// OK is true when the check passes.
	OK bool `json:"ok"`
	// Cause says why it fails as a stable code (empty when it passes):
	// what programs test, where Reason is for people and may change. The
	// codes, by check: joined: "not_joined", "joining" (in the cluster,
	// not announced ready), "removed" (the cluster removed the member,
	// which rejoins), "replaced" (a newer process took its address; it
	// does not rejoin); store_open: "no_replication_node",
	// "replication_stopped"; caught_up: "receiving"; majority:
	// "no_majority"; records: "records_no_heartbeat", "records_timeout",
	// "records_unavailable", "records_failed"; not_closing: "closing",
	// "leaving". New codes may be added.
	Cause string `json:"cause,omitempty"`
	// Reason says why it fails (empty when it passes). It names no key,
	// address or secret.
	Reason string `json:"reason,omitempty"`
}

// The causes of failing checks (ReadinessCheck.Cause).
const (
	causeNotJoined          = "not_joined"
	causeJoining            = "joining"
	causeRemoved            = "removed"
	causeReplaced           = "replaced"
	causeNoReplicationNode  = "no_replication_node"
	causeReplicationStopped = "replication_stopped"
	causeReceiving          = "receiving"
	causeNoMajority         = "no_majority"
	causeRecordsNoHeartbeat = "records_no_heartbeat"
	causeRecordsTimeout     = "records_timeout"
	causeRecordsUnavailable = "records_unavailable"
	causeRecordsFailed      = "records_failed"
	causeClosing            = "closing"
	causeLeaving            = "leaving"
)

// serves reports whether the failure of c leaves the system able to
// serve the keys it owns: it does for a member still joining, catching
// up or closing, and not once the cluster removed it or it lost the
// majority. A passing check serves.
func (c ReadinessCheck) serves() bool {
	switch c.Cause {
	case causeRemoved, causeReplaced, causeNoMajority:
		return false
	}
	return true
}

// The readiness checks, in the order Readiness lists them. A standalone
// system has only those about its store and its close.
const (
	// ReadyCheckJoined: the member has joined the cluster and announced
	// itself ready (its record no longer says joining), and the cluster
	// has not removed it.
	ReadyCheckJoined = "joined"
	// ReadyCheckStoreOpen: the store of the durable and replicated
	// definitions is open and its replication node runs (systems hosting
	// such definitions).
	ReadyCheckStoreOpen = "store_open"
	// ReadyCheckCaughtUp: the member receives no range of the ring
	// (Stats.Receiving is 0) (systems hosting durable or replicated
	// definitions).
	ReadyCheckCaughtUp = "caught_up"
	// ReadyCheckMajority: the member sees a majority of the cluster alive,
	// so it serves the keys it owns rather than refusing them.
	ReadyCheckMajority = "majority"
	// ReadyCheckRecords: the last heartbeat put this member's node
	// record in Config.Records and read a snapshot back in time (members
	// with a Config.Records only: the in-process store cannot fail).
	ReadyCheckRecords = "records"
	// ReadyCheckNotClosing: Close has not been called, and the member is
	// not leaving the cluster.
	ReadyCheckNotClosing = "not_closing"
)

// Readiness reports whether s is ready to serve, and which checks fail.
// It is what the admin listener's /readyz answers.
func (s *System) Readiness() Readiness {
	var checks []ReadinessCheck
	add := func(name string, ok bool, cause, reason string) {
		if ok {
			cause, reason = "", ""
		}
		checks = append(checks, ReadinessCheck{Name: name, OK: ok, Cause: cause, Reason: reason})
	}
	var inc *incarnation
	var self cluster.Member
	var known bool
	if s.m != nil {
		inc = s.m.cur.Load()
		if inc != nil && !inc.closed.Load() {
			self, known = inc.node.Member(inc.node.ID())
		}
		switch {
		case s.Removed() && s.m.replaced.Load():
			add(ReadyCheckJoined, false, causeReplaced, "removed by the cluster: a newer process took this member's address")
		case s.Removed():
			add(ReadyCheckJoined, false, causeRemoved, "removed by the cluster; rejoining")
		case !known:
			add(ReadyCheckJoined, false, causeNotJoined, "not joined yet")
		case self.Joining:
			add(ReadyCheckJoined, false, causeJoining, "joining")
		default:
			add(ReadyCheckJoined, true, "", "")
		}
	}
	if s.st != nil {
		switch n, _ := s.st.current(); {
		case n == nil:
			add(ReadyCheckStoreOpen, false, causeNoReplicationNode, "no replication node (not joined, between incarnations or closed)")
		case n.Err() != nil:
			add(ReadyCheckStoreOpen, false, causeReplicationStopped, "the replication node stopped")
		default:
			add(ReadyCheckStoreOpen, true, "", "")
		}
		r, _ := s.st.receivingStats()
		add(ReadyCheckCaughtUp, r == 0, causeReceiving, fmt.Sprintf("receiving %d ranges", r))
	}
	if s.m != nil {
		add(ReadyCheckMajority, known && inc.node.Owning(), causeNoMajority, "sees no majority of the cluster alive")
		if p := s.m.rec; p.external {
			ok, cause, reason := p.check()
			add(ReadyCheckRecords, ok, cause, reason)
		}
	}
	switch {
	case s.closing.Load():
		add(ReadyCheckNotClosing, false, causeClosing, "closing")
	case known && self.Status == cluster.StatusLeaving:
		add(ReadyCheckNotClosing, false, causeLeaving, "leaving the cluster")
	default:
		add(ReadyCheckNotClosing, true, "", "")
	}
	ready := true
	for _, c := range checks {
		ready = ready && c.OK
	}
	return Readiness{Ready: ready, Checks: checks}
}
