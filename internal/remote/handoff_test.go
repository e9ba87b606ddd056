package remote

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
)

// seq records the numbers it is told, in order; a seqGate message holds
// its handler until the gate closes (sent locally only: a channel does
// not cross nodes).
type seqMsg interface{ seqMsg() }

type seqAdd struct{ N int }

type seqGate struct{ gate chan struct{} }

type seqList struct {
	actor.Reply[seqMsg, []int]
}

func (seqAdd) seqMsg()  {}
func (seqGate) seqMsg() {}
func (seqList) seqMsg() {}

var seq = actor.Define("seq", func(c *actor.Context[[]int, seqMsg], m seqMsg) error {
	switch m := m.(type) {
	case seqAdd:
		c.SetState(append(slices.Clone(c.State()), m.N))
	case seqGate:
		<-m.gate
	case seqList:
		return actor.Respond(c, m, c.State())
	}
	return nil
}).WithMessages(seqAdd{}, seqList{})

// activations records, across nodes, the order of seq activations
// starting and ending for one key.
type activations struct {
	mu  sync.Mutex
	log []string
}

func (a *activations) watch(n *testNode, key string) {
	f := func(e host.Event) {
		if e.Type != "seq" || e.Key != key {
			return
		}
		switch e.Kind {
		case host.ActivationStarted:
			a.add(n.id.Addr + " started")
		case host.ActivationEnded:
			a.add(n.id.Addr + " ended")
		}
	}
	n.observe.Store(&f)
}

func (a *activations) add(s string) {
	a.mu.Lock()
	a.log = append(a.log, s)
	a.mu.Unlock()
}

func (a *activations) get() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.log)
}

func (r *Router) held() int { return int(r.holds0.Load()) }

func TestKeyMovedWhileBusyRunsOnTheNewOwnerOnlyAfterTheOldOneDrained(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1", "c:1")
	a, b, c := ns[0], ns[1], ns[2]
	key := keyWhere(t, func(k string) bool { return seqOwnerIn(k, a, b) == a.id && seqOwnerIn(k, a, b, c) == c.id })
	var acts activations
	acts.watch(a, key)
	acts.watch(c, key)
	for _, n := range ns {
		n.setView(a, b)
		// From here on: the first views (no other member before) would
		// hold a's own keys until b answered, and a's gate cannot be
		// encoded for the router.
		n.r.cfg.Handoff = 10 * time.Second
	}
	// a runs the key: one handler in flight, two messages queued.
	gate := make(chan struct{})
	for _, m := range []seqMsg{seqGate{gate}, seqAdd{1}, seqAdd{2}} {
		if err := seq.Ref(a, key).Tell(ctxT(t), m); err != nil {
			t.Fatal(err)
		}
	}
	// c joins: the key is c's now.
	for _, n := range ns {
		n.setView(a, b, c)
		n.r.MoveOut()
	}
	// From b, and from c itself: both held on c while a drains.
	if err := seq.Ref(b, key).Tell(ctxT(t), seqAdd{3}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "c to hold the key", func() bool { return c.r.held() == 1 })
	if err := seq.Ref(c, key).Tell(ctxT(t), seqAdd{4}); err != nil {
		t.Fatal(err)
	}
	answered := make(chan []int, 1)
	go func() {
		got, err := actor.Ask(ctxT(t), seq.Ref(b, key), seqList{})
		if err != nil {
			t.Error(err)
		}
		answered <- got
	}()
	if k := c.h.Kind("seq").(host.Mover); k.Active(key) {
		t.Fatal("expected c not to activate the key while a still runs it")
	}
	select {
	case got := <-answered:
		t.Fatalf("expected the ask to wait for the hand-off, got %v", got)
	default:
	}
	close(gate)
	select {
	case got := <-answered:
		if !slices.Equal(got, []int{3, 4}) {
			t.Fatalf("expected c to run the key after the hand-off with the messages it held, in order: [3 4], got %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for the held ask to be answered after a drained the key")
	}
	pollUntil(t, "the hand-off to complete", func() bool { return c.r.held() == 0 })
	pollUntil(t, "three activation events", func() bool { return len(acts.get()) >= 3 })
	if log := acts.get(); !slices.Equal(log, []string{"a:1 started", "a:1 ended", "c:1 started"}) {
		t.Fatalf("expected one activation at a time, a's ending before c's start; got %v", log)
	}
	// Handed over: later messages go straight in.
	if err := seq.Ref(b, key).Tell(ctxT(t), seqAdd{5}); err != nil {
		t.Fatal(err)
	}
	got, err := actor.Ask(ctxT(t), seq.Ref(b, key), seqList{}) // from b: after its tell
	if err != nil || !slices.Equal(got, []int{3, 4, 5}) {
		t.Fatalf("expected [3 4 5] after the hand-off, got %v, %v", got, err)
	}
	if n := c.r.held(); n != 0 {
		t.Fatalf("expected nothing held once handed over, %d keys held", n)
	}
}

func TestHandoffStopsWaitingWhenThePreviousOwnerDies(t *testing.T) {
	_, ns, _, _, _ := silentLinkNodes(t) // a and b cannot talk
	a, b, c := ns[0], ns[1], ns[2]
	for _, n := range ns {
		n.r.cfg.Handoff = time.Minute
	}
	// A key on b in {b, c} that a takes in {a, b, c}: a cannot reach b.
	key := keyWhere(t, func(k string) bool { return seqOwnerIn(k, b, c) == b.id && seqOwnerIn(k, a, b, c) == a.id })
	for _, n := range ns {
		n.setView(b, c)
	}
	a.setView(a, b, c)
	c.setView(a, b, c)
	if err := seq.Ref(c, key).Tell(ctxT(t), seqAdd{7}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "a to hold the key for b", func() bool { return a.r.held() == 1 })
	// b is declared dead: nothing to wait for.
	a.setViewStatus(map[*testNode]bool{a: true, b: false, c: true})
	pollUntil(t, "a to let the key go", func() bool { return a.r.held() == 0 })
	got, err := actor.Ask(ctxT(t), seq.Ref(a, key), seqList{})
	if err != nil || !slices.Equal(got, []int{7}) {
		t.Fatalf("expected the held tell served on a: [7], got %v, %v", got, err)
	}
}

func TestHeldAskWithdrawnByItsAskerIsDropped(t *testing.T) {
	_, ns, _, _, _ := silentLinkNodes(t)
	a, b, c := ns[0], ns[1], ns[2]
	for _, n := range ns {
		n.r.cfg.Handoff = time.Minute
	}
	key := keyWhere(t, func(k string) bool { return seqOwnerIn(k, b, c) == b.id && seqOwnerIn(k, a, b, c) == a.id })
	for _, n := range ns {
		n.setView(a, b, c)
	}
	a.r.handoff.Store(&handoff{prev: newView(a.id, true, viewOf(b, c))})
	done := make(chan error, 1)
	ctx, cancel := contextWithCancel(t)
	go func() {
		_, err := actor.Ask(ctx, seq.Ref(c, key), seqList{})
		done <- err
	}()
	pollUntil(t, "a to hold the ask", func() bool { return a.r.heldItems() == 1 })
	cancel()
	<-done
	pollUntil(t, "a to drop the withdrawn ask", func() bool { return a.r.heldItems() == 0 })
}

// viewOf lists members alive, hosting counter and seq.
func viewOf(members ...*testNode) []cluster.Member {
	var ms []cluster.Member
	for _, m := range members {
		ms = append(ms, cluster.Member{ID: m.id, Status: cluster.StatusAlive, ActorTypes: []string{"counter", "seq"}})
	}
	return ms
}

// setViewStatus gives n a view of the members, alive or dead.
func (n *testNode) setViewStatus(alive map[*testNode]bool) {
	var ms []cluster.Member
	for m, up := range alive {
		st := cluster.StatusAlive
		if !up {
			st = cluster.StatusDead
		}
		ms = append(ms, cluster.Member{ID: m.id, Status: st, ActorTypes: []string{"counter", "seq"}})
	}
	slices.SortFunc(ms, func(x, y cluster.Member) int { return strings.Compare(x.ID.Addr, y.ID.Addr) })
	n.r.Update(n.id, true, ms)
}

func (r *Router) heldItems() int {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	n := 0
	for _, h := range r.holds {
		n += len(h.items)
	}
	return n
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctxT(t))
}

// seqOwnerIn returns the owner of seq's key in a ring of the members.
func seqOwnerIn(key string, members ...*testNode) ring.NodeID {
	var rm []ring.NodeID
	for _, m := range members {
		rm = append(rm, m.id)
	}
	o, _ := ring.New(rm).Owner(ring.KeyToken("seq", key), len(rm), nil)
	return o
}

func TestJoiningMemberWithAPartialViewStillDrainsFromTheOwnerItDidNotSee(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1", "c:1")
	a, b, c := ns[0], ns[1], ns[2]
	// A key b ran before c joined, that c owns in every view it has while
	// it learns the members one by one (first only a).
	key := keyWhere(t, func(k string) bool {
		return seqOwnerIn(k, a, b) == b.id && seqOwnerIn(k, a, c) == c.id && seqOwnerIn(k, a, b, c) == c.id
	})
	for _, n := range ns {
		n.r.cfg.Handoff = 10 * time.Second
	}
	a.setView(a, b, c)
	b.setView(a, b, c)
	c.setView(c)
	c.setView(a, c)
	c.setView(a, b, c) // its previous view placed the key on itself
	if err := seq.Ref(a, key).Tell(ctxT(t), seqAdd{1}); err != nil {
		t.Fatal(err)
	}
	got, err := actor.Ask(ctxT(t), seq.Ref(a, key), seqList{})
	if err != nil || !slices.Equal(got, []int{1}) {
		t.Fatalf("expected [1] on c, got %v, %v", got, err)
	}
	if n := c.r.drainsAsked(); n != 1 {
		t.Fatalf("expected c to drain the key from b once (b ran it before the join), asked %d times", n)
	}
}

func (r *Router) drainsAsked() int {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.drainsN
}

// The hand-off window closes Config.Handoff after the change by itself:
// messages checked meanwhile read no clock to find out.
func TestHandoffWindowClosesAfterConfigHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := ring.NodeID{Addr: "a:1", Incarnation: 1}, ring.NodeID{Addr: "b:1", Incarnation: 1}
		ep, err := transport.NewMemNetwork().Join(a)
		if err != nil {
			t.Fatal(err)
		}
		defer ep.Close()
		r := New(Config{Endpoint: ep, Handoff: time.Second})
		defer r.Close()
		alone := newView(a, true, []cluster.Member{{ID: a, Status: cluster.StatusAlive}})
		both := newView(a, true, []cluster.Member{{ID: a, Status: cluster.StatusAlive}, {ID: b, Status: cluster.StatusAlive}})
		r.noteChange(alone, both)
		time.Sleep(time.Second - time.Millisecond)
		synctest.Wait()
		if r.handoff.Load() == nil {
			t.Fatal("expected the window open just before Config.Handoff")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if r.handoff.Load() != nil {
			t.Fatal("expected the window closed at Config.Handoff")
		}
	})
}

// A key an inbox worker found free (here: handed over already) is not
// checked again for its next tells, until a change of view could make it
// wait again: then its next tell is held.
func TestKeyFoundFreeIsCheckedAgainAfterAChange(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1")
	a, b := ns[0], ns[1]
	for _, n := range ns {
		n.r.cfg.Handoff = time.Minute
		n.setView(a, b)
	}
	key := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == a.id })
	a.r.handoff.Store(&handoff{prev: newView(a.id, true, viewOf(b))}) // b ran every key before
	a.r.hmu.Lock()
	a.r.confirmed[holdID("counter", key)] = struct{}{}
	a.r.hmu.Unlock()
	e := &envelope{kind: kindTell, typ: "counter", key: key, token: a.r.Token("counter", key), name: "none"}
	k := a.r.kind("counter")
	var free freeKey
	for i := range 2 {
		if a.r.holdIfNeeded(b.id, k, e, &free) {
			t.Fatalf("tell %d: expected a key handed over not held", i)
		}
	}
	if free.key != key || free.ho != a.r.handoff.Load() {
		t.Fatalf("expected the worker to remember %q as free, got %+v", key, free)
	}
	// What noteChange does to the keys handed over at a change.
	a.r.hmu.Lock()
	clear(a.r.confirmed)
	a.r.changes.Add(1)
	a.r.hmu.Unlock()
	if !a.r.holdIfNeeded(b.id, k, e, &free) {
		t.Fatal("expected the tell after the change held until b drained the key")
	}
	pollUntil(t, "b to drain the key and a to let it go", func() bool { return a.r.held() == 0 })
}

// Asks remember their free key likewise, in a freeKey that stage one and
// the worker share: a repeated key stores nothing new, and a change
// makes the next ask of the key wait again.
func TestAskKeyFoundFreeIsCheckedAgainAfterAChange(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1")
	a, b := ns[0], ns[1]
	for _, n := range ns {
		n.r.cfg.Handoff = time.Minute
		n.setView(a, b)
	}
	key := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == a.id })
	a.r.handoff.Store(&handoff{prev: newView(a.id, true, viewOf(b))})
	a.r.hmu.Lock()
	a.r.confirmed[holdID("counter", key)] = struct{}{}
	a.r.hmu.Unlock()
	e := &envelope{kind: kindAsk, id: 1, typ: "counter", key: key, token: a.r.Token("counter", key), name: "none"}
	k := a.r.kind("counter")
	var free atomic.Pointer[freeKey]
	if a.r.holdIfNeededShared(b.id, k, e, &free) {
		t.Fatal("expected an ask for a key handed over not held")
	}
	first := free.Load()
	if first == nil || first.key != key {
		t.Fatalf("expected %q remembered as free, got %+v", key, first)
	}
	if a.r.holdIfNeededShared(b.id, k, e, &free) || free.Load() != first {
		t.Fatal("expected the repeated ask free, with nothing new stored")
	}
	a.r.hmu.Lock()
	clear(a.r.confirmed)
	a.r.changes.Add(1)
	a.r.hmu.Unlock()
	if !a.r.holdIfNeededShared(b.id, k, e, &free) {
		t.Fatal("expected the ask after the change held until b drained the key")
	}
	pollUntil(t, "b to drain the key and a to let it go", func() bool { return a.r.held() == 0 })
}
