package system

import (
	"context"
	"fmt"
	"slices"
	"testing"

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
	ts := newTimedStore(mem)
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
	if ts.Unclean() || !newTimedStore(uncleanStore{mem}).Unclean() {
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
	ts := newTimedStore(mem)
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
