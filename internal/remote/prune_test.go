package remote

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/runtime"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// What a member holds per client is forgotten once the client is gone
// (see prune.go). The scenarios run in a synctest bubble: the pruner's
// minute passes at once, and nothing sleeps for real.

// peerCounts is what a router holds per peer.
type peerCounts struct{ clients, inboxes, outboxes, unanswered int }

func (r *Router) peerCounts() peerCounts {
	var c peerCounts
	r.inboxes.Range(func(any, any) bool { c.inboxes++; return true })
	if ob := r.outboxes.Load(); ob != nil {
		c.outboxes = len(*ob)
	}
	r.mu.Lock()
	c.clients, c.unanswered = len(r.clients), len(r.unanswered)
	r.mu.Unlock()
	return c
}

// holdsPeer reports whether r holds anything for id.
func (r *Router) holdsPeer(id ring.NodeID) bool {
	_, in := r.inboxes.Load(id)
	var out bool
	if ob := r.outboxes.Load(); ob != nil {
		_, out = (*ob)[id]
	}
	r.mu.Lock()
	_, sub := r.clients[id]
	_, lost := r.unanswered[id]
	r.mu.Unlock()
	return in || out || sub || lost
}

// goneClients fails what a member sends to the clients that left, as the
// transport does once it forgot their sessions (a MemEndpoint would hold
// it for their return instead).
type goneClients struct {
	transport.Endpoint
	mu  sync.Mutex
	ids map[ring.NodeID]bool
}

func (g *goneClients) leave(id ring.NodeID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ids == nil {
		g.ids = map[ring.NodeID]bool{}
	}
	g.ids[id] = true
}

func (g *goneClients) check(to ring.NodeID) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ids[to] {
		return fmt.Errorf("%w: unknown client %v", wire.ErrPeerDead, to)
	}
	return nil
}

func (g *goneClients) Post(to ring.NodeID, st transport.StreamID, key uint64, p []byte) error {
	if err := g.check(to); err != nil {
		return err
	}
	return g.Endpoint.Post(to, st, key, p)
}

func (g *goneClients) Send(ctx context.Context, to ring.NodeID, st transport.StreamID, key uint64, p []byte) (*transport.Receipt, error) {
	if err := g.check(to); err != nil {
		return nil, err
	}
	return g.Endpoint.Send(ctx, to, st, key, p)
}

func (g *goneClients) SendAfter(ctx context.Context, to ring.NodeID, st transport.StreamID, key, after uint64, p []byte) (*transport.Receipt, error) {
	if err := g.check(to); err != nil {
		return nil, err
	}
	return g.Endpoint.SendAfter(ctx, to, st, key, after, p)
}

// memberWithGone starts member a:1, alone in its view, whose sends to the
// clients that left fail.
func memberWithGone(t *testing.T, net *transport.MemNetwork) (*testNode, *goneClients) {
	t.Helper()
	g := &goneClients{}
	a := newTestNodesWith(t, net, func(ep *transport.MemEndpoint) transport.Endpoint {
		g.Endpoint = ep
		return g
	}, "a:1")[0]
	a.setView(a)
	return a, g
}

// webID is the identity of the i-th client process.
func webID(i int) ring.NodeID {
	return ring.NodeID{Addr: "web" + strconv.Itoa(i) + ":1", Incarnation: uint64(1000 + i)}
}

// pastExpiry lets the pruner's clock run past the expiry of whatever was
// heard until now, and the router settle.
func pastExpiry() {
	time.Sleep(clientExpiry + pruneEvery + time.Second)
	synctest.Wait()
}

func TestAPeerIsForgottenOnlyWhenSilentForTheExpiryNotAMemberAndNotAsking(t *testing.T) {
	const expiry = time.Minute
	for _, tc := range []struct {
		name string
		u    peerUse
		want bool
	}{
		{"silent client", peerUse{silent: expiry}, true},
		{"client never heard (no inbox)", peerUse{silent: math.MaxInt64}, true},
		{"client heard within the expiry", peerUse{silent: expiry - time.Nanosecond}, false},
		{"silent client with an ask served", peerUse{silent: expiry, asking: true}, false},
		{"silent member", peerUse{silent: math.MaxInt64, member: true}, false},
	} {
		if got := tc.u.forgettable(expiry); got != tc.want {
			t.Errorf("%s (%+v): forgettable %v, want %v", tc.name, tc.u, got, tc.want)
		}
	}
	// Silence counts from the pass that last found the inbox marked heard.
	b := &inbox{}
	b.heardAt.Store(int64(10 * time.Second))
	if got := silence(b, 70*time.Second); got != time.Minute {
		t.Errorf("inbox last found heard at 10s, pass at 70s: silent %v, want 1m", got)
	}
	b.heard.Store(true)
	if got := silence(b, 70*time.Second); got != 0 {
		t.Errorf("inbox heard since the last pass: silent %v, want 0", got)
	}
	if got := silence(nil, 0); got != math.MaxInt64 {
		t.Errorf("no inbox: silent %v, want for ever", got)
	}
}

func TestClientsThatCameAndLeftLeaveNothingOnTheMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := transport.NewMemNetwork()
		a, gone := memberWithGone(t, net)
		base := a.r.peerCounts()
		const clients = 100
		for i := range clients {
			c, stop := startTestClient(t, net, webID(i))
			c.syncWith(t, a)
			key := "k" + strconv.Itoa(i)
			if err := counter.Ref(c, key).Tell(ctxT(t), add{N: 1}); err != nil {
				t.Fatal(err)
			}
			if n, err := actor.Ask(ctxT(t), counter.Ref(c, key), get{}); err != nil || n != 1 {
				t.Fatalf("client %d's ask: %d, %v; want 1", i, n, err)
			}
			stop()
			gone.leave(webID(i))
		}
		synctest.Wait()
		held := a.r.peerCounts()
		if held.clients != base.clients+clients || held.inboxes != base.inboxes+clients || held.outboxes != base.outboxes+clients {
			t.Fatalf("before the expiry the member holds %+v (%+v at first): want a subscription, an inbox and an outbox per client", held, base)
		}
		pastExpiry()
		if got := a.r.peerCounts(); got != base {
			t.Fatalf("%d clients came and left; a clientExpiry later the member holds %+v, want %+v as before they came", clients, got, base)
		}
	})
}

func TestAClientIsKeptWhileItsAskIsServedAndForgottenOnceItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := transport.NewMemNetwork()
		a, gone := memberWithGone(t, net)
		gate := make(chan struct{})
		release := sync.OnceFunc(func() { close(gate) })
		defer release() // a failure leaves no handler blocked in the bubble
		gated := actor.Define("gated", func(c *actor.Context[int, msg], m msg) error {
			if m, ok := m.(get); ok {
				<-gate
				return actor.Respond(c, m, 1)
			}
			return nil
		}).WithMessages(get{})
		a.h.Register(runtime.Instantiate(gated, a.h))
		a.r.Update(a.id, true, []cluster.Member{{ID: a.id, Status: cluster.StatusAlive, ActorTypes: []string{"counter", "gated"}}})
		base := a.r.peerCounts()

		id := webID(1)
		c, stop := startTestClient(t, net, id)
		c.syncWith(t, a)
		// An ask whose deadline outlasts the expiry: its handler waits.
		ctx, cancel := context.WithTimeout(context.Background(), 10*clientExpiry)
		defer cancel()
		asked := make(chan error, 1)
		go func() {
			_, err := actor.Ask(ctx, gated.Ref(c, "k"), get{})
			asked <- err
		}()
		pollUntil(t, "the handler to run", func() bool { return a.h.Kind("gated").(host.Mover).Active("k") })
		stop() // the client leaves while its ask is served
		gone.leave(id)
		if err := <-asked; !errors.Is(err, actor.ErrSystemClosed) {
			t.Fatalf("the ask of a client that closed: %v, want actor.ErrSystemClosed", err)
		}
		pastExpiry()
		if !a.r.holdsPeer(id) {
			t.Fatalf("the member forgot a client whose ask it still serves (holds %+v): want it kept until the ask ends", a.r.peerCounts())
		}
		// The answer cannot reach the client: its lane is marked unanswered.
		release()
		synctest.Wait()
		if got := a.r.peerCounts(); got.unanswered != base.unanswered+1 {
			t.Fatalf("after the answer to a client that left, the member holds %+v: want its lane marked unanswered", got)
		}
		time.Sleep(pruneEvery)
		synctest.Wait()
		if got := a.r.peerCounts(); got != base {
			t.Fatalf("a pass after the ask ended the member holds %+v, want %+v as before the client came", got, base)
		}
	})
}

func TestAClientThatKeepsSyncingIsNeverForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := transport.NewMemNetwork()
		a, _ := memberWithGone(t, net)
		c, stop := startTestClient(t, net, webID(1))
		defer stop()
		for range 3 * int(clientExpiry/(5*time.Second)) {
			c.syncWith(t, a)
			time.Sleep(5 * time.Second) // a client's default SyncInterval
			synctest.Wait()
			if !a.r.holdsPeer(c.r.self()) {
				t.Fatal("the member forgot a client that syncs every 5s")
			}
		}
		// It still gets pushes: its subscription was never lost.
		a.r.Update(a.id, true, listOf([]*testNode{a}, cluster.StatusSuspect))
		c.await(t, "the push of a change to a client that kept syncing")
	})
}

func TestAForgottenClientThatComesBackIsServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := transport.NewMemNetwork()
		a, _ := memberWithGone(t, net)
		c, stop := startTestClient(t, net, webID(1))
		defer stop()
		c.syncWith(t, a)
		if err := counter.Ref(c, "k").Tell(ctxT(t), add{N: 1}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// Silent past the expiry (a web process between requests, not
		// following this member): forgotten.
		pastExpiry()
		if a.r.holdsPeer(c.r.self()) {
			t.Fatalf("a client silent past the expiry is still held (%+v): want it forgotten", a.r.peerCounts())
		}
		// It comes back: its sync and its asks are served, and it is
		// subscribed again.
		if got := c.syncWith(t, a); len(got) != 1 || got[0].ID != a.id {
			t.Fatalf("the sync of a client that came back got %v: want a's list", got)
		}
		if err := counter.Ref(c, "k").Tell(ctxT(t), add{N: 2}); err != nil {
			t.Fatal(err)
		}
		// (The count kept before is the actor's business: idle for the
		// expiry, it may have been passivated.)
		if n, err := actor.Ask(ctxT(t), counter.Ref(c, "k"), get{}); err != nil || n < 2 {
			t.Fatalf("the ask of a client that came back: %d, %v; want its tell counted", n, err)
		}
		a.r.Update(a.id, true, listOf([]*testNode{a}, cluster.StatusSuspect))
		c.await(t, "the push of a change to a client that came back")
	})
}

func TestMembersAreNeverForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := newTestNodes(t, "a:1", "b:1")
		a, b := ns[0], ns[1]
		a.setView(a, b)
		b.setView(a, b)
		key := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == a.id })
		if n, err := actor.Ask(ctxT(t), counter.Ref(b, key), get{}); err != nil || n != 0 {
			t.Fatalf("b's ask: %d, %v", n, err)
		}
		pastExpiry()
		pastExpiry()
		if !a.r.holdsPeer(b.id) || !b.r.holdsPeer(a.id) {
			t.Fatal("members silent past the expiry were forgotten: want them kept while in the view")
		}
	})
}

// Inboxes and outboxes forgotten as often as they fall idle, while a
// client streams tells to one key: each arrives, in the order sent.
func TestForgettingIdleBoxesWhileAClientSendsKeepsItsOrder(t *testing.T) {
	net := transport.NewMemNetwork()
	a := newTestNodesOn(t, net, "a:1")[0]
	a.setView(a)
	c := newTestClient(t, net)
	c.syncWith(t, a)
	stop := make(chan struct{})
	pruned := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				pruned <- n
				return
			default:
			}
			// An expiry of zero: whatever is idle is forgotten.
			n += a.r.pruneAt(time.Since(a.r.started), time.Now(), 0)
			c.r.dropOutboxes([]ring.NodeID{a.id})
		}
	}()
	const tells = 3000
	for i := range tells {
		if err := seq.Ref(c, "k").Tell(ctxT(t), seqAdd{N: i}); err != nil {
			t.Fatal(err)
		}
	}
	var got []int
	pollUntil(t, "every tell to arrive", func() bool {
		var err error
		got, err = actor.Ask(ctxT(t), seq.Ref(c, "k"), seqList{})
		return err == nil && len(got) >= tells
	})
	close(stop)
	if n := <-pruned; n == 0 {
		t.Fatal("the member never forgot the client while it sent: the test proves nothing")
	}
	for i, n := range got {
		if n != i {
			t.Fatalf("tell %d arrived as the %d-th (of %d): want the order sent", n, i, len(got))
		}
	}
	if len(got) != tells {
		t.Fatalf("%d tells arrived, want %d", len(got), tells)
	}
}
