package main

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestClosingEveryMemberInTurnSucceeds reproduces a Troupe bug, so it is
// skipped unless TROUPE_REPRO=1: closing the members of a cluster one
// after the other sometimes fails, on a loaded machine, with
//
//	troupe: leave: flush: context deadline exceeded
//
// after the whole LeaveTimeout (2 s here). Seen in about 1 round in 20
// with load average 15 on 2 cores, not at all in 200 rounds with less
// load. A guess: a member leaving just after another still counts the
// one already gone among the neighbours its left record must reach.
func TestClosingEveryMemberInTurnSucceeds(t *testing.T) {
	if os.Getenv("TROUPE_REPRO") == "" {
		t.Skip("reproduces a Troupe bug (Close fails a flush to a member that already left); run with TROUPE_REPRO=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for round := range 100 {
		members, err := startCluster(ctx, 3)
		start := time.Now()
		if cerr := closeAll(members); cerr != nil || err != nil {
			t.Fatalf("round %d: start: %v; closing the members in turn took %v: %v", round, err, time.Since(start), cerr)
		}
	}
}
