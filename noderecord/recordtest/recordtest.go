package recordtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/noderecord"
)

// Harness is one backend under test.
type Harness struct {
	// Store is a store the suite may use and close; the suite does not
	// assume it is empty, only that no one else writes its clusters.
	Store noderecord.Store
	// Advance lets d pass on the store's clock and returns once what
	// fell due has happened. Nil for a backend on real time.
	Advance func(d time.Duration)
	// ShortTTL is the lease the suite puts when it must wait in real
	// time for one to lapse. Default 1 s.
	ShortTTL time.Duration
	// Compact drops the store's history up to its current revision, so
	// that a watch from an earlier revision fails with ErrCompacted.
	Compact func(ctx context.Context) error
	// Unavailable returns a store whose backend cannot answer (stopped,
	// unreachable, refusing).
	Unavailable func(t *testing.T) noderecord.Store
	// BreakWatches makes the backend's own watch fail under every
	// watcher open on Store now (it reports an error, is cancelled, or
	// ends), as a failing backend would, without closing the watchers;
	// the store keeps serving other calls and later watches. The suite
	// expects each such watcher's Next to end its watch with an error at
	// once, not wait for its context.
	BreakWatches func(t *testing.T)
}

// wait bounds every wait of the suite; it is long, as only a broken
// backend reaches it.
const wait = 30 * time.Second

// Run runs the contract suite, one subtest per behaviour, each on a
// Harness from newHarness.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, c := range []struct {
		name string
		test func(*testing.T, Harness)
	}{
		{"Insert", testInsert},
		{"Update", testUpdate},
		{"Duplicate", testDuplicate},
		{"Stale", testStale},
		{"RestartWithNewIncarnation", testRestart},
		{"RemoveByAnOldIncarnationKeepsTheNewRecord", testRemoveOldIncarnation},
		{"ConcurrentWriters", testConcurrentWriters},
		{"LeaseExpiry", testLeaseExpiry},
		{"ZeroTTLMeansTheDefaultLease", testDefaultTTL},
		{"Removal", testRemoval},
		{"SnapshotIsConsistentWithAnOpaqueRevision", testSnapshot},
		{"WatchResume", testWatchResume},
		{"WatchSeesOnlyItsCluster", testWatchScope},
		{"WatchEndsWithItsContext", testWatchContext},
		{"CompactionRecoveryByRelisting", testCompaction},
		{"AFailedBackendWatchEndsTheWatch", testWatchFailure},
		{"Timeouts", testTimeouts},
		{"UnavailableBackend", testUnavailable},
		{"InvalidInput", testInvalidInput},
		{"Closed", testClosed},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			if h.ShortTTL == 0 {
				h.ShortTTL = time.Second
			}
			c.test(t, h)
		})
	}
}

// cluster returns the subtest's own cluster id.
func cluster(t *testing.T) string {
	return strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
}

func record(cluster, node, incarnation string, seq uint64) noderecord.Record {
	return noderecord.Record{
		Cluster: cluster, Node: node, Role: "member", Incarnation: incarnation, Seq: seq,
		DataAddr: node + ":7400", Health: noderecord.Healthy, Ready: true,
		Labels: map[string]string{"zone": "a"},
	}
}

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, s noderecord.Store, r noderecord.Record, ttl time.Duration, want noderecord.Decision) noderecord.PutResult {
	t.Helper()
	res, err := s.Put(bounded(t), r, ttl)
	if err != nil {
		t.Fatalf("Put(%s seq %d): %v", r.Incarnation, r.Seq, err)
	}
	if res.Decision != want {
		t.Fatalf("Put(%s seq %d) = %v, want %v", r.Incarnation, r.Seq, res.Decision, want)
	}
	if res.Revision == "" {
		t.Fatalf("Put(%s seq %d) returned no revision", r.Incarnation, r.Seq)
	}
	return res
}

func get(t *testing.T, s noderecord.Store, k noderecord.Key) noderecord.Record {
	t.Helper()
	r, err := s.Get(bounded(t), k)
	if err != nil {
		t.Fatalf("Get(%s): %v", k, err)
	}
	return r
}

func snapshot(t *testing.T, s noderecord.Store, cluster string) noderecord.Snapshot {
	t.Helper()
	snap, err := s.Snapshot(bounded(t), cluster)
	if err != nil {
		t.Fatalf("Snapshot(%s): %v", cluster, err)
	}
	return snap
}

func watch(t *testing.T, s noderecord.Store, cluster string, after noderecord.Revision) noderecord.Watcher {
	t.Helper()
	w, err := s.Watch(bounded(t), cluster, after)
	if err != nil {
		t.Fatalf("Watch(%s, %q): %v", cluster, after, err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func next(t *testing.T, w noderecord.Watcher) noderecord.Event {
	t.Helper()
	ev, err := w.Next(bounded(t))
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ev
}

// same compares what the writer said, leaving out what the store sets.
func same(got, want noderecord.Record) error {
	got.Observed, want.Observed = time.Time{}, time.Time{}
	a, b := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want)
	if a != b {
		return fmt.Errorf("got  %s\nwant %s", a, b)
	}
	return nil
}

func testInsert(t *testing.T, h Harness) {
	r := record(cluster(t), "n1", "inc-a", 0)
	r.Observed = time.Unix(1, 0) // the store replaces it
	put(t, h.Store, r, time.Minute, noderecord.Inserted)
	got := get(t, h.Store, r.Key())
	if err := same(got, r); err != nil {
		t.Errorf("Get after an insert returns another record:\n%v", err)
	}
	if got.Observed.IsZero() || got.Observed.Equal(r.Observed) {
		t.Errorf("Observed = %v, want the store's time of the put", got.Observed)
	}
}

func testUpdate(t *testing.T, h Harness) {
	r := record(cluster(t), "n1", "inc-a", 0)
	first := put(t, h.Store, r, time.Minute, noderecord.Inserted)
	r.Seq, r.Health, r.Counters.Messages = 1, noderecord.Degraded, 10
	second := put(t, h.Store, r, time.Minute, noderecord.Advanced)
	if first.Revision == second.Revision {
		t.Errorf("an accepted update left the revision at %q", first.Revision)
	}
	if err := same(get(t, h.Store, r.Key()), r); err != nil {
		t.Errorf("Get after an update does not return it:\n%v", err)
	}
}

func testDuplicate(t *testing.T, h Harness) {
	r := record(cluster(t), "n1", "inc-a", 3)
	put(t, h.Store, r, time.Minute, noderecord.Inserted)
	before := snapshot(t, h.Store, r.Cluster)
	dup := r
	dup.Health = noderecord.Unhealthy // ignored: same incarnation and sequence
	put(t, h.Store, dup, time.Minute, noderecord.Duplicate)
	put(t, h.Store, dup, time.Minute, noderecord.Duplicate)
	if err := same(get(t, h.Store, r.Key()), r); err != nil {
		t.Errorf("a duplicate changed the record:\n%v", err)
	}
	if after := snapshot(t, h.Store, r.Cluster); after.Revision != before.Revision {
		t.Errorf("a duplicate moved the revision from %q to %q: it wrote", before.Revision, after.Revision)
	}
}

func testStale(t *testing.T, h Harness) {
	r := record(cluster(t), "n1", "inc-a", 5)
	put(t, h.Store, r, time.Minute, noderecord.Inserted)
	before := snapshot(t, h.Store, r.Cluster)
	old := record(r.Cluster, "n1", "inc-a", 4)
	old.Ready = false
	put(t, h.Store, old, time.Minute, noderecord.Stale)
	if err := same(get(t, h.Store, r.Key()), r); err != nil {
		t.Errorf("a stale update changed the record:\n%v", err)
	}
	if after := snapshot(t, h.Store, r.Cluster); after.Revision != before.Revision {
		t.Errorf("a stale update moved the revision from %q to %q", before.Revision, after.Revision)
	}
}

func testRestart(t *testing.T, h Harness) {
	r := record(cluster(t), "n1", "inc-a", 100)
	put(t, h.Store, r, time.Minute, noderecord.Inserted)
	reborn := record(r.Cluster, "n1", "inc-b", 0)
	put(t, h.Store, reborn, time.Minute, noderecord.Restarted)
	if err := same(get(t, h.Store, r.Key()), reborn); err != nil {
		t.Errorf("a restart's record did not replace the old incarnation's:\n%v", err)
	}
	reborn.Seq = 1
	put(t, h.Store, reborn, time.Minute, noderecord.Advanced)
}

func testRemoveOldIncarnation(t *testing.T, h Harness) {
	r := record(cluster(t), "n1", "inc-a", 0)
	put(t, h.Store, r, time.Minute, noderecord.Inserted)
	put(t, h.Store, record(r.Cluster, "n1", "inc-b", 0), time.Minute, noderecord.Restarted)
	removed, err := h.Store.Remove(bounded(t), r.Key(), "inc-a")
	if err != nil || removed {
		t.Fatalf("Remove by the old incarnation = %v, %v; want false, nil", removed, err)
	}
	if got := get(t, h.Store, r.Key()); got.Incarnation != "inc-b" {
		t.Errorf("the new incarnation's record is gone: %+v", got)
	}
}

// Writers race with one incarnation's heartbeats in shuffled orders: the
// store accepts a strictly increasing run of sequences and ends at the
// greatest, as Decide would alone.
func testConcurrentWriters(t *testing.T, h Harness) {
	const writers, beats = 4, 20
	c := cluster(t)
	start := snapshot(t, h.Store, c)
	w := watch(t, h.Store, c, start.Revision)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			seqs := rand.New(rand.NewPCG(uint64(i), 7)).Perm(beats)
			for _, s := range seqs {
				res, err := h.Store.Put(bounded(t), record(c, "n1", "inc-a", uint64(s)+1), time.Minute)
				if err != nil {
					errs <- err
					return
				}
				if res.Decision == noderecord.Restarted {
					errs <- fmt.Errorf("seq %d was taken for a restart", s+1)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a writer: %v", err)
	}
	var last uint64
	for last < beats {
		ev := next(t, w)
		if ev.Kind != noderecord.EventPut {
			t.Fatalf("event %v, want only puts", ev.Kind)
		}
		if last != 0 && ev.Record.Seq <= last {
			t.Fatalf("the store accepted seq %d after seq %d", ev.Record.Seq, last)
		}
		last = ev.Record.Seq
	}
	if got := get(t, h.Store, noderecord.Key{Cluster: c, Role: "member", Node: "n1"}); got.Seq != beats {
		t.Errorf("after the race the record is at seq %d, want %d", got.Seq, beats)
	}
}

func testLeaseExpiry(t *testing.T, h Harness) {
	c := cluster(t)
	r := record(c, "n1", "inc-a", 0)
	keep := record(c, "n2", "inc-a", 0)
	put(t, h.Store, keep, time.Hour, noderecord.Inserted)
	start := snapshot(t, h.Store, c)
	w := watch(t, h.Store, c, start.Revision)
	if h.Advance == nil {
		put(t, h.Store, r, h.ShortTTL, noderecord.Inserted)
		next(t, w) // the put
	} else {
		// Only an accepted update renews the lease.
		const ttl = 30 * time.Second
		put(t, h.Store, r, ttl, noderecord.Inserted)
		h.Advance(ttl * 2 / 3)
		r.Seq = 1
		put(t, h.Store, r, ttl, noderecord.Advanced)
		h.Advance(ttl * 2 / 3)
		put(t, h.Store, r, ttl, noderecord.Duplicate)
		get(t, h.Store, r.Key()) // renewed by the update, 20 s ago
		next(t, w)
		next(t, w)
		h.Advance(ttl/3 + time.Millisecond)
	}
	ev := next(t, w)
	if ev.Kind != noderecord.EventDelete || ev.Key != r.Key() {
		t.Fatalf("after the lease lapsed the watch saw %v of %s, want a delete of %s", ev.Kind, ev.Key, r.Key())
	}
	if _, err := h.Store.Get(bounded(t), r.Key()); !errors.Is(err, noderecord.ErrNotFound) {
		t.Errorf("Get of a lapsed record = %v, want ErrNotFound", err)
	}
	snap := snapshot(t, h.Store, c)
	if len(snap.Records) != 1 || snap.Records[0].Node != "n2" {
		t.Errorf("Snapshot after the lapse lists %d records, want only n2", len(snap.Records))
	}
	// The process comes back: a new lease, from scratch.
	put(t, h.Store, r, time.Minute, noderecord.Inserted)
}

func testDefaultTTL(t *testing.T, h Harness) {
	r := record(cluster(t), "n1", "inc-a", 0)
	put(t, h.Store, r, 0, noderecord.Inserted)
	if h.Advance == nil {
		get(t, h.Store, r.Key())
		return
	}
	ttl := noderecord.DefaultTimings().LeaseTTL
	h.Advance(ttl - time.Millisecond)
	get(t, h.Store, r.Key())
	h.Advance(time.Millisecond)
	if _, err := h.Store.Get(bounded(t), r.Key()); !errors.Is(err, noderecord.ErrNotFound) {
		t.Errorf("Get once the default lease of %v lapsed = %v, want ErrNotFound", ttl, err)
	}
}

func testRemoval(t *testing.T, h Harness) {
	r := record(cluster(t), "n1", "inc-a", 0)
	res := put(t, h.Store, r, time.Minute, noderecord.Inserted)
	w := watch(t, h.Store, r.Cluster, res.Revision)
	removed, err := h.Store.Remove(bounded(t), r.Key(), "inc-a")
	if err != nil || !removed {
		t.Fatalf("Remove = %v, %v; want true, nil", removed, err)
	}
	if ev := next(t, w); ev.Kind != noderecord.EventDelete || ev.Key != r.Key() {
		t.Errorf("the watch saw %v of %s, want a delete of %s", ev.Kind, ev.Key, r.Key())
	}
	if _, err := h.Store.Get(bounded(t), r.Key()); !errors.Is(err, noderecord.ErrNotFound) {
		t.Errorf("Get after Remove = %v, want ErrNotFound", err)
	}
	if removed, err := h.Store.Remove(bounded(t), r.Key(), "inc-a"); err != nil || removed {
		t.Errorf("a second Remove = %v, %v; want false, nil", removed, err)
	}
	put(t, h.Store, r, time.Minute, noderecord.Inserted)
}

func testSnapshot(t *testing.T, h Harness) {
	c := cluster(t)
	if snap := snapshot(t, h.Store, c); len(snap.Records) != 0 || snap.Revision == "" {
		t.Fatalf("Snapshot of an empty cluster = %d records, revision %q; want none and a revision", len(snap.Records), snap.Revision)
	}
	client := record(c, "a-client", "inc-c", 0)
	client.Role = "client"
	var last noderecord.PutResult
	for _, r := range []noderecord.Record{record(c, "n2", "inc-a", 0), client, record(c, "n1", "inc-b", 0), record(c+"-other", "n1", "inc-a", 0)} {
		last = put(t, h.Store, r, time.Minute, noderecord.Inserted)
	}
	snap := snapshot(t, h.Store, c)
	var names []string
	for _, r := range snap.Records {
		names = append(names, r.Role+"/"+r.Node)
	}
	if got, want := strings.Join(names, " "), "client/a-client member/n1 member/n2"; got != want {
		t.Errorf("Snapshot lists %q, want %q: its cluster only, by role then node", got, want)
	}
	if snap.At.IsZero() {
		t.Error("Snapshot.At is zero, want the time of the read")
	}
	if snap.Revision != last.Revision {
		t.Errorf("Snapshot revision %q, want %q, the last completed write's", snap.Revision, last.Revision)
	}
	if again := snapshot(t, h.Store, c); again.Revision != snap.Revision {
		t.Errorf("a second snapshot without writes has revision %q, want %q", again.Revision, snap.Revision)
	}
	r := record(c, "n1", "inc-b", 1)
	put(t, h.Store, r, time.Minute, noderecord.Advanced)
	after := snapshot(t, h.Store, c)
	if after.Revision == snap.Revision {
		t.Errorf("a write left the snapshot revision at %q", snap.Revision)
	}
	for _, got := range after.Records {
		if got.Node == "n1" && got.Seq != 1 {
			t.Errorf("a snapshot after a completed put shows seq %d, want 1", got.Seq)
		}
	}
}

func testWatchResume(t *testing.T, h Harness) {
	c := cluster(t)
	start := snapshot(t, h.Store, c)
	a, b := record(c, "a", "inc-a", 0), record(c, "b", "inc-b", 0)
	put(t, h.Store, a, time.Minute, noderecord.Inserted)
	put(t, h.Store, b, time.Minute, noderecord.Inserted)

	w := watch(t, h.Store, c, start.Revision)
	first, second := next(t, w), next(t, w)
	if first.Kind != noderecord.EventPut || first.Key != a.Key() || second.Key != b.Key() {
		t.Fatalf("events %v %s, %v %s; want the puts of a then b", first.Kind, first.Key, second.Kind, second.Key)
	}
	if err := same(first.Record, a); err != nil {
		t.Errorf("the event carries another record:\n%v", err)
	}
	w.Close()

	resumed := watch(t, h.Store, c, first.Revision)
	if ev := next(t, resumed); ev.Key != b.Key() || ev.Revision != second.Revision {
		t.Errorf("resumed after a's event, the first event is of %s at %q; want b's at %q", ev.Key, ev.Revision, second.Revision)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if ev, err := resumed.Next(ctx); !errors.Is(err, noderecord.ErrTimeout) {
		t.Errorf("Next with nothing new = %v %v, want ErrTimeout when the context's deadline passes", ev, err)
	}

	now := watch(t, h.Store, c, "")
	b.Seq = 1
	put(t, h.Store, b, time.Minute, noderecord.Advanced)
	if ev := next(t, now); ev.Key != b.Key() || ev.Record.Seq != 1 {
		t.Errorf("a watch from now saw %s seq %d first, want b seq 1", ev.Key, ev.Record.Seq)
	}
}

func testWatchScope(t *testing.T, h Harness) {
	c := cluster(t)
	w := watch(t, h.Store, c, snapshot(t, h.Store, c).Revision)
	put(t, h.Store, record(c+"-other", "x", "inc", 0), time.Minute, noderecord.Inserted)
	put(t, h.Store, record(c, "mine", "inc", 0), time.Minute, noderecord.Inserted)
	if ev := next(t, w); ev.Key.Node != "mine" {
		t.Errorf("the watch of %s saw %s", c, ev.Key)
	}
}

func testWatchContext(t *testing.T, h Harness) {
	c := cluster(t)
	ctx, cancel := context.WithCancel(t.Context())
	w, err := h.Store.Watch(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cancel()
	if _, err := w.Next(bounded(t)); !errors.Is(err, noderecord.ErrClosed) {
		t.Errorf("Next after the watch's context ended = %v, want ErrClosed", err)
	}
	w2 := watch(t, h.Store, c, "")
	w2.Close()
	if _, err := w2.Next(bounded(t)); !errors.Is(err, noderecord.ErrClosed) {
		t.Errorf("Next after Close = %v, want ErrClosed", err)
	}
}

func testCompaction(t *testing.T, h Harness) {
	c := cluster(t)
	start := snapshot(t, h.Store, c)
	r := record(c, "n1", "inc-a", 0)
	for seq := range uint64(3) {
		r.Seq = seq
		put(t, h.Store, r, time.Minute, []noderecord.Decision{noderecord.Inserted, noderecord.Advanced}[min(seq, 1)])
	}
	if err := h.Compact(bounded(t)); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	w, err := h.Store.Watch(bounded(t), c, start.Revision)
	if err == nil {
		defer w.Close()
		_, err = w.Next(bounded(t))
	}
	if !errors.Is(err, noderecord.ErrCompacted) {
		t.Fatalf("a watch from a compacted revision = %v, want ErrCompacted", err)
	}
	// The caller relists, then watches from the snapshot.
	relistAndWatch(t, h, r)
}

// relistAndWatch relists r's cluster, which must hold r alone at its
// sequence, watches from the snapshot's revision and checks that the
// watch sees r's next update.
func relistAndWatch(t *testing.T, h Harness, r noderecord.Record) {
	t.Helper()
	snap := snapshot(t, h.Store, r.Cluster)
	if len(snap.Records) != 1 || snap.Records[0].Seq != r.Seq {
		t.Fatalf("the relist shows %+v, want %s at seq %d", snap.Records, r.Key(), r.Seq)
	}
	w := watch(t, h.Store, r.Cluster, snap.Revision)
	r.Seq++
	put(t, h.Store, r, time.Minute, noderecord.Advanced)
	if ev := next(t, w); ev.Record.Seq != r.Seq {
		t.Errorf("a watch from the relist saw seq %d, want %d", ev.Record.Seq, r.Seq)
	}
}

// failWithin bounds how long a watcher may take to report that its
// backend's watch failed: far less than wait, so that a watcher that
// hangs until its context ends fails the test as one.
const failWithin = 10 * time.Second

func testWatchFailure(t *testing.T, h Harness) {
	if h.BreakWatches == nil {
		t.Fatal("Harness.BreakWatches is nil: every backend must say how its watches fail")
	}
	c := cluster(t)
	r := record(c, "n1", "inc-a", 0)
	w := watch(t, h.Store, c, snapshot(t, h.Store, c).Revision)
	put(t, h.Store, r, time.Minute, noderecord.Inserted)
	if ev := next(t, w); ev.Key != r.Key() {
		t.Fatalf("the watch saw %s first, want the put of %s", ev.Key, r.Key())
	}
	h.BreakWatches(t)
	ended := func(when string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), failWithin)
		defer cancel()
		ev, err := w.Next(ctx)
		switch {
		case err == nil:
			t.Fatalf("Next %s returned the %v of %s seq %d, want an error: the backend's watch failed", when, ev.Kind, ev.Key, ev.Record.Seq)
		case errors.Is(err, noderecord.ErrTimeout), ctx.Err() != nil:
			t.Fatalf("Next %s waited for its context (%v), want the failure reported at once", when, err)
		case errors.Is(err, noderecord.ErrClosed):
			t.Fatalf("Next %s = %v, want ErrUnavailable or ErrCompacted: nobody closed the watch", when, err)
		case !errors.Is(err, noderecord.ErrUnavailable) && !errors.Is(err, noderecord.ErrCompacted):
			t.Fatalf("Next %s = %v, want ErrUnavailable or ErrCompacted", when, err)
		}
	}
	ended("once the backend's watch failed")
	// The watch stays ended, whatever the store does since.
	r.Seq = 1
	put(t, h.Store, r, time.Minute, noderecord.Advanced)
	ended("again, after a put")
	// The caller relists and watches again.
	relistAndWatch(t, h, r)
}

func testTimeouts(t *testing.T, h Harness) {
	c := cluster(t)
	r := record(c, "n1", "inc-a", 0)
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	_, errPut := h.Store.Put(ctx, r, time.Minute)
	_, errGet := h.Store.Get(ctx, r.Key())
	_, errRemove := h.Store.Remove(ctx, r.Key(), "inc-a")
	_, errSnap := h.Store.Snapshot(ctx, c)
	_, errWatch := h.Store.Watch(ctx, c, "")
	for op, err := range map[string]error{"Put": errPut, "Get": errGet, "Remove": errRemove, "Snapshot": errSnap, "Watch": errWatch} {
		if !errors.Is(err, noderecord.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s past its deadline = %v, want ErrTimeout wrapping context.DeadlineExceeded", op, err)
		}
	}
}

func testUnavailable(t *testing.T, h Harness) {
	s := h.Unavailable(t)
	defer s.Close()
	c := cluster(t)
	r := record(c, "n1", "inc-a", 0)
	const deadline = time.Second
	for _, op := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Put", func(ctx context.Context) error { _, err := s.Put(ctx, r, time.Minute); return err }},
		{"Get", func(ctx context.Context) error { _, err := s.Get(ctx, r.Key()); return err }},
		{"Remove", func(ctx context.Context) error { _, err := s.Remove(ctx, r.Key(), "inc-a"); return err }},
		{"Snapshot", func(ctx context.Context) error { _, err := s.Snapshot(ctx, c); return err }},
		{"Watch", func(ctx context.Context) error {
			w, err := s.Watch(ctx, c, "")
			if err != nil {
				return err
			}
			defer w.Close()
			_, err = w.Next(ctx)
			return err
		}},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		began := time.Now()
		err := op.call(ctx)
		cancel()
		if !errors.Is(err, noderecord.ErrUnavailable) && !errors.Is(err, noderecord.ErrTimeout) {
			t.Errorf("%s on an unavailable backend = %v, want ErrUnavailable or ErrTimeout", op.name, err)
		}
		if took := time.Since(began); took > deadline+5*time.Second {
			t.Errorf("%s on an unavailable backend took %v, past its %v deadline", op.name, took, deadline)
		}
	}
}

func testInvalidInput(t *testing.T, h Harness) {
	c := cluster(t)
	bad := record(c, "n1", "inc-a", 0)
	bad.Labels = map[string]string{strings.Repeat("k", noderecord.MaxLabelKeyBytes+1): "v"}
	if _, err := h.Store.Put(bounded(t), bad, time.Minute); !errors.Is(err, noderecord.ErrTooLarge) {
		t.Errorf("Put of an oversized label = %v, want ErrTooLarge", err)
	}
	if _, err := h.Store.Get(bounded(t), noderecord.Key{Cluster: c, Role: "member", Node: "a/b"}); !errors.Is(err, noderecord.ErrInvalidRecord) {
		t.Errorf("Get of a key with '/' = %v, want ErrInvalidRecord", err)
	}
	if _, err := h.Store.Snapshot(bounded(t), ""); !errors.Is(err, noderecord.ErrInvalidRecord) {
		t.Errorf("Snapshot of no cluster = %v, want ErrInvalidRecord", err)
	}
	w, err := h.Store.Watch(bounded(t), c, "not-a-revision")
	if err == nil {
		defer w.Close()
		_, err = w.Next(bounded(t))
	}
	if !errors.Is(err, noderecord.ErrInvalidRevision) {
		t.Errorf("Watch from a revision the store never issued = %v, want ErrInvalidRevision", err)
	}
	if _, err := h.Store.Get(bounded(t), noderecord.Key{Cluster: c, Role: "member", Node: "never"}); !errors.Is(err, noderecord.ErrNotFound) {
		t.Errorf("Get of a key never put = %v, want ErrNotFound", err)
	}
}

func testClosed(t *testing.T, h Harness) {
	c := cluster(t)
	r := record(c, "n1", "inc-a", 0)
	put(t, h.Store, r, time.Minute, noderecord.Inserted)
	w := watch(t, h.Store, c, "")
	if err := h.Store.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := h.Store.Put(bounded(t), r, time.Minute); !errors.Is(err, noderecord.ErrClosed) {
		t.Errorf("Put after Close = %v, want ErrClosed", err)
	}
	if _, err := h.Store.Snapshot(bounded(t), c); !errors.Is(err, noderecord.ErrClosed) {
		t.Errorf("Snapshot after Close = %v, want ErrClosed", err)
	}
	if _, err := w.Next(bounded(t)); !errors.Is(err, noderecord.ErrClosed) {
		t.Errorf("a watcher's Next after the store's Close = %v, want ErrClosed", err)
	}
	if err := h.Store.Close(); err != nil {
		t.Errorf("a second Close = %v, want nil", err)
	}
}
