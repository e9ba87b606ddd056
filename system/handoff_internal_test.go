package system

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/replicanode"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// handoffRig drives states.changed directly: one node on an endpoint that
// reaches nobody (every source it asks stays silent, as a dead one does),
// and a ring and a set of gone members the test sets.
type handoffRig struct {
	s    *states
	node *replicanode.Node
	mu   sync.Mutex
	cur  *ring.Ring
	gone map[ring.NodeID]bool
}

func newHandoffRig(t *testing.T, n int, r *ring.Ring, self ring.NodeID) *handoffRig {
	t.Helper()
	ep := &localEndpoint{self: self}
	node, err := replicanode.Open(context.Background(), replicanode.Config{Endpoint: ep, Store: replicastore.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	g := &handoffRig{cur: r, gone: map[ring.NodeID]bool{}, node: node}
	g.s = &states{
		log:    slog.New(slog.DiscardHandler),
		node:   node,
		stored: []storedType{{name: "t", n: n, level: replication.Majority}},
	}
	g.s.ring = func(string) *ring.Ring { g.mu.Lock(); defer g.mu.Unlock(); return g.cur }
	g.s.gone = func(id ring.NodeID) bool { g.mu.Lock(); defer g.mu.Unlock(); return g.gone[id] }
	// Members marked gone are removed from the view: they never answer.
	g.s.status = func(id ring.NodeID) (cluster.Status, bool) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return cluster.StatusAlive, !g.gone[id]
	}
	g.s.alive = func() []ring.NodeID { return nil }
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		g.s.detach(ctx)
	})
	return g
}

// change moves the rig's ring to next (gone marks members removed first)
// and runs the hand-off of that change, as refresh does.
func (g *handoffRig) change(next *ring.Ring, gone ...ring.NodeID) {
	before := g.s.rings()
	g.mu.Lock()
	g.cur = next
	for _, id := range gone {
		g.gone[id] = true
	}
	g.mu.Unlock()
	g.s.changed(before)
}

func nid(i int) ring.NodeID {
	return ring.NodeID{Addr: fmt.Sprintf("10.0.0.%d:7400", i), Incarnation: 1}
}

// When every previous replica of a range is removed, the hand-off ends
// (docs/replication.md, Hand-off, step 3), also when they went away while
// an attempt was waiting on them: the attempt under way is stopped, or a
// source that never answers would hold it, and every range behind it
// waiting for a slot, for ever.
func TestAHandOffEndsWhenItsSourcesAreRemovedDuringAnAttempt(t *testing.T) {
	a, b, self := nid(1), nid(2), ring.NodeID{}
	r0 := ring.New([]ring.NodeID{a, b})
	self = nid(100)
	g := newHandoffRig(t, 1, r0, self)
	r1 := r0.With(self)
	g.change(r1) // self joins: it gains ranges whose only copy is on a or b
	for deadline := time.Now().Add(5 * time.Second); len(g.node.Receiving()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("a member that joined receives nothing")
		}
		time.Sleep(time.Millisecond) // poll: SetReceiving is queued
	}
	// a and b are removed while the catch-ups wait on them.
	h := g.s.handoffsOf(g.node)
	for deadline := time.Now().Add(5 * time.Second); len(h.slots) < cap(h.slots); {
		if time.Now().After(deadline) {
			t.Fatal("the catch-ups did not start")
		}
		time.Sleep(time.Millisecond) // poll: attempts hold every slot
	}
	g.change(r1, a, b)
	deadline := time.Now().Add(5 * time.Second)
	for len(g.node.Receiving()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := g.node.Receiving(); len(got) > 0 {
		h.mu.Lock()
		jobs := len(h.jobs)
		h.mu.Unlock()
		t.Fatalf("5 s after every source died, the member still receives %d ranges (%d hand-off jobs left): "+
			"the attempts under way still wait on the dead sources", len(got), jobs)
	}
}

// A range gained at one change whose catch-up the next change ended
// (this member no longer replicates it) must not stay receiving with no
// catch-up left to end it: Stats.Receiving would never return to 0, the
// member would refuse as a catch-up source every range overlapping it
// (for every type), and its next start would catch the whole ring up
// from every member alive.
func TestARangeWhoseCatchUpAChangeEndedDoesNotStayReceiving(t *testing.T) {
	const n = 3
	self := nid(100)
	base := []ring.NodeID{nid(1), nid(2), nid(3), nid(4)}
	r0 := ring.New(base)
	r1 := r0.With(self)
	seconds := map[string]*ring.Ring{}
	for _, m := range base {
		seconds["leave of "+m.Addr] = r1.Without(m)
	}
	for i := 10; i < 14; i++ {
		seconds["join of "+nid(i).Addr] = r1.With(nid(i))
	}
	stuck := 0
	for what, r2 := range seconds {
		g := newHandoffRig(t, n, r0, self)
		g.change(r1)
		g.change(r2) // before the catch-ups ended
		h := g.s.handoffsOf(g.node)
		h.mu.Lock()
		var jobs []ring.Range
		for k := range h.jobs {
			jobs = append(jobs, k.rng)
		}
		h.mu.Unlock()
		recv := g.node.Receiving()
		orphan := 0
		for _, tok := range boundaries() {
			if slices.ContainsFunc(recv, func(x ring.Range) bool { return x.Contains(tok) }) &&
				!slices.ContainsFunc(jobs, func(x ring.Range) bool { return x.Contains(tok) }) {
				orphan++
			}
		}
		if orphan > 0 {
			stuck++
			t.Errorf("after this member's join and a %s before the catch-ups ended, %d of %d sampled tokens are receiving "+
				"with no catch-up left to end them", what, orphan, len(boundaries()))
		}
	}
	t.Logf("%d of %d second changes leave ranges receiving for ever", stuck, len(seconds))
}

// A catch-up under way whose range this member replicates only in part
// after the next change goes on for that part only: its copy fences its
// whole range at the sources, and fencing keys whose sets no longer hold
// this member makes their owners step down for nothing. The parts it no
// longer replicates stop receiving.
func TestAHandOffJobNarrowsToWhatItsMemberStillReplicates(t *testing.T) {
	const n = 3
	self := nid(100)
	base := []ring.NodeID{nid(1), nid(2), nid(3), nid(4)}
	r0 := ring.New(base)
	r1 := r0.With(self)
	narrowed := 0
	for i := 10; i < 14; i++ {
		r2 := r1.With(nid(i))
		g := newHandoffRig(t, n, r0, self)
		g.change(r1)
		h := g.s.handoffsOf(g.node)
		h.mu.Lock()
		before := len(h.jobs)
		h.mu.Unlock()
		g.change(r2) // before the catch-ups ended: sources never answer
		h.mu.Lock()
		var jobs []ring.Range
		for k := range h.jobs {
			jobs = append(jobs, k.rng)
		}
		h.mu.Unlock()
		if len(jobs) != before {
			narrowed++
		}
		var replicas []ring.NodeID
		for _, tok := range boundaries() {
			if !slices.ContainsFunc(jobs, func(x ring.Range) bool { return x.Contains(tok) }) {
				continue
			}
			replicas = r2.AppendReplicas(replicas[:0], tok, n)
			if !slices.Contains(replicas, self) {
				t.Fatalf("after the join of %v, a catch-up still covers token %d, whose replicas %v do not hold this member", nid(i), tok, replicas)
			}
		}
		recv := g.node.Receiving()
		for deadline := time.Now().Add(5 * time.Second); ; {
			stale := slices.ContainsFunc(boundaries(), func(tok ring.Token) bool {
				return slices.ContainsFunc(recv, func(x ring.Range) bool { return x.Contains(tok) }) &&
					!slices.ContainsFunc(jobs, func(x ring.Range) bool { return x.Contains(tok) })
			})
			if !stale {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the join of %v, ranges this member no longer replicates still receive", nid(i))
			}
			time.Sleep(time.Millisecond) // poll: EndReceiving is queued
			recv = g.node.Receiving()
		}
	}
	if narrowed == 0 {
		t.Fatal("no second join narrowed a catch-up: the test exercises nothing")
	}
}

// boundaries returns tokens spread over the ring (fixed, so that runs
// agree), enough to hit every segment of a few rings of 128 virtual nodes
// a member.
func boundaries() []ring.Token {
	rnd := rand.New(rand.NewPCG(1, 2))
	toks := make([]ring.Token, 5000)
	for i := range toks {
		toks[i] = ring.Token(rnd.Uint64())
	}
	return toks
}

// A hand-off names, for its fences, the members of its range's previous
// set that the new ring no longer holds: the one removed, for every range
// a removal gives this member, and none for a join's ranges (whose cause
// is the copier's own entry).
func TestAHandOffNamesTheMembersWhoseDepartureGaveItTheRange(t *testing.T) {
	const n = 3
	self := nid(100)
	base := []ring.NodeID{nid(1), nid(2), nid(3), nid(4), nid(5)}
	jobsOf := func(g *handoffRig) []*rangeJob {
		h := g.s.handoffsOf(g.node)
		h.mu.Lock()
		defer h.mu.Unlock()
		var out []*rangeJob
		for _, j := range h.jobs {
			out = append(out, j)
		}
		return out
	}
	joined := newHandoffRig(t, n, ring.New(base), self)
	joined.change(ring.New(base).With(self))
	jobs := jobsOf(joined)
	if len(jobs) == 0 {
		t.Fatal("a join gave this member no range to receive")
	}
	for _, j := range jobs {
		if len(j.departed) != 0 {
			t.Fatalf("a join's range %v names departures %v", j.rng, j.departed)
		}
	}
	r := ring.New(append(slices.Clone(base), self))
	removed := newHandoffRig(t, n, r, self)
	removed.change(r.Without(nid(4)), nid(4))
	jobs = jobsOf(removed)
	if len(jobs) == 0 {
		t.Fatal("a removal gave this member no range to receive")
	}
	for _, j := range jobs {
		if !slices.Equal(j.departed, []ring.NodeID{nid(4)}) {
			t.Fatalf("a range %v the removal of %v gave names departures %v (previous set %v)", j.rng, nid(4), j.departed, j.prev)
		}
	}
}
