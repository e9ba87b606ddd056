package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
)

// TestOrderlyLeaveFailsNoAsk holds Close to its promise of a hand-over:
// the two other members ask the keys of a member that leaves in order
// continuously, from before its Close until 300 ms after it returns, and
// every ask succeeds. While views differ, members could redirect an ask
// to each other until it ran out of redirects; asks wait for the views to
// converge instead.
func TestOrderlyLeaveFailsNoAsk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for round := range 20 {
		failures, first := leaveUnderAsks(t, ctx)
		if failures > 0 {
			t.Fatalf("round %d: %d asks failed around an orderly leave, want none; the first: %v", round, failures, first)
		}
	}
}

// leaveUnderAsks starts three members, has the first two ask every key
// of the third while it leaves, and returns the asks that failed.
func leaveUnderAsks(t *testing.T, ctx context.Context) (int64, error) {
	systems, err := startMembers(ctx, 3)
	defer closeAll(systems)
	if err != nil {
		t.Fatal(err)
	}
	// Keys the leaver serves.
	leaver, survivors := systems[2], systems[:2]
	var theirs []string
	for i := 0; len(theirs) < 8 && i < 1000; i++ {
		key := fmt.Sprintf("key-%d", i)
		got, err := actor.Ask(ctx, Counter.Ref(leaver, key), Get{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Node == leaver.Addr() {
			theirs = append(theirs, key)
		}
	}
	var failures, done atomic.Int64
	var closing atomic.Value // when Close began
	closing.Store(time.Now().Add(time.Hour))
	var firstMu sync.Mutex
	var first error
	stop := make(chan struct{})
	// flowing closes once every asker has asked a few times.
	flowing := make(chan struct{})
	enough := int64(4 * len(survivors) * len(theirs))
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
					sent := time.Now()
					_, err := actor.Ask(askCtx, Counter.Ref(s, key), Get{})
					cancel()
					if done.Add(1) == enough {
						close(flowing) // Add returns enough exactly once
					}
					if err != nil {
						failures.Add(1)
						firstMu.Lock()
						if first == nil {
							first = fmt.Errorf("ask sent %v after Close began, failed %v after: %w",
								sent.Sub(closing.Load().(time.Time)), time.Since(closing.Load().(time.Time)), err)
						}
						firstMu.Unlock()
					}
				}
			})
		}
	}
	// Asks are flowing before the leave...
	select {
	case <-flowing:
	case <-ctx.Done():
		close(stop)
		wg.Wait()
		t.Fatal(ctx.Err())
	}
	closing.Store(time.Now())
	if err := leaver.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("close: %v", err)
	}
	// ...and for a while after it: a window of asks to the new owners.
	select {
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
	}
	close(stop)
	wg.Wait()
	return failures.Load(), first
}
