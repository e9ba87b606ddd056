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
	// Reason says why it fails (empty when it passes). It names no key,
	// address or secret.
	Reason string `json:"reason,omitempty"`
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
	add := func(name string, ok bool, reason string) {
		if ok {
			reason = ""
		}
		checks = append(checks, ReadinessCheck{Name: name, OK: ok, Reason: reason})
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
			add(ReadyCheckJoined, false, "removed by the cluster: a newer process took this member's address")
		case s.Removed():
			add(ReadyCheckJoined, false, "removed by the cluster; rejoining")
		case !known:
			add(ReadyCheckJoined, false, "not joined yet")
		case self.Joining:
			add(ReadyCheckJoined, false, "joining")
		default:
			add(ReadyCheckJoined, true, "")
		}
	}
	if s.st != nil {
		switch n, _ := s.st.current(); {
		case n == nil:
			add(ReadyCheckStoreOpen, false, "no replication node (not joined, between incarnations or closed)")
		case n.Err() != nil:
			add(ReadyCheckStoreOpen, false, "the replication node stopped")
		default:
			add(ReadyCheckStoreOpen, true, "")
		}
		r, _ := s.st.receivingStats()
		add(ReadyCheckCaughtUp, r == 0, fmt.Sprintf("receiving %d ranges", r))
	}
	if s.m != nil {
		add(ReadyCheckMajority, known && inc.node.Owning(), "sees no majority of the cluster alive")
		if p := s.m.rec; p.external {
			ok, reason := p.check()
			add(ReadyCheckRecords, ok, reason)
		}
	}
	switch {
	case s.closing.Load():
		add(ReadyCheckNotClosing, false, "closing")
	case known && self.Status == cluster.StatusLeaving:
		add(ReadyCheckNotClosing, false, "leaving the cluster")
	default:
		add(ReadyCheckNotClosing, true, "")
	}
	ready := true
	for _, c := range checks {
		ready = ready && c.OK
	}
	return Readiness{Ready: ready, Checks: checks}
}
