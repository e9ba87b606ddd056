package system

import (
	"testing"

	"github.com/troupe-go/troupe/noderecord"
)

func TestRecordHealthFollowsEachFailingChecksCauseNotItsWording(t *testing.T) {
	pass := func(name string) ReadinessCheck { return ReadinessCheck{Name: name, OK: true} }
	cases := []struct {
		failing ReadinessCheck
		health  noderecord.Health
	}{
		{ReadinessCheck{Name: ReadyCheckJoined, Cause: causeNotJoined}, noderecord.Degraded},
		{ReadinessCheck{Name: ReadyCheckJoined, Cause: causeJoining}, noderecord.Degraded},
		{ReadinessCheck{Name: ReadyCheckJoined, Cause: causeRemoved}, noderecord.Unhealthy},
		{ReadinessCheck{Name: ReadyCheckJoined, Cause: causeReplaced}, noderecord.Unhealthy},
		{ReadinessCheck{Name: ReadyCheckStoreOpen, Cause: causeNoReplicationNode}, noderecord.Degraded},
		{ReadinessCheck{Name: ReadyCheckStoreOpen, Cause: causeReplicationStopped}, noderecord.Degraded},
		{ReadinessCheck{Name: ReadyCheckCaughtUp, Cause: causeReceiving}, noderecord.Degraded},
		{ReadinessCheck{Name: ReadyCheckMajority, Cause: causeNoMajority}, noderecord.Unhealthy},
		{ReadinessCheck{Name: ReadyCheckNotClosing, Cause: causeClosing}, noderecord.Degraded},
		{ReadinessCheck{Name: ReadyCheckNotClosing, Cause: causeLeaving}, noderecord.Degraded},
	}
	for _, tc := range cases {
		for _, reason := range []string{"", "joining", "not joined yet", "removed by the cluster; rejoining"} {
			c := tc.failing
			c.Reason = reason
			r := Readiness{Checks: []ReadinessCheck{c, pass(ReadyCheckNotClosing)}}
			if h, ready := recordHealth(r); h != tc.health || ready {
				t.Errorf("failing %s (cause %s, reason %q): health %s, ready %t; want %s and not ready",
					c.Name, c.Cause, reason, h, ready, tc.health)
			}
		}
	}
	// The records check says nothing of the member: its record reached
	// the store.
	r := Readiness{Checks: []ReadinessCheck{pass(ReadyCheckJoined), {Name: ReadyCheckRecords, Cause: causeRecordsTimeout}}}
	if h, ready := recordHealth(r); h != noderecord.Healthy || !ready {
		t.Errorf("only the records check failing: health %s, ready %t; want healthy and ready", h, ready)
	}
}

func TestEveryFailingCheckOfAClosedMemberHasACause(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := s.Readiness()
	for _, c := range r.Checks {
		if !c.OK && c.Cause == "" {
			t.Errorf("the failing check %s has no cause", c.Name)
		}
		if c.OK && (c.Cause != "" || c.Reason != "") {
			t.Errorf("the passing check %s has cause %q, reason %q; want neither", c.Name, c.Cause, c.Reason)
		}
	}
	if r.Ready {
		t.Error("a closed system is ready")
	}
}
