package remote

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/runtime"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
)

// The routing rules, over an in-memory network with views set by hand:
// what a node does when the views of the members disagree.

type msg interface{ m() }

type add struct{ N int }

type get struct {
	actor.Reply[msg, int]
}

// whoAsks answers the request id the handler sees.
type whoAsks struct {
	actor.Reply[msg, string]
}

// incr adds one and answers the count: running it twice counts twice.
type incr struct {
	actor.Reply[msg, int]
}

func (add) m()     {}
func (get) m()     {}
func (whoAsks) m() {}
func (incr) m()    {}

func (get) ReadOnly()     {}
func (whoAsks) ReadOnly() {}

var counter = actor.Define("counter", func(c *actor.Context[int, msg], m msg) error {
	switch m := m.(type) {
	case add:
		c.SetState(c.State() + m.N)
	case get:
		return actor.Respond(c, m, c.State())
	case whoAsks:
		return actor.Respond(c, m, c.RequestID())
	case incr:
		c.SetState(c.State() + 1)
		return actor.Respond(c, m, c.State())
	}
	return nil
}).WithMessages(add{}, get{}, whoAsks{}, incr{})

// testNode is one member: an endpoint, a host running counter, a router.
type testNode struct {
	runtime.Handle // makes a node an actor.System
	id             ring.NodeID
	h              *host.Host
	r              *Router
	events         chan host.Event
	// observe, when set, sees every event as it is emitted.
	observe atomic.Pointer[func(host.Event)]
}

func newTestNodes(t *testing.T, addrs ...string) []*testNode {
	t.Helper()
	return newTestNodesOn(t, transport.NewMemNetwork(), addrs...)
}

func newTestNodesOn(t *testing.T, net *transport.MemNetwork, addrs ...string) []*testNode {
	t.Helper()
	return newTestNodesWith(t, net, func(ep *transport.MemEndpoint) transport.Endpoint { return ep }, addrs...)
}

// newTestNodesWith starts members whose routers use wrap(endpoint).
func newTestNodesWith(t *testing.T, net *transport.MemNetwork, wrap func(*transport.MemEndpoint) transport.Endpoint, addrs ...string) []*testNode {
	t.Helper()
	var nodes []*testNode
	for i, a := range addrs {
		id := ring.NodeID{Addr: a, Incarnation: uint64(i + 1)}
		ep, err := net.Join(id)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, startTestNode(t, id, wrap(ep), func() { ep.Close() }))
	}
	return nodes
}

// startTestNode starts a member with identity id on ep; closeEp ends ep
// once the member is closed.
func startTestNode(t *testing.T, id ring.NodeID, ep transport.Endpoint, closeEp func()) *testNode {
	t.Helper()
	n := &testNode{id: id, events: make(chan host.Event, 1000)}
	n.r = New(Config{Endpoint: ep, Serve: true})
	n.h = host.New(host.Settings{Remote: n.r, Observer: func(e host.Event) {
		if f := n.observe.Load(); f != nil {
			(*f)(e)
		}
		select {
		case n.events <- e:
		default:
		}
	}})
	n.h.Register(runtime.Instantiate(counter, n.h))
	n.h.Register(runtime.Instantiate(seq, n.h))
	n.h.Register(runtime.Instantiate(blob, n.h))
	n.r.SetHost(n.h)
	n.Handle = runtime.NewHandle(n.h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.h.Close(ctx)
		n.r.Close()
		closeEp()
	})
	return n
}

// setView makes n place keys on the given members.
func (n *testNode) setView(members ...*testNode) {
	var ms []cluster.Member
	for _, m := range members {
		ms = append(ms, cluster.Member{ID: m.id, Status: cluster.StatusAlive, ActorTypes: []string{"counter", "seq", "blob"}})
	}
	n.r.Update(n.id, true, ms)
}

// ownerIn returns the owner of key in a ring of the members.
func ownerIn(key string, members ...*testNode) ring.NodeID {
	var rm []ring.NodeID
	for _, m := range members {
		rm = append(rm, m.id)
	}
	o, _ := ring.New(rm).Owner(ring.KeyToken("counter", key), len(rm), nil)
	return o
}

// staleAtA starts members a, b and c, where a has not heard of c yet and
// b has, and returns a key that a places on b and b on c. The caller sets
// c's view.
func staleAtA(t *testing.T) (a, b, c *testNode, key string) {
	t.Helper()
	ns := newTestNodes(t, "a:1", "b:1", "c:1")
	a, b, c = ns[0], ns[1], ns[2]
	key = keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == b.id && ownerIn(k, a, b, c) == c.id })
	a.setView(a, b)
	b.setView(a, b, c)
	return a, b, c, key
}

// keyWhere finds a key for which cond holds.
func keyWhere(t *testing.T, cond func(key string) bool) string {
	t.Helper()
	for i := range 100000 {
		if k := "k" + strconv.Itoa(i); cond(k) {
			return k
		}
	}
	t.Fatal("no key fits")
	return ""
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAskRetriesOnceAtTheOwnerTheOldOneNames(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1", "c:1")
	a, b, c := ns[0], ns[1], ns[2]
	// a has not heard of c yet; b and c have.
	key := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == b.id && ownerIn(k, a, b, c) == c.id })
	a.setView(a, b)
	b.setView(a, b, c)
	c.setView(a, b, c)
	if err := counter.Ref(c, key).Tell(ctxT(t), add{N: 5}); err != nil {
		t.Fatal(err)
	}
	got, err := actor.Ask(ctxT(t), counter.Ref(a, key), get{})
	if err != nil || got != 5 {
		t.Fatalf("got %d, %v; want 5 from c", got, err)
	}
}

func TestAskMeetingTwoNonOwnersIsUnavailable(t *testing.T) {
	a, b, c, key := staleAtA(t)
	c.setView(a, b) // c thinks b owns it: nobody accepts
	_, err := actor.Ask(ctxT(t), counter.Ref(a, key), get{})
	if !errors.Is(err, actor.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestTellIsForwardedOnceToTheOwner(t *testing.T) {
	a, b, c, key := staleAtA(t)
	c.setView(a, b, c)
	for range 10 {
		if err := counter.Ref(a, key).Tell(ctxT(t), add{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := actor.Ask(ctxT(t), counter.Ref(c, key), get{})
		if err != nil {
			t.Fatal(err)
		}
		if got == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("c counted %d of the 10 forwarded tells", got)
		}
		time.Sleep(time.Millisecond)
	}
	// b never activated the key.
	if n := b.h.Active.Load(); n != 0 {
		t.Fatalf("b has %d activations", n)
	}
}

func TestTellIsNotForwardedTwice(t *testing.T) {
	a, b, c, key := staleAtA(t)
	c.setView(a, b) // c sends it back to b: a loop, broken after one forward
	if err := counter.Ref(a, key).Tell(ctxT(t), add{N: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-c.events:
		if e.Kind != host.MessageDropped || e.Key != key {
			t.Fatalf("event %+v, want the tell dropped on c", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no drop reported")
	}
}

func TestAskToAMemberThatDiesFailsWhenTheViewSaysSo(t *testing.T) {
	net := transport.NewMemNetwork()
	ns := newTestNodesOn(t, net, "a:1", "b:1")
	a, b := ns[0], ns[1]
	key := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == b.id })
	a.setView(a, b)
	b.setView(a, b)
	net.Partition("a:1", "b:1") // the request waits in the network
	errc := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctxT(t), counter.Ref(a, key), incr{}) // not ReadOnly: not asked again
		errc <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for a.r.waiting() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the ask never left")
		}
		time.Sleep(time.Millisecond)
	}
	// Declare b dead in a's view: the ask fails now, not at its timeout.
	a.r.Update(a.id, true, []cluster.Member{
		{ID: a.id, Status: cluster.StatusAlive, ActorTypes: []string{"counter"}},
		{ID: b.id, Status: cluster.StatusDead, ActorTypes: []string{"counter"}},
	})
	select {
	case err := <-errc:
		if !errors.Is(err, actor.ErrOutcomeUnknown) || !errors.Is(err, actor.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrOutcomeUnknown and ErrUnavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the ask hangs")
	}
	// With b dead, a serves the key itself.
	got, err := actor.Ask(ctxT(t), counter.Ref(a, key), get{})
	if err != nil || got != 0 {
		t.Fatalf("got %d, %v", got, err)
	}
	if n := a.h.Active.Load(); n != 1 {
		t.Fatalf("a has %d activations, want the moved key", n)
	}
	net.Heal("a:1", "b:1")
}

// waiting returns the number of asks waiting for a reply.
func (r *Router) waiting() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

func TestSetEndpointMovesTheRouterToANewIncarnation(t *testing.T) {
	mn := transport.NewMemNetwork()
	ns := newTestNodesOn(t, mn, "a:1", "b:1")
	a, b := ns[0], ns[1]
	a.setView(a, b)
	b.setView(a, b)
	atB := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == b.id })
	if _, err := actor.Ask(ctxT(t), counter.Ref(a, atB), get{}); err != nil {
		t.Fatalf("ask before: %v", err)
	}
	// a is removed and rejoins as a new incarnation at the same address.
	oldEp, _ := a.r.endpoint().(*transport.MemEndpoint)
	oldEp.Close()
	id := ring.NodeID{Addr: a.id.Addr, Incarnation: a.id.Incarnation + 100}
	ep, err := mn.Join(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	a.r.SetEndpoint(ep)
	a.id = id
	a.setView(a, b)
	b.setView(a, b)
	atA := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == a.id })
	atB = keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == b.id })
	if err := counter.Ref(b, atA).Tell(ctxT(t), add{N: 2}); err != nil {
		t.Fatal(err)
	}
	if got, err := actor.Ask(ctxT(t), counter.Ref(b, atA), get{}); err != nil || got != 2 {
		t.Fatalf("ask from b to a's new incarnation: %d, %v; want 2", got, err)
	}
	if _, err := actor.Ask(ctxT(t), counter.Ref(a, atB), get{}); err != nil {
		t.Fatalf("ask from a's new incarnation to b: %v", err)
	}
	if a.r.self() != id {
		t.Fatalf("self = %v, want %v", a.r.self(), id)
	}
}
