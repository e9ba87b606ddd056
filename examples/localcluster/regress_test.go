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
	"github.com/troupe-go/troupe/system"
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
	leaver, survivors := systems[2], systems[:2]
	theirs := keysOf(t, ctx, leaver)
	l := &askLoad{closing: time.Now().Add(time.Hour), flowing: make(chan struct{}), stop: make(chan struct{})}
	l.enough = int64(4 * len(survivors) * len(theirs))
	for _, s := range survivors {
		for _, key := range theirs {
			l.wg.Go(func() { l.ask(ctx, s, key) })
		}
	}
	// Asks are flowing before the leave...
	select {
	case <-l.flowing:
	case <-ctx.Done():
		l.end()
		t.Fatal(ctx.Err())
	}
	l.mu.Lock()
	l.closing = time.Now()
	l.mu.Unlock()
	if err := leaver.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("close: %v", err)
	}
	// ...and for a while after it: a window of asks to the new owners.
	select {
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
	}
	l.end()
	return l.failures.Load(), l.first
}

// keysOf returns 8 keys that s serves.
func keysOf(t *testing.T, ctx context.Context, s *system.System) []string {
	var keys []string
	for i := 0; len(keys) < 8 && i < 1000; i++ {
		key := fmt.Sprintf("key-%d", i)
		got, err := actor.Ask(ctx, Counter.Ref(s, key), Get{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Node == s.Addr() {
			keys = append(keys, key)
		}
	}
	return keys
}

// askLoad is a set of goroutines asking keys in a loop until stop closes.
type askLoad struct {
	enough   int64         // asks after which flowing closes
	flowing  chan struct{} // closed once enough asks returned
	stop     chan struct{}
	wg       sync.WaitGroup
	done     atomic.Int64
	failures atomic.Int64
	mu       sync.Mutex
	closing  time.Time // when Close began
	first    error     // the first failure
}

func (l *askLoad) ask(ctx context.Context, s *system.System, key string) {
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		askCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		sent := time.Now()
		_, err := actor.Ask(askCtx, Counter.Ref(s, key), Get{})
		cancel()
		if l.done.Add(1) == l.enough {
			close(l.flowing) // Add returns enough exactly once
		}
		if err != nil {
			l.failures.Add(1)
			l.mu.Lock()
			if l.first == nil {
				l.first = fmt.Errorf("ask sent %v after Close began, failed %v after: %w",
					sent.Sub(l.closing), time.Since(l.closing), err)
			}
			l.mu.Unlock()
		}
	}
}

// end stops the askers and waits for them.
func (l *askLoad) end() {
	close(l.stop)
	l.wg.Wait()
}
