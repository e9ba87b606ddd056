package remote

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/placement"
	"github.com/troupe-go/troupe/internal/runtime"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
)

// Member lists and placement versions between members and clients (see
// sync.go), over an in-memory network with the members' views set by
// hand.

// testClient is a client's router: it takes each list it gets as its
// view, as client.Client does with its merged one.
type testClient struct {
	runtime.Handle
	r     *Router
	mu    sync.Mutex
	lists int              // lists OnMembers got, repeated ones included
	last  []cluster.Member // the last of them
	got   chan struct{}    // one per list
}

func newTestClient(t *testing.T, net *transport.MemNetwork) *testClient {
	t.Helper()
	c, stop := startTestClient(t, net, ring.NodeID{Addr: "client:1", Incarnation: 1})
	t.Cleanup(stop)
	return c
}

// startTestClient starts a client process with identity id; stop closes
// it (once).
func startTestClient(t *testing.T, net *transport.MemNetwork, id ring.NodeID) (c *testClient, stop func()) {
	t.Helper()
	ep, err := net.Join(id)
	if err != nil {
		t.Fatal(err)
	}
	c = &testClient{got: make(chan struct{}, 100)}
	c.r = New(Config{Endpoint: ep, OnMembers: func(_ ring.NodeID, ms []cluster.Member) {
		c.r.Update(ring.NodeID{}, true, ms)
		c.mu.Lock()
		c.lists++
		c.last = ms
		c.mu.Unlock()
		c.got <- struct{}{}
	}})
	h := host.New(host.Settings{Remote: c.r, RemoteOnly: true})
	c.r.SetHost(h)
	c.Handle = runtime.NewHandle(h)
	var once sync.Once
	return c, func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			h.Close(ctx)
			c.r.Close()
			ep.Close()
		})
	}
}

// syncWith syncs with m and waits for the list OnMembers gets in answer.
func (c *testClient) syncWith(t *testing.T, m *testNode) []cluster.Member {
	t.Helper()
	if err := c.r.Sync(m.id); err != nil {
		t.Fatal(err)
	}
	c.await(t, "the answer to a sync")
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

func (c *testClient) await(t *testing.T, what string) {
	t.Helper()
	select {
	case <-c.got:
	case <-time.After(5 * time.Second):
		t.Fatalf("no list from OnMembers within 5s: expected %s", what)
	}
}

// listOf is the view setView gives, with each member's status.
func listOf(members []*testNode, status ...cluster.Status) []cluster.Member {
	var ms []cluster.Member
	for i, m := range members {
		st := cluster.StatusAlive
		if i < len(status) {
			st = status[i]
		}
		ms = append(ms, cluster.Member{ID: m.id, Status: st, ActorTypes: []string{"counter", "seq", "blob"}})
	}
	return ms
}

func TestAClientAndAMemberComputeOnePlacementVersionForOneSet(t *testing.T) {
	net := transport.NewMemNetwork()
	ns := newTestNodesOn(t, net, "a:1", "b:1", "c:1")
	c := newTestClient(t, net)
	if v := c.r.PlacementVersion(); v != "" {
		t.Fatalf("a client with no list has placement version %q, want \"\"", v)
	}
	ms := listOf(ns, cluster.StatusAlive, cluster.StatusAlive, cluster.StatusDead)
	ns[0].r.Update(ns[0].id, true, ms)
	// The client's list comes in another order, with what moves no key:
	// an accuser on a member, a fourth one still joining.
	other := slices.Clone(ms)
	slices.Reverse(other)
	other[1].Accusers = []string{"c:1"}
	other = append(other, cluster.Member{ID: ring.NodeID{Addr: "d:1", Incarnation: 9}, Status: cluster.StatusAlive, Joining: true, ActorTypes: []string{"counter"}})
	c.r.Update(ring.NodeID{}, true, other)
	member, client := ns[0].r.PlacementVersion(), c.r.PlacementVersion()
	if member == "" || member != client {
		t.Fatalf("member's placement version %q, client's %q: want one token for one placement", member, client)
	}
	// It is the admin API's token, computed from the same snapshot.
	_, _, records, rings := ns[0].r.Snapshot()
	status := map[ring.NodeID]cluster.Status{}
	for _, m := range records {
		status[m.ID] = m.Status
	}
	if api := placement.Version(rings, func(id ring.NodeID) bool { return serves(status[id]) }); api != member {
		t.Fatalf("the router's placement version %s, the admin API's computation %s: want one", member, api)
	}
	// A member that dies moves it.
	c.r.Update(ring.NodeID{}, true, listOf(ns, cluster.StatusAlive, cluster.StatusDead, cluster.StatusDead))
	if v := c.r.PlacementVersion(); v == member {
		t.Fatalf("the placement version stayed %s after a ring member died, want another", v)
	}
}

func TestASyncWithAnUnchangedListTransfersNoList(t *testing.T) {
	net := transport.NewMemNetwork()
	ns := newTestNodesOn(t, net, "a:1", "b:1")
	a := ns[0]
	a.setView(ns...)
	c := newTestClient(t, net)
	first := c.syncWith(t, a)
	if len(first) != 2 || a.r.listsDecoded.Load() != 0 {
		t.Fatalf("first list %v: want both members", first)
	}
	if n := c.r.listsDecoded.Load(); n != 1 {
		t.Fatalf("the client decoded %d lists after its first sync, want 1", n)
	}
	// Nothing changed: the member answers with its version alone, and
	// the client takes the list it has again (its merge refreshes the
	// members that list names, and the client heard from the member).
	for i := range 3 {
		again := c.syncWith(t, a)
		if n := c.r.listsDecoded.Load(); n != 1 {
			t.Fatalf("sync %d with an unchanged list: the client decoded %d lists, want still 1", i+2, n)
		}
		if !slices.EqualFunc(again, first, cluster.Member.Equal) {
			t.Fatalf("sync %d: OnMembers got %v, want the list it had, %v", i+2, again, first)
		}
	}
	// A suspicion moves no key, yet it is news for Members: the push
	// carries the list, and the next sync's digest is the new list's.
	a.r.Update(a.id, true, listOf(ns, cluster.StatusAlive, cluster.StatusSuspect))
	c.await(t, "the push of a suspicion")
	c.mu.Lock()
	pushed := c.last
	c.mu.Unlock()
	if n := c.r.listsDecoded.Load(); n != 2 || pushed[1].Status != cluster.StatusSuspect {
		t.Fatalf("after a suspicion the client decoded %d lists, the last %v: want 2, b suspect", n, pushed)
	}
	if c.r.PlacementVersion() != a.r.PlacementVersion() {
		t.Fatalf("placement versions %s (client) and %s (member): want one", c.r.PlacementVersion(), a.r.PlacementVersion())
	}
	if got := c.syncWith(t, a); c.r.listsDecoded.Load() != 2 || got[1].Status != cluster.StatusSuspect {
		t.Fatalf("a sync after the push: %d lists decoded, OnMembers got %v: want 2, b still suspect", c.r.listsDecoded.Load(), got)
	}
}

func TestAClientThatSyncsTheOldWayGetsTheOldListAndNoNotice(t *testing.T) {
	net := transport.NewMemNetwork()
	ns := newTestNodesOn(t, net, "a:1", "b:1")
	a, b := ns[0], ns[1]
	a.setView(a, b)
	b.setView(a, b)
	c := newTestClient(t, net)
	if err := c.r.send(a.id, 0, &envelope{kind: kindSync, id: 1}, true); err != nil {
		t.Fatal(err)
	}
	c.await(t, "the answer to an old sync")
	if got := c.r.heardFrom(a.id); got != "" {
		t.Fatalf("an old sync's answer came with digest %q: want a list of the old kind, without one", got)
	}
	// A tell for b's key reaches a: a forwards it, and sends no notice
	// to a client that could not read it.
	key := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == b.id })
	c.r.Update(ring.NodeID{}, true, listOf([]*testNode{a}))
	if err := counter.Ref(c, key).Tell(ctxT(t), add{N: 1}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the forwarded tell at b", func() bool {
		n, err := actor.Ask(ctxT(t), counter.Ref(b, key), get{})
		return err == nil && n == 1
	})
	if n := a.r.noticesSent.Load(); n != 0 {
		t.Fatalf("a sent %d notices to a client that syncs the old way, want none", n)
	}
}

// A client whose view is stale (it did not sync, so no member pushes to
// it) sends to a member that no longer owns the key: that member sends it
// its placement version, and the client syncs with it at once.
func TestAStaleClientRefreshesAtOnceAfterSendingToANonOwner(t *testing.T) {
	for _, send := range []struct {
		name string
		do   func(c *testClient, key string) error
	}{
		{"tell", func(c *testClient, key string) error {
			return counter.Ref(c, key).Tell(context.Background(), add{N: 1})
		}},
		{"ask", func(c *testClient, key string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := actor.Ask(ctx, counter.Ref(c, key), get{})
			return err
		}},
	} {
		t.Run(send.name, func(t *testing.T) {
			net := transport.NewMemNetwork()
			ns := newTestNodesOn(t, net, "a:1", "b:1", "d:1")
			a, b, d := ns[0], ns[1], ns[2]
			// d joined and took the key from a; the members know, the
			// client does not.
			key := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == a.id && ownerIn(k, a, b, d) == d.id })
			for _, m := range ns {
				m.setView(a, b, d)
			}
			c := newTestClient(t, net)
			c.r.Update(ring.NodeID{}, true, listOf([]*testNode{a, b}))
			if c.r.PlacementVersion() == a.r.PlacementVersion() {
				t.Fatal("the client's stale view has the members' placement version")
			}
			start := time.Now()
			if err := send.do(c, key); err != nil {
				t.Fatal(err)
			}
			c.await(t, "the list of the member that no longer owns the key")
			if took := time.Since(start); c.r.PlacementVersion() != a.r.PlacementVersion() || took > 2*time.Second {
				t.Fatalf("after %v the client's placement version is %s, the members' %s: want the members' within 2s",
					took, c.r.PlacementVersion(), a.r.PlacementVersion())
			}
			if n := a.r.noticesSent.Load(); n != 1 {
				t.Fatalf("a sent %d notices, want 1", n)
			}
		})
	}
}

func TestAMemberNoticesAClientAtMostOncePerInterval(t *testing.T) {
	net := transport.NewMemNetwork()
	ns := newTestNodesOn(t, net, "a:1", "b:1")
	a, b := ns[0], ns[1]
	a.setView(a, b)
	c := newTestClient(t, net)
	c.syncWith(t, a) // the client has a's view: a notice changes nothing
	start := time.Now()
	for range 1000 {
		// A stream of the client's messages to keys a does not own (as
		// a client relaying around a broken link to b sends).
		a.r.noticeStale(c.r.self())
	}
	elapsed := time.Since(start)
	if n, most := a.r.noticesSent.Load(), uint64(elapsed/noticeEvery)+1; n == 0 || n > most {
		t.Fatalf("a sent %d notices for 1000 misplaced messages in %v: want 1 to %d (one per %v)", n, elapsed, most, noticeEvery)
	}
	a.r.noticeStale(b.id)
	if n := a.r.noticesSent.Load(); n > uint64(time.Since(start)/noticeEvery)+1 {
		t.Fatalf("a sent a notice to member b (%d in all): want none to members", n)
	}
	// The notice names the list the client had from a: it takes that
	// list again, and asks for none.
	c.await(t, "the notice, taken as a's list again")
	if n := c.r.listsDecoded.Load(); n != 1 {
		t.Fatalf("the client decoded %d lists: want 1 (a notice with its own version asks for none)", n)
	}
}

// heardFrom returns the digest of the list r last had from id.
func (r *Router) heardFrom(id ring.NodeID) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.heard[id].digest
}
