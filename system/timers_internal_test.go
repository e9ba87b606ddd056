package system

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicastore"
)

// A runtime record (format 1) with state 42 and one timer, and one with
// no timer.
var (
	timedValue   = []byte{1, 1, 0x2a, 1, 1, 't', 2, 0, 1, 'm', 1, 0xc0}
	untimedValue = []byte{1, 1, 0x2a, 0}
)

func stateRecord(id string, version uint64, value []byte) replica.Record {
	return replica.Record{Key: replica.Key{Type: "t", ID: id}, Kind: replica.KindState, Version: version, Value: value}
}

func TestTheTimedStoreKnowsWhichStoredStatesHoldTimers(t *testing.T) {
	ctx := context.Background()
	mem := replicastore.NewMemory()
	// Stored before the index: found by it.
	if err := mem.Put(ctx, stateRecord("before", 1, timedValue), stateRecord("plain", 1, untimedValue)); err != nil {
		t.Fatal(err)
	}
	ts := newTimedStore(mem, 0)
	// Stored while the index reads: Put's note stands, whatever copy the
	// index read ("before" no longer holds a timer).
	if err := ts.Put(ctx, stateRecord("before", 2, untimedValue), stateRecord("new", 1, timedValue)); err != nil {
		t.Fatal(err)
	}
	if err := ts.index(ctx); err != nil {
		t.Fatal(err)
	}
	ids := func() []string {
		var out []string
		for _, k := range ts.keys() {
			out = append(out, k.ID)
		}
		slices.Sort(out)
		return out
	}
	if got := ids(); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("keys with timers %v, want [new]", got)
	}
	if err := ts.Put(ctx, stateRecord("other", 1, timedValue), replica.Record{Key: replica.Key{Type: "t", ID: "x"}, Kind: replica.KindContinuity, Name: "r", Value: timedValue}); err != nil {
		t.Fatal(err)
	}
	if got := ids(); !slices.Equal(got, []string{"new", "other"}) {
		t.Fatalf("keys with timers %v, want [new other] (a continuity record is not state)", got)
	}
	tomb := stateRecord("new", 2, nil)
	tomb.Tombstone = true
	if err := ts.Put(ctx, tomb, replica.Erasing(stateRecord("other", 1, timedValue))); err != nil {
		t.Fatal(err)
	}
	if got := ids(); len(got) != 0 {
		t.Fatalf("keys with timers %v after a tombstone and an erase, want none", got)
	}
	if ts.Unclean() || !newTimedStore(uncleanStore{mem}, 0).Unclean() {
		t.Fatal("the store's Unclean is not passed on (replicanode.Open reads it)")
	}
}

type uncleanStore struct{ replicastore.Store }

func (uncleanStore) Unclean() bool { return true }

func TestTheTimedStoreIndexesWhilePutsGoOn(t *testing.T) {
	ctx := context.Background()
	mem := replicastore.NewMemory()
	const n = 500
	for i := range n {
		if err := mem.Put(ctx, stateRecord(fmt.Sprint("k", i), 1, timedValue)); err != nil {
			t.Fatal(err)
		}
	}
	ts := newTimedStore(mem, 0)
	done := make(chan error, 1)
	go func() {
		// Every odd key loses its timer while the index reads.
		for i := 1; i < n; i += 2 {
			if err := ts.Put(ctx, stateRecord(fmt.Sprint("k", i), 2, untimedValue)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if err := ts.index(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := ts.keys()
	if len(got) != n/2 {
		t.Fatalf("%d keys with timers, want %d", len(got), n/2)
	}
	for _, k := range got {
		var i int
		if _, err := fmt.Sscanf(k.ID, "k%d", &i); err != nil || i%2 != 0 {
			t.Fatalf("%s listed with a timer; only even keys keep theirs", k.ID)
		}
	}
}

// timedAt is a runtime record (format 1) with state 42 and one timer due
// at the Unix second sec.
func timedAt(sec int64) []byte {
	b := []byte{1, 1, 0x2a, 1, 1, 't'}
	b = binary.AppendVarint(b, time.Unix(sec, 0).UnixNano())
	return append(b, 0, 1, 'm', 1, 0xc0)
}

func TestTheTimedStoreQueuesKeysByWhenTheirFirstTimerIsDue(t *testing.T) {
	ctx := context.Background()
	ts := newTimedStore(replicastore.NewMemory(), 0)
	if err := ts.index(ctx); err != nil {
		t.Fatal(err)
	}
	<-ts.sooner // the index's
	at := func(sec int64) time.Time { return time.Unix(sec, 0) }
	take := func(sec int64) []string {
		var ids []string
		for _, k := range ts.takeDue(at(sec)) {
			ids = append(ids, k.ID)
		}
		slices.Sort(ids)
		return ids
	}
	if err := ts.Put(ctx, stateRecord("c", 1, timedAt(30)), stateRecord("a", 1, timedAt(10)), stateRecord("b", 1, timedAt(20))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ts.sooner:
	default:
		t.Fatal("the waker was not told of a key due sooner than any")
	}
	if next, ok := ts.next(); !ok || !next.Equal(at(10)) {
		t.Fatalf("next %v, %v; want %v", next, ok, at(10))
	}
	if got := take(5); len(got) != 0 {
		t.Fatalf("due by 5: %v, want none", got)
	}
	if got := take(15); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("due by 15: %v, want [a]", got)
	}
	// "c" stored again, due later: its first entry is stale.
	if err := ts.Put(ctx, stateRecord("c", 2, timedAt(50))); err != nil {
		t.Fatal(err)
	}
	if got := take(40); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("due by 40: %v, want [b] (c moved to 50)", got)
	}
	// Taken keys leave the queue until their activation ends (ended),
	// a wake is tried again (retry), or the queue is made again.
	if got := take(60); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("due by 60: %v, want [c]", got)
	}
	if got := take(60); len(got) != 0 {
		t.Fatalf("due by 60 again: %v, want none", got)
	}
	ts.ended(replica.Key{Type: "t", ID: "a"}, at(70))
	ts.retry(replica.Key{Type: "t", ID: "b"}, at(80))
	ts.ended(replica.Key{Type: "t", ID: "none"}, at(0)) // no timers: not queued
	if got := take(75); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("due by 75: %v, want [a] (ended, not before 70)", got)
	}
	if got := take(85); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("due by 85: %v, want [b] (retried at 80)", got)
	}
	ts.markBroken(replica.Key{Type: "t", ID: "a"})
	ts.requeue()
	if got := take(100); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("due by 100 after a requeue: %v, want [b c] (a is broken)", got)
	}
	// Stored again, a broken key is woken again; one whose state lost its
	// timers is not.
	if err := ts.Put(ctx, stateRecord("a", 2, timedAt(10)), stateRecord("b", 2, untimedValue)); err != nil {
		t.Fatal(err)
	}
	ts.requeue()
	if got := take(100); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("due by 100 after a and b were stored: %v, want [a c]", got)
	}
}

func TestTheTimedStoreQueueStaysBoundedAsKeysAreStoredAgain(t *testing.T) {
	ctx := context.Background()
	ts := newTimedStore(replicastore.NewMemory(), 0)
	for v := range uint64(10_000) {
		if err := ts.Put(ctx, stateRecord("k", v+1, timedAt(int64(v))), stateRecord("j", v+1, timedAt(int64(v)))); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(ts.queue); n > 2*len(ts.due)+1024+1 {
		t.Fatalf("%d entries queued for %d keys", n, len(ts.due))
	}
	if got := ts.takeDue(time.Unix(1<<32, 0)); len(got) != 2 {
		t.Fatalf("%d keys due, want 2", len(got))
	}
}
