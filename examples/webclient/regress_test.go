package main

import (
	"context"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/system"
)

// TestClosingEveryMemberInTurnSucceeds closes the members of a cluster
// one after the other, with Config.LeaveTimeout at 2 s. A leave flushes
// what it has for its peers for at most a heartbeat; a flush that waited
// for the membership's MessageTTL (also 2 s), for messages to a member
// that had just left, made a Close take about 2 s instead of
// milliseconds and fail with
//
//	troupe: leave: flush: context deadline exceeded
//
// about one round in 20 on a loaded machine. The test asserts the
// outcome, not the time: a flush that waits that long runs into the
// LeaveTimeout and Close reports it; how long a Close takes on a loaded
// machine is only logged.
func TestClosingEveryMemberInTurnSucceeds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var slowest time.Duration
	for round := range 10 {
		var members []*system.System
		var seeds []string
		for range 3 {
			cc := cluster.FastConfig("127.0.0.1:0")
			cc.ClusterName = "close-repro"
			cc.Seeds = seeds
			s, err := system.Start(ctx, system.Config{Actors: []actor.Definition{Page}, Cluster: &cc, LeaveTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			members = append(members, s)
			seeds = []string{members[0].Addr()}
		}
		for i, s := range members {
			start := time.Now()
			err := s.Close(ctx)
			took := time.Since(start)
			slowest = max(slowest, took)
			if err != nil {
				t.Fatalf("round %d: closing member %d of 3 failed after %v: %v", round, i+1, took, err)
			}
		}
	}
	t.Logf("slowest Close: %v", slowest)
}
