package system

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/runtime"

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
		for _, k := range timedKeys(ts) {
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
	got := timedKeys(ts)
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
		for _, k := range ts.takeDue(at(sec), wakeParallel, nil) {
			ts.waking(k, at(sec)) // as the waker does
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
	// a wake failed (failed), or the queue is made again.
	if got := take(60); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("due by 60: %v, want [c]", got)
	}
	if got := take(60); len(got) != 0 {
		t.Fatalf("due by 60 again: %v, want none", got)
	}
	ts.ended(replica.Key{Type: "t", ID: "a"}, at(70))
	if p := ts.failed(replica.Key{Type: "t", ID: "b"}, at(80)); p != wakeRetryMin {
		t.Fatalf("a first failure backs off %v, want %v", p, wakeRetryMin)
	}
	ts.ended(replica.Key{Type: "t", ID: "none"}, at(0)) // no timers: not queued
	if got := take(70); len(got) != 0 {
		t.Fatalf("due by 70: %v, want none (a ended at 70: not before wakeSettle)", got)
	}
	if got := take(75); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("due by 75: %v, want [a] (ended at 70)", got)
	}
	if got := take(80); len(got) != 0 {
		t.Fatalf("due by 80: %v, want none (b failed at 80)", got)
	}
	if got := take(81); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("due by 81: %v, want [b] (failed at 80, a second's pause)", got)
	}
	// An activation that ends soon after its wake backs its key off,
	// more each time, until the key is stored again.
	a := replica.Key{Type: "t", ID: "a"}
	takeAt := func(when time.Time) []replica.Key {
		ks := ts.takeDue(when, wakeParallel, nil)
		for _, k := range ks {
			ts.waking(k, when)
		}
		return ks
	}
	for i, want := range []time.Duration{wakeRetryMin, 2 * wakeRetryMin, 4 * wakeRetryMin} {
		woken := 200 + int64(10*i)
		if got := takeAt(at(woken)); len(got) != 0 && i == 0 {
			t.Fatalf("due by %d: %v, want none before a is queued again", woken, got)
		}
		ts.ended(a, at(woken))
		ts.mu.Lock()
		ts.woke[a] = at(woken).UnixNano()
		ts.mu.Unlock()
		ts.ended(a, at(woken).Add(100*time.Millisecond))
		ts.mu.Lock()
		pause := ts.back[a].pause
		ts.mu.Unlock()
		if pause != want {
			t.Fatalf("ending %d times soon after a wake: a pause of %v, want %v", i+1, pause, want)
		}
		if got := takeAt(at(woken).Add(want)); len(got) != 0 {
			t.Fatalf("a woken %v after its last end, within its pause: %v", want, got)
		}
		if got := takeAt(at(woken).Add(want + time.Second)); !slices.Contains(got, a) {
			t.Fatalf("a not woken after its pause of %v: %v", want, got)
		}
	}
	backedOff := func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		_, ok := ts.back[a]
		return ok
	}
	// Written again with the same timers (an acquisition writes back what
	// it adopted): no progress. With its timers moved: progress.
	if err := ts.Put(ctx, stateRecord("a", 3, timedAt(10))); err != nil {
		t.Fatal(err)
	}
	if !backedOff() {
		t.Fatal("a key written again with the same timers is no longer backed off")
	}
	if err := ts.Put(ctx, stateRecord("a", 4, timedAt(11))); err != nil {
		t.Fatal(err)
	}
	if backedOff() {
		t.Fatal("a key whose timers moved is still backed off")
	}
	if got := take(250); !slices.Contains(got, "a") {
		t.Fatalf("due by 250 after a was stored again: %v, want a", got)
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
	// Stored again with the same timers, a broken key is queued again at
	// once, not at the next requeue.
	ts.markBroken(replica.Key{Type: "t", ID: "a"})
	if err := ts.Put(ctx, stateRecord("a", 3, timedAt(10))); err != nil {
		t.Fatal(err)
	}
	if got := take(100); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("due by 100 after the broken a was stored with the same timers: %v, want [a]", got)
	}
}

// A requeue of many keys lets Puts in between its batches (the
// replication loop's), and its new queue keeps what they queued: keys
// added while the map is ranged over (growing it), keys that lost their
// timers before they were listed, and changes after the last batch.
func TestARequeueLetsPutsInBetweenItsBatchesAndKeepsWhatTheyQueued(t *testing.T) {
	ctx := context.Background()
	ts := newTimedStore(replicastore.NewMemory(), 0)
	if err := ts.index(ctx); err != nil {
		t.Fatal(err)
	}
	n := 3*requeueBatch + 10
	want := map[string]bool{}
	for i := range n {
		if err := ts.Put(ctx, stateRecord(fmt.Sprint(i), 1, timedAt(int64(1000+i)))); err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprint(i)] = true
	}
	put := func(recs ...replica.Record) {
		done := make(chan error, 1)
		go func() { done <- ts.Put(ctx, recs...) }()
		if err := recv(t, done, "a Put in the middle of a requeue"); err != nil {
			t.Error(err)
		}
	}
	batches, listed := 0, false
	ts.betweenBatches = func(last bool) {
		switch batches++; {
		case batches == 1:
			// More keys than the map held (it grows while ranged over),
			// and a tenth of the keys without timers.
			var recs []replica.Record
			for i := range n {
				recs = append(recs, stateRecord(fmt.Sprint("m", i), 1, timedAt(int64(1000+i))))
				want[fmt.Sprint("m", i)] = true
			}
			for i := 0; i < n; i += 10 {
				recs = append(recs, stateRecord(fmt.Sprint(i), 2, untimedValue))
				delete(want, fmt.Sprint(i))
			}
			put(recs...)
		case last: // the keys are listed, the queue not made
			listed = true
			put(stateRecord("1", 2, timedAt(5)), stateRecord("new", 1, timedAt(6)), stateRecord("2", 2, untimedValue))
			want["1"], want["new"] = true, true
			delete(want, "2")
		}
	}
	ts.requeue()
	if batches < 3 || !listed {
		t.Fatalf("%d pauses for %d keys and more (listed: %v), want some between batches and one after", batches, n, listed)
	}
	var got []string
	for {
		k := ts.takeDue(time.Unix(1<<32, 0), 1, nil)
		if len(k) == 0 {
			break
		}
		got = append(got, k[0].ID)
	}
	if len(got) != len(want) || got[0] != "1" || got[1] != "new" {
		t.Fatalf("took %d keys, first %v; want %d (1 and new first)", len(got), got[:min(2, len(got))], len(want))
	}
	for _, id := range got {
		if !want[id] {
			t.Fatalf("took %s twice, or without timers", id)
		}
		delete(want, id)
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
	if got := ts.takeDue(time.Unix(1<<32, 0), wakeParallel, nil); len(got) != 2 {
		t.Fatalf("%d keys due, want 2", len(got))
	}
}

// fakeWaker is a kind whose wakes the test decides: wake answers each.
type fakeWaker struct {
	wake func(key string, done func(error))
}

func (fakeWaker) Name() string                              { return "t" }
func (fakeWaker) Sweep(time.Time)                           {}
func (fakeWaker) Deepest() int                              { return 0 }
func (fakeWaker) Stop()                                     {}
func (fakeWaker) Abort()                                    {}
func (fakeWaker) Queued() int                               { return 0 }
func (fakeWaker) Activations() int                          { return 0 }
func (f fakeWaker) WakeTimers(key string, done func(error)) { f.wake(key, done) }

// runWaker runs a waker of keys of the pinned durable type "t" over an
// in-memory store, waking through f, until the test ends.
func runWaker(t *testing.T, f fakeWaker) *states {
	t.Helper()
	s := &states{log: slog.New(slog.DiscardHandler), kinds: map[string]runtime.Storage{"t": {Durable: true, Pinned: true}},
		held: make(map[replica.Key]bool), wakeNow: make(chan struct{}, 1)}
	s.timed = newTimedStore(replicastore.NewMemory(), 0)
	h := host.New(host.Settings{})
	t.Cleanup(func() { h.Close(context.Background()) })
	if !h.Register(f) {
		t.Fatal("register the fake kind")
	}
	s.setHost(h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.wakeTimers(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func TestAWakeThatHangsHoldsUpNoOtherKey(t *testing.T) {
	woken := make(chan string, 16)
	hung := make(chan func(error), 1)
	s := runWaker(t, fakeWaker{wake: func(key string, done func(error)) {
		if key == "hangs" {
			hung <- done // answered when the test ends
			return
		}
		woken <- key
		done(nil)
	}})
	t.Cleanup(func() { (<-hung)(context.Canceled) })
	now := time.Now().Unix()
	if err := s.timed.Put(context.Background(), stateRecord("hangs", 1, timedAt(now-1))); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-hung:
		hung <- f
	case <-time.After(10 * time.Second):
		t.Fatal("the first key was not woken")
	}
	if err := s.timed.Put(context.Background(), stateRecord("next", 1, timedAt(now))); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, woken, "the next key, while the first one's wake hangs"); got != "next" {
		t.Fatalf("woke %q, want next", got)
	}
}

func TestAKeyWhoseWakesFailIsTriedAgainLessAndLessOften(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"the acquisition fails", fmt.Errorf("%w: no quorum", actor.ErrUnavailable)},
		{"the activation ends at once (its commit fails, say)", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s *states
			tries := make(chan time.Time, 64)
			rec := stateRecord("k", 1, timedAt(time.Now().Unix()-1))
			s = runWaker(t, fakeWaker{wake: func(key string, done func(error)) {
				tries <- time.Now()
				// As the runtime does: the acquisition writes back what
				// it adopted, then the activation ends and resigns the
				// key.
				if err := s.timed.Put(context.Background(), rec); err != nil {
					t.Error(err)
				}
				s.Resign("t", key)
				done(c.err)
			}})
			if err := s.timed.Put(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
			var at []time.Time
			for range 3 {
				at = append(at, recv(t, tries, "a wake"))
			}
			// Each pause is at least wakeRetryMin, and doubles (the
			// waker wakes keys wakeLead early).
			for i, want := range []time.Duration{wakeRetryMin - wakeLead, 2*wakeRetryMin - wakeLead} {
				if gap := at[i+1].Sub(at[i]); gap < want {
					t.Fatalf("wake %d came %v after wake %d, want at least %v", i+2, gap, i+1, want)
				}
			}
		})
	}
}

// recv receives from c, failing the test after 10 s.
func recv[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10s for %s", what)
		panic("unreachable")
	}
}

// timedKeys returns the keys whose stored state ts notes as holding a
// timer, but those marked broken.
func timedKeys(ts *timedStore) []replica.Key {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ks := make([]replica.Key, 0, len(ts.due))
	for k := range ts.due {
		if _, ok := ts.broken[k]; !ok {
			ks = append(ks, k)
		}
	}
	return ks
}
