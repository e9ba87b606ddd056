package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/system"
)

// TestOrderlyLeaveFailsNoAsk reproduces a Troupe bug, so it is skipped
// unless TROUPE_REPRO=1: asks for the keys of a member that leaves in
// order (Close) fail for a few milliseconds around the end of its leave,
// though Close promises a handover. Survivors ask the leaver's keys
// continuously from before Close until 300 ms after it returns; every ask
// should succeed. Seen (go test -race, 2 cores), within 1-5 ms after
// Close returned:
//
//	troupe: actor unavailable: owner 127.0.0.1:40421#1795981424696817564 is down
//	troupe: actor unavailable: counter/cyd: owner changed twice during the request: troupe: not the owner; try 127.0.0.1:38689
//
// The first: a survivor's placement still names the leaver (it refreshes
// from membership events on its own goroutine, after the left record that
// Leave flushed has arrived) and fails the ask instead of placing it
// again. The second: the not-owner hint is followed only once while views
// still differ.
func TestOrderlyLeaveFailsNoAsk(t *testing.T) {
	if os.Getenv("TROUPE_REPRO") == "" {
		t.Skip("reproduces a Troupe bug (asks fail just after an orderly leave); run with TROUPE_REPRO=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for round := range 5 {
		failures, first := leaveUnderAsks(t, ctx)
		if failures > 0 {
			t.Fatalf("round %d: %d asks failed around an orderly leave, want none; the first: %v", round, failures, first)
		}
	}
}

// leaveUnderAsks starts three members, has the first two ask every key
// of the third while it leaves, and returns the asks that failed.
func leaveUnderAsks(t *testing.T, ctx context.Context) (int64, error) {
	var systems []*system.System
	defer func() {
		for _, s := range systems {
			s.Close(context.Background())
		}
	}()
	var seeds []string
	for range 3 {
		cc := cluster.FastConfig("127.0.0.1:0")
		cc.ClusterName = "leave-repro"
		cc.Seeds = seeds
		s, err := system.Start(ctx, system.Config{Actors: []system.Definition{Counter}, Cluster: &cc})
		if err != nil {
			t.Fatal(err)
		}
		systems = append(systems, s)
		seeds = []string{systems[0].Addr()}
	}
	if err := waitAgreed(ctx, systems, 3); err != nil {
		t.Fatal(err)
	}
	// Keys the leaver serves: Counter's replies do not name the node
	// (it hosts no node), so ask the leaver's own definition instead.
	leaver, survivors := systems[2], systems[:2]
	var theirs []string
	for i := 0; len(theirs) < 8 && i < 1000; i++ {
		key := fmt.Sprintf("key-%d", i)
		if _, err := actor.Ask(ctx, Counter.Ref(leaver, key), Get{}); err != nil {
			t.Fatal(err)
		}
		if leaver.Stats().Active > len(theirs) {
			theirs = append(theirs, key)
		}
	}
	var failures, done atomic.Int64
	var firstMu sync.Mutex
	var first error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range survivors {
		for _, key := range theirs {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					askCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := actor.Ask(askCtx, Counter.Ref(s, key), Get{})
					cancel()
					done.Add(1)
					if err != nil {
						failures.Add(1)
						firstMu.Lock()
						if first == nil {
							first = err
						}
						firstMu.Unlock()
					}
				}
			})
		}
	}
	// Asks are flowing before the leave...
	for done.Load() < int64(4*len(survivors)*len(theirs)) {
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
	if err := leaver.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("close: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // ...and for a while after it: a measurement window
	close(stop)
	wg.Wait()
	return failures.Load(), first
}
