package replicanode

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// wipe restarts m as a joining member with an empty store.
func (c *testCluster) wipe(m *member) {
	c.t.Helper()
	c.crash(m)
	c.mu.Lock()
	if c.badger {
		m.dir = filepath.Join(c.t.TempDir(), m.addr)
	} else {
		m.store = replicastore.NewMemory()
	}
	c.mu.Unlock()
	prev := c.configure
	c.configure = func(cfg *Config) {
		if prev != nil {
			prev(cfg)
		}
		cfg.Joining = true
	}
	c.start(m)
	c.configure = prev
}

func wholeRing(rs []ring.Range) bool { return slices.Equal(rs, []ring.Range{{}}) }

// newClusterWithWipedWitness starts members a, b and w (c.members[0], [1]
// and [2]) and has b write "acked" to k while a is cut off from b for
// good, so that only {b, w} acknowledge it; then w loses its store and
// rejoins. Unless w catches up before it counts, {a, w} is a quorum that
// lost the write.
func newClusterWithWipedWitness(t *testing.T, k replica.Key) *testCluster {
	t.Helper()
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	a, b, w := c.members[0], c.members[1], c.members[2]
	c.net.Partition(b.addr, a.addr)
	if err := b.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
		t.Fatal(err)
	}
	if err := b.node.Write(ctx, k, stateSlot, []byte("acked")); err != nil {
		t.Fatal(err)
	}
	c.wipe(w)
	return c
}

// A member that joins with an empty store does not count until it caught
// up from a quorum of the other replicas; then the write that only it
// and a member cut off from the next owner held is not lost. The owner
// of that write stays cut off from the next owner for good: healing the
// link would deliver its held traffic and repair the loss without any
// catch-up.
func TestAWipedMemberCountsOnlyAfterItCaughtUp(t *testing.T) {
	k := key("a")
	c := newClusterWithWipedWitness(t, k)
	ctx := bounded(t)
	a, b, w := c.members[0], c.members[1], c.members[2]
	if got := w.node.Receiving(); !wholeRing(got) {
		t.Fatalf("a joining member with an empty store receives %v, want the whole ring", got)
	}
	// With w not counting, {a, w} is no quorum: a cannot acquire over
	// b's head.
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if err := a.node.Acquire(short, k, c.ids(), replication.Majority); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("an acquisition that needed the wiped member returned %v, want ErrUnavailable", err)
	}
	if err := w.node.CatchUp(ctx, ring.Range{}, c.ids(a, b), 2); err != nil {
		t.Fatalf("catch-up from a and b: %v", err)
	}
	if got := w.node.Receiving(); len(got) != 0 {
		t.Fatalf("after catching up the member still receives %v", got)
	}
	// Now {a, w} is a quorum, and w holds what b acknowledged.
	c.net.Partition(b.addr, w.addr)
	if err := a.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
		t.Fatal(err)
	}
	if got, err := readState(ctx, a, k); err != nil || got != "acked" {
		t.Fatalf("the next owner read %q, %v; want the acknowledged write", got, err)
	}
}

// A wiped member restarted before its catch-up ended (a deploy, a crash)
// holds what it was sent while receiving, so its store is not empty; it
// must still receive, or {a, w} would be a quorum missing b's write.
func TestARestartBeforeTheCatchUpEndedStillReceives(t *testing.T) {
	k := key("a")
	c := newClusterWithWipedWitness(t, k)
	ctx := bounded(t)
	a, b, w := c.members[0], c.members[1], c.members[2]
	c.net.Partition(b.addr, w.addr)
	// a's attempt sends w a prepare: w stores a promise while receiving.
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if err := a.node.Acquire(short, k, c.ids(), replication.Majority); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("an acquisition that needed the wiped member returned %v, want ErrUnavailable", err)
	}
	c.crash(w)
	c.configure = func(cfg *Config) { cfg.Joining = true }
	c.start(w)
	c.configure = nil
	if got := w.node.Receiving(); !wholeRing(got) {
		t.Fatalf("a member restarted before its catch-up ended receives %v, want the whole ring", got)
	}
	short, cancel = context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if err := a.node.Acquire(short, k, c.ids(), replication.Majority); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("an acquisition counting the member that never caught up returned %v, want ErrUnavailable", err)
	}
	c.net.Heal(b.addr, w.addr)
	if err := w.node.CatchUp(ctx, ring.Range{}, c.ids(a, b), 2); err != nil {
		t.Fatalf("catch-up from a and b: %v", err)
	}
	c.net.Partition(b.addr, w.addr)
	if err := a.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
		t.Fatal(err)
	}
	if got, err := readState(ctx, a, k); err != nil || got != "acked" {
		t.Fatalf("the next owner read %q, %v; want the acknowledged write", got, err)
	}
}

// A hand-off's range added to a member receiving the whole ring leaves it
// receiving the whole ring, also after a restart.
func TestAHandOffRangeDoesNotNarrowWhatAMemberReceives(t *testing.T) {
	c := newCluster(t, 2, false)
	w := c.members[1]
	c.wipe(w)
	if err := w.node.SetReceiving(ring.Range{Start: 10, End: 20}); err != nil {
		t.Fatal(err)
	}
	// A catch-up call is answered after the loop took what was queued
	// before it: a cheap barrier for the SetReceiving above.
	if err := w.node.CatchUp(bounded(t), ring.Range{Start: 1, End: 2}, c.ids(c.members[0]), 1); err != nil {
		t.Fatal(err)
	}
	got := w.node.Receiving()
	if !slices.ContainsFunc(got, func(g ring.Range) bool { return g.Contains(15) }) || !slices.ContainsFunc(got, func(g ring.Range) bool { return g.Contains(1000) }) {
		t.Fatalf("after adding (10, 20] to the whole ring the member receives %v", got)
	}
	c.crash(w)
	c.start(w)
	if after := w.node.Receiving(); !slices.Equal(after, got) {
		t.Fatalf("after a restart the member receives %v, want %v", after, got)
	}
}

// A joining member whose store holds records (a restart) counts at once,
// and so does a member that is not joining.
func TestOnlyAJoiningMemberWithAnEmptyStoreStartsReceiving(t *testing.T) {
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	if got := c.members[0].node.Receiving(); len(got) != 0 {
		t.Fatalf("a bootstrapping member receives %v, want nothing", got)
	}
	if err := c.members[0].node.Acquire(ctx, key("a"), c.ids(), replication.All); err != nil {
		t.Fatal(err)
	}
	m := c.members[1]
	c.crash(m)
	c.configure = func(cfg *Config) { cfg.Joining = true }
	c.start(m)
	if got := m.node.Receiving(); len(got) != 0 {
		t.Fatalf("a joining member restarted with its records receives %v, want nothing", got)
	}
}

// A catch-up moves many keys in many small chunks and leaves every record
// on the new member, over MemNetwork and TCP.
func TestACatchUpCopiesEveryRecordInChunks(t *testing.T) {
	for _, network := range []string{"mem", "tcp"} {
		t.Run(network, func(t *testing.T) {
			eps := benchEndpoints(t, network)
			ctx := bounded(t)
			stores := make([]*replicastore.Memory, len(eps))
			nodes := make([]*Node, len(eps))
			for i, ep := range eps {
				stores[i] = replicastore.NewMemory()
				n, err := Open(ctx, Config{Endpoint: ep, Store: stores[i], Joining: i == 2, SyncChunk: 512, TickEvery: 20 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				defer n.Close(ctx)
				nodes[i] = n
			}
			ids := []ring.NodeID{eps[0].Self(), eps[1].Self(), eps[2].Self()}
			const keys = 60
			for i := range keys {
				k := key(fmt.Sprint(i))
				owner := nodes[i%2]
				if err := owner.Acquire(ctx, k, ids, replication.Majority); err != nil {
					t.Fatal(err)
				}
				if err := owner.Write(ctx, k, stateSlot, []byte(fmt.Sprintf("value-%d", i))); err != nil {
					t.Fatal(err)
				}
			}
			if err := nodes[2].CatchUp(ctx, ring.Range{Start: 1 << 62, End: 1 << 62}, ids[:2], 2); err != nil {
				t.Fatal(err)
			}
			for i := range keys {
				k := key(fmt.Sprint(i))
				r, ok, err := stores[2].Get(ctx, k, stateSlot)
				if err != nil || !ok || string(r.Value) != fmt.Sprintf("value-%d", i) {
					t.Fatalf("after the catch-up the new member holds %q, %v, %v for %v", r.Value, ok, err, k)
				}
				p, ok, err := stores[2].Get(ctx, k, replica.Slot{Kind: replica.KindPromise})
				if err != nil || !ok || p.Epoch.IsZero() {
					t.Fatalf("after the catch-up the new member holds no promise for %v", k)
				}
			}
			if got := nodes[2].Receiving(); len(got) != 0 {
				t.Fatalf("after the catch-up the member still receives %v", got)
			}
		})
	}
}

// A source that is itself still receiving the range cannot count; a
// quorum beyond the sources is refused.
func TestACatchUpNeedsCaughtUpSources(t *testing.T) {
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	w, r := c.members[2], c.members[1]
	c.wipe(w)
	if err := r.node.SetReceiving(ring.Range{Start: 10, End: 20}); err != nil {
		t.Fatal(err)
	}
	// SetReceiving is queued: the catch-up must not reach r before r's
	// loop took it.
	for len(r.node.Receiving()) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the source never started receiving")
		}
		runtime.Gosched()
	}
	err := w.node.CatchUp(ctx, ring.Range{}, c.ids(r), 1)
	if !errors.Is(err, ErrSourceReceiving) {
		t.Fatalf("a catch-up from a receiving source returned %v, want ErrSourceReceiving", err)
	}
	if !wholeRing(w.node.Receiving()) {
		t.Fatal("a failed catch-up stopped receiving")
	}
	if err := w.node.CatchUp(ctx, ring.Range{}, c.ids(r), 2); !errors.Is(err, ErrCatchUpQuorum) {
		t.Fatalf("a quorum of 2 out of one source returned %v, want ErrCatchUpQuorum", err)
	}
	if err := w.node.CatchUp(ctx, ring.Range{}, c.ids(r, c.members[0]), 0); !errors.Is(err, ErrCatchUpQuorum) {
		t.Fatalf("a quorum of 0 returned %v, want ErrCatchUpQuorum", err)
	}
	if err := w.node.CatchUp(ctx, ring.Range{}, c.ids(w, c.members[0]), 2); !errors.Is(err, ErrCatchUpSource) {
		t.Fatalf("a catch-up naming the node itself returned %v, want ErrCatchUpSource", err)
	}
	// A catch-up that runs out of time says so, not that a write may
	// have happened.
	c.isolate(w)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = w.node.CatchUp(short, ring.Range{}, c.ids(c.members[0]), 1)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "write") {
		t.Fatalf("a catch-up past its deadline returned %v, want ErrUnavailable and the deadline, without a word about writes", err)
	}
	c.heal(w)
	// A catch-up of part of the ring leaves the rest received.
	if err := w.node.CatchUp(ctx, ring.Range{Start: 100, End: 200}, c.ids(c.members[0]), 1); err != nil {
		t.Fatal(err)
	}
	got := w.node.Receiving()
	if len(got) == 0 || slices.ContainsFunc(got, func(g ring.Range) bool { return g.Contains(150) }) || !slices.ContainsFunc(got, func(g ring.Range) bool { return g.Contains(250) }) {
		t.Fatalf("after catching up on (100, 200] the member receives %v", got)
	}
}

// Two members that may both have lost their last writes (a and b: a
// wiped, b stopped uncleanly) catch up the whole ring from every other
// member at once. A catch-up that needs its sources caught up waits for
// good, each on the other; one from every member takes what each holds,
// and a gets the write that only b, still receiving, held. One from
// members that all receive the whole ring fails.
func TestMembersThatLostTheirLastWritesTogetherCatchUpFromEachOther(t *testing.T) {
	c := newCluster(t, 3, true)
	ctx := bounded(t)
	a, b, w := c.members[0], c.members[1], c.members[2]
	k := key("a")
	// Only a and b acknowledge the write: w is down meanwhile.
	c.crash(w)
	if err := b.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
		t.Fatal(err)
	}
	if err := b.node.Write(ctx, k, stateSlot, []byte("acked")); err != nil {
		t.Fatal(err)
	}
	c.start(w)
	c.wipe(a)
	// b stops uncleanly: it restarts from a copy of its store taken while
	// it ran, which says so.
	dirty := copyDir(t, b.dir)
	c.crash(b)
	b.dir = dirty
	c.start(b)
	if !wholeRing(b.node.Receiving()) {
		t.Fatalf("b restarted uncleanly receives %v, want the whole ring", b.node.Receiving())
	}
	if err := a.node.CatchUp(ctx, ring.Range{}, c.ids(b, w), 2); !errors.Is(err, ErrSourceReceiving) {
		t.Fatalf("a catch-up needing caught-up sources returned %v, want ErrSourceReceiving", err)
	}
	// From b alone, which receives the whole ring too, nothing is known
	// to be complete (a whole-cluster loss): no catch-up, the operator
	// decides.
	if err := a.node.CatchUpFromAll(ctx, ring.Range{}, c.ids(b)); !errors.Is(err, ErrSourceReceiving) {
		t.Fatalf("a catch-up from members that all receive the whole ring returned %v, want ErrSourceReceiving", err)
	}
	if !wholeRing(a.node.Receiving()) {
		t.Fatal("a failed catch-up stopped receiving")
	}
	errs := make(chan error, 2)
	go func() { errs <- a.node.CatchUpFromAll(ctx, ring.Range{}, c.ids(b, w)) }()
	go func() { errs <- b.node.CatchUpFromAll(ctx, ring.Range{}, c.ids(a, w)) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("a catch-up from every member: %v", err)
		}
	}
	for _, m := range []*member{a, b} {
		if got := m.node.Receiving(); len(got) != 0 {
			t.Fatalf("%s still receives %v after catching up", m.addr, got)
		}
	}
	// Without b, {a, w} is a quorum: a must hold what b held.
	c.crash(b)
	if err := w.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
		t.Fatal(err)
	}
	if got, err := readState(ctx, w, k); err != nil || got != "acked" {
		t.Fatalf("the next owner read %q, %v; want the write only b held", got, err)
	}
}

// A catch-up from every member does not take what a source still
// receiving at a hand-off holds, when that source waits on a member the
// catch-up does not read (one leaving, say): what the source would still
// get from it would be missed. It does when the source waits only on
// members the catch-up reads.
func TestACatchUpFromAllWaitsForASourceThatReceivesFromAMemberItDoesNotRead(t *testing.T) {
	c := newCluster(t, 4, false)
	ctx := bounded(t)
	x, y, s, l := c.members[0], c.members[1], c.members[2], c.members[3]
	g := ring.Range{Start: 1000, End: 2000}
	if err := s.node.SetReceiving(g); err != nil {
		t.Fatal(err)
	}
	for len(s.node.Receiving()) == 0 {
		if ctx.Err() != nil {
			t.Fatal("s never started receiving")
		}
		runtime.Gosched()
	}
	s.node.Awaiting("t", g, c.ids(l))
	if err := x.node.CatchUpFromAll(ctx, g, c.ids(y, s)); !errors.Is(err, ErrSourceReceiving) {
		t.Fatalf("a catch-up from every member when a source waits on one it does not read: %v, want ErrSourceReceiving", err)
	}
	s.node.Awaiting("t", g, c.ids(y))
	if err := x.node.CatchUpFromAll(ctx, g, c.ids(y, s)); err != nil {
		t.Fatalf("a catch-up from every member when a source waits only on one it reads: %v", err)
	}
}

// Two members that each receive a range and wait for it on the other
// alone (the rest of their previous sets gone) copy it from each other
// instead of waiting for good: each answers the other's fence and copy
// with what it holds. One that waits on a third member too answers as
// not counting, unless the requester reads that member as well.
func TestMembersThatWaitForARangeOnEachOtherAloneCopyFromEachOther(t *testing.T) {
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	r, s, o := c.members[0], c.members[1], c.members[2]
	k := key("a")
	// Only s holds the write: a set of one.
	if err := s.node.Acquire(ctx, k, c.ids(s), replication.Majority); err != nil {
		t.Fatal(err)
	}
	if err := s.node.Write(ctx, k, stateSlot, []byte("acked")); err != nil {
		t.Fatal(err)
	}
	tok := k.Token()
	g := ring.Range{Start: tok - 10, End: tok + 10}
	for _, m := range []*member{r, s} {
		if err := m.node.SetReceiving(g); err != nil {
			t.Fatal(err)
		}
		for len(m.node.Receiving()) == 0 {
			if ctx.Err() != nil {
				t.Fatal("never started receiving")
			}
			runtime.Gosched()
		}
	}
	s.node.Awaiting("t", g, c.ids(r, o))
	if err := r.node.CopyFenced(ctx, g, c.ids(s), 1, nil); !errors.Is(err, ErrSourceReceiving) {
		t.Fatalf("a copy from a source that waits on a third member too: %v, want ErrSourceReceiving", err)
	}
	r.node.Awaiting("t", g, c.ids(s))
	s.node.Awaiting("t", g, c.ids(r))
	errs := make(chan error, 2)
	go func() { errs <- r.node.CopyFenced(ctx, g, c.ids(s), 1, nil) }()
	go func() { errs <- s.node.CopyFenced(ctx, g, c.ids(r), 1, nil) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("copies of members waiting on each other alone: %v", err)
		}
	}
	got, ok, err := r.store.Get(ctx, k, stateSlot)
	if err != nil || !ok || string(got.Value) != "acked" {
		t.Fatalf("r holds %q (%v, %v) after copying from s, want the write s held", got.Value, ok, err)
	}
	// Waiting on each other and on a third, o, that each reads too: the
	// same, when each copy needs all its sources (and says so).
	g2 := ring.Range{Start: tok + 100, End: tok + 200}
	for _, m := range []*member{r, s} {
		if err := m.node.SetReceiving(g2); err != nil {
			t.Fatal(err)
		}
	}
	for len(r.node.Receiving()) < 2 || len(s.node.Receiving()) < 2 {
		if ctx.Err() != nil {
			t.Fatal("never started receiving the second range")
		}
		runtime.Gosched()
	}
	r.node.Awaiting("t", g2, c.ids(s, o))
	s.node.Awaiting("t", g2, c.ids(r, o))
	go func() { errs <- r.node.CopyFenced(ctx, g2, c.ids(s, o), 2, nil) }()
	go func() { errs <- s.node.CopyFenced(ctx, g2, c.ids(r, o), 2, nil) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("copies of members waiting on each other and a source both read: %v", err)
		}
	}
}

// The catch-up's byte rate is bounded: with SyncRate R, B bytes take at
// least (B - one chunk) / R.
func TestACatchUpKeepsToItsRate(t *testing.T) {
	const (
		chunkSize = 2 << 10
		rate      = 64 << 10
		keys      = 48
		valueSize = 1 << 10
	)
	c := newCluster(t, 2, false)
	c.configure = func(cfg *Config) { cfg.SyncChunk, cfg.SyncRate = chunkSize, rate }
	ctx := bounded(t)
	src, w := c.members[0], c.members[1]
	c.crash(w)
	for i := range keys {
		k := key(fmt.Sprint(i))
		if err := src.node.Acquire(ctx, k, c.ids(src), replication.One); err != nil {
			t.Fatal(err)
		}
		if err := src.node.Write(ctx, k, stateSlot, make([]byte, valueSize)); err != nil {
			t.Fatal(err)
		}
	}
	c.wipe(w)
	start := time.Now()
	if err := w.node.CatchUp(ctx, ring.Range{}, c.ids(src), 1); err != nil {
		t.Fatal(err)
	}
	least := time.Duration(float64(keys*valueSize-chunkSize) / rate * float64(time.Second))
	if took := time.Since(start); took < least {
		t.Fatalf("%d bytes at %d B/s caught up in %v, want at least %v", keys*valueSize, rate, took, least)
	}
}

// copyDir copies a store's directory while its process runs: what a
// power loss would leave, at best, of a store without Sync.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	if err := replicastore.CopyAfterPowerLoss(from, to); err != nil {
		t.Fatal(err)
	}
	return to
}

// A node whose Badger store was not closed cleanly while it ran without
// Sync, and lost power since, may have lost acknowledged writes: it
// starts receiving the whole ring. With Sync, or after a clean Close, it
// counts at once.
func TestAnUncleanStopWithoutSyncMakesTheNodeCatchUp(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sync      bool
		clean     bool
		receiving bool
	}{
		{"power loss without Sync", false, false, true},
		{"power loss with Sync", true, false, false},
		{"clean close without Sync", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			net := transport.NewMemNetwork()
			ctx := bounded(t)
			open := func(inc uint64, dir string) (*Node, transport.Endpoint) {
				ep, err := net.Join(ring.NodeID{Addr: "a", Incarnation: inc})
				if err != nil {
					t.Fatal(err)
				}
				n, err := Open(ctx, Config{Endpoint: ep, Replication: replication.Config{DataDir: dir, Sync: tc.sync}})
				if err != nil {
					t.Fatal(err)
				}
				return n, ep
			}
			dir := filepath.Join(t.TempDir(), "a")
			n, ep := open(1, dir)
			k := key("a")
			if err := n.Acquire(ctx, k, []ring.NodeID{ep.Self()}, replication.Majority); err != nil {
				t.Fatal(err)
			}
			if err := n.Write(ctx, k, stateSlot, []byte("v")); err != nil {
				t.Fatal(err)
			}
			reopen := dir
			if !tc.clean {
				reopen = copyDir(t, dir)
			}
			if err := n.Close(ctx); err != nil {
				t.Fatal(err)
			}
			_ = ep.Close()
			n, ep = open(2, reopen)
			defer ep.Close()
			defer n.Close(ctx)
			if got := n.Receiving(); wholeRing(got) != tc.receiving {
				t.Fatalf("after a %s the node receives %v; want receiving the whole ring: %v", tc.name, got, tc.receiving)
			}
		})
	}
}

// A node restarted after an unclean stop and then stopped cleanly before
// it caught up (a deploy) still receives the whole ring at the next
// start: the clean stop must not hide the earlier loss.
func TestACleanStopBeforeTheCatchUpKeepsTheNodeReceiving(t *testing.T) {
	net := transport.NewMemNetwork()
	ctx := bounded(t)
	open := func(inc uint64, dir string) (*Node, transport.Endpoint) {
		ep, err := net.Join(ring.NodeID{Addr: "a", Incarnation: inc})
		if err != nil {
			t.Fatal(err)
		}
		n, err := Open(ctx, Config{Endpoint: ep, Replication: replication.Config{DataDir: dir}})
		if err != nil {
			t.Fatal(err)
		}
		return n, ep
	}
	dir := filepath.Join(t.TempDir(), "a")
	n, ep := open(1, dir)
	k := key("a")
	if err := n.Acquire(ctx, k, []ring.NodeID{ep.Self()}, replication.Majority); err != nil {
		t.Fatal(err)
	}
	if err := n.Write(ctx, k, stateSlot, []byte("v")); err != nil {
		t.Fatal(err)
	}
	crashed := copyDir(t, dir)
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_ = ep.Close()
	n, ep = open(2, crashed)
	if got := n.Receiving(); !wholeRing(got) {
		t.Fatalf("after the unclean stop the node receives %v, want the whole ring", got)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_ = ep.Close()
	n, ep = open(3, crashed)
	defer ep.Close()
	defer n.Close(ctx)
	if got := n.Receiving(); !wholeRing(got) {
		t.Fatalf("after a clean stop of a run that never caught up the node receives %v, want the whole ring", got)
	}
}

// A chunk that holds almost SyncChunk bytes and then reaches a key with a
// value near MaxValue closes before that key: together they would exceed
// the transport's message limit, the chunk would never be posted, and
// the catch-up would ask again forever.
func TestACatchUpChunkStaysUnderTheTransportLimit(t *testing.T) {
	eps := benchEndpoints(t, "tcp")
	ctx := bounded(t)
	ks := []replica.Key{key("0"), key("1")}
	if ks[0].Token() > ks[1].Token() {
		ks[0], ks[1] = ks[1], ks[0]
	}
	src := replicastore.NewMemory()
	e := replica.Epoch{Term: 1, Node: eps[0].Self()}
	small := replica.Record{Key: ks[0], Kind: replica.KindState, Epoch: e, Version: 1, Value: make([]byte, DefaultSyncChunk-1000)}
	big := replica.Record{Key: ks[1], Kind: replica.KindState, Epoch: e, Version: 1, Value: make([]byte, DefaultMaxValue-100)}
	if err := src.Put(ctx, small, big); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Config{Endpoint: eps[0], Store: src, TickEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	dst := replicastore.NewMemory()
	w, err := Open(ctx, Config{Endpoint: eps[1], Store: dst, Joining: true, TickEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := w.CatchUp(cctx, ring.Range{}, []ring.NodeID{eps[0].Self()}, 1); err != nil {
		t.Fatalf("the catch-up of two records each within the limits did not complete: %v", err)
	}
	for _, want := range []replica.Record{small, big} {
		if got, ok, err := dst.Get(ctx, want.Key, want.Slot()); err != nil || !ok || len(got.Value) != len(want.Value) {
			t.Fatalf("after the catch-up the member holds %d bytes for %v (%v, %v), want %d", len(got.Value), want.Key, ok, err, len(want.Value))
		}
	}
}
