package memrecords

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-go/troupe/noderecord"
	"github.com/troupe-go/troupe/noderecord/recordtest"
)

func TestContract(t *testing.T) {
	recordtest.Run(t, func(t *testing.T) recordtest.Harness {
		clock := newFakeClock()
		s := New(Config{Clock: clock})
		t.Cleanup(func() { s.Close() })
		return recordtest.Harness{
			Store:        s,
			Advance:      clock.Advance,
			Compact:      func(context.Context) error { s.Compact(); return nil },
			BreakWatches: func(*testing.T) { s.FailWatches(errors.New("the test broke it")) },
			Unavailable: func(t *testing.T) noderecord.Store {
				u := New(Config{Clock: clock})
				u.SetUnavailable(errors.New("not joined"))
				return u
			},
		}
	})
}

// On the real clock, with the default config, too.
func TestContractOnTheRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for leases in real time")
	}
	recordtest.Run(t, func(t *testing.T) recordtest.Harness {
		s := New(Config{})
		t.Cleanup(func() { s.Close() })
		return recordtest.Harness{
			Store:        s,
			ShortTTL:     50 * time.Millisecond,
			Compact:      func(context.Context) error { s.Compact(); return nil },
			BreakWatches: func(*testing.T) { s.FailWatches(errors.New("the test broke it")) },
			Unavailable: func(t *testing.T) noderecord.Store {
				u := New(Config{})
				u.SetUnavailable(errors.New("not joined"))
				return u
			},
		}
	})
}

func rec(node string, seq uint64) noderecord.Record {
	return noderecord.Record{Cluster: "c", Role: "member", Node: node, Incarnation: "i", Seq: seq}
}

func TestAWatcherMoreThanHistoryBehindIsCompacted(t *testing.T) {
	s := New(Config{History: 3, Clock: newFakeClock()})
	defer s.Close()
	ctx := t.Context()
	w, err := s.Watch(ctx, "c", "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for seq := range uint64(4) {
		if _, err := s.Put(ctx, rec("n", seq), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Next(ctx); !errors.Is(err, noderecord.ErrCompacted) {
		t.Errorf("a watcher 4 changes behind a history of 3: Next = %v, want ErrCompacted", err)
	}
	if _, err := s.Watch(ctx, "c", "0"); !errors.Is(err, noderecord.ErrCompacted) {
		t.Errorf("Watch from before the history = %v, want ErrCompacted", err)
	}
	w2, err := s.Watch(ctx, "c", "1")
	if err != nil {
		t.Fatalf("Watch from the oldest revision kept: %v", err)
	}
	defer w2.Close()
	if ev, err := w2.Next(ctx); err != nil || ev.Record.Seq != 1 {
		t.Errorf("Watch from revision 1: %v %v, want the put of seq 1", ev.Record.Seq, err)
	}
}

func TestALeaseLapsesOnItsTimerWithoutAnotherCall(t *testing.T) {
	clock := newFakeClock()
	s := New(Config{Clock: clock})
	defer s.Close()
	ctx := t.Context()
	w, _ := s.Watch(ctx, "c", "")
	defer w.Close()
	s.Put(ctx, rec("a", 0), 10*time.Second)
	s.Put(ctx, rec("b", 0), 5*time.Second)
	w.Next(ctx)
	w.Next(ctx)
	clock.Advance(5 * time.Second)
	// The timer deleted b already: Next takes the event without the
	// store being called first.
	s.mu.Lock()
	_, bLive := s.records[rec("b", 0).Key()]
	s.mu.Unlock()
	if bLive {
		t.Fatal("b's lease lapsed but its timer did not delete it")
	}
	if ev, err := w.Next(ctx); err != nil || ev.Kind != noderecord.EventDelete || ev.Key.Node != "b" {
		t.Fatalf("after 5 s: %v %v, want the delete of b", ev, err)
	}
	clock.Advance(5 * time.Second)
	if ev, err := w.Next(ctx); err != nil || ev.Kind != noderecord.EventDelete || ev.Key.Node != "a" {
		t.Fatalf("after 10 s: %v %v, want the delete of a", ev, err)
	}
}

func TestSetUnavailableFailsCallsUntilClearedAndEndsWatches(t *testing.T) {
	s := New(Config{Clock: newFakeClock()})
	defer s.Close()
	ctx := t.Context()
	s.Put(ctx, rec("a", 0), time.Minute)
	w, _ := s.Watch(ctx, "c", "")
	defer w.Close()
	reason := errors.New("lost the majority")
	done := make(chan error, 1)
	go func() { _, err := w.Next(ctx); done <- err }()
	s.SetUnavailable(reason)
	if err := <-done; !errors.Is(err, noderecord.ErrUnavailable) || !errors.Is(err, reason) {
		t.Errorf("a waiting Next when the store became unavailable = %v, want ErrUnavailable wrapping the reason", err)
	}
	if _, err := s.Snapshot(ctx, "c"); !errors.Is(err, noderecord.ErrUnavailable) {
		t.Errorf("Snapshot while unavailable = %v, want ErrUnavailable", err)
	}
	s.SetUnavailable(nil)
	snap, err := s.Snapshot(ctx, "c")
	if err != nil || len(snap.Records) != 1 {
		t.Errorf("Snapshot once available again = %d records, %v; want the record kept meanwhile", len(snap.Records), err)
	}
	s.Put(ctx, rec("a", 1), time.Minute)
	if ev, err := w.Next(ctx); !errors.Is(err, noderecord.ErrUnavailable) {
		t.Errorf("the watcher's Next once available again = %v %v, want ErrUnavailable still: the error ended its watch", ev, err)
	}
}

func TestNextEndsWithItsContextAsACanceledCall(t *testing.T) {
	s := New(Config{Clock: newFakeClock()})
	defer s.Close()
	w, _ := s.Watch(t.Context(), "c", "")
	defer w.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := w.Next(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, noderecord.ErrTimeout) {
		t.Errorf("Next with a canceled context = %v, want context.Canceled, not a timeout", err)
	}
}

// The store keeps no timer once no record is left, and its last Close
// stops the pending one.
func TestCloseStopsTheLeaseTimer(t *testing.T) {
	s := New(Config{})
	s.Put(t.Context(), rec("a", 0), time.Hour)
	s.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopTimer != nil {
		t.Error("a timer is still set after Close")
	}
}

func ExampleStore() {
	s := New(Config{})
	defer s.Close()
	ctx := context.Background()
	r := noderecord.Record{Cluster: "shop", Role: "member", Node: "10.0.0.5:7400", Incarnation: "7f3a", Seq: 0, Health: noderecord.Healthy, Ready: true}
	res, _ := s.Put(ctx, r, noderecord.DefaultTimings().LeaseTTL)
	fmt.Println(res.Decision)
	res, _ = s.Put(ctx, r, noderecord.DefaultTimings().LeaseTTL) // a retry
	fmt.Println(res.Decision)
	snap, _ := s.Snapshot(ctx, "shop")
	fmt.Println(len(snap.Records), snap.Records[0].Health)
	// Output:
	// inserted
	// duplicate
	// 1 healthy
}
