package remote

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/transport"
)

// Races between placing a message and a view that says its member left:
// the view changes after the router read it and before it recorded the
// message as waiting on that member.

// lookKind is a kind whose router-side looks (Pinned, Replicas) run
// between reading the view and acting on it: at the look numbered at
// (from 1) once armed, it runs then, a view change.
type lookKind struct {
	host.RemoteKind
	mu    sync.Mutex
	at    int
	looks int
	then  func()
}

func (k *lookKind) arm(at int, then func()) {
	k.mu.Lock()
	k.at, k.looks, k.then = at, 0, then
	k.mu.Unlock()
}

func (k *lookKind) look() {
	k.mu.Lock()
	var then func()
	if k.then != nil {
		k.looks++
		if k.looks == k.at {
			then, k.then = k.then, nil
		}
	}
	k.mu.Unlock()
	if then != nil {
		then()
	}
}

// The kind's own host runs it: the router's host leaves it alone.
func (k *lookKind) Sweep(time.Time) {}
func (k *lookKind) Stop()           {}
func (k *lookKind) Abort()          {}

func (k *lookKind) Pinned() bool  { k.look(); return k.RemoteKind.Pinned() }
func (k *lookKind) Replicas() int { k.look(); return k.RemoteKind.Replicas() }

// lookThrough gives n's router a host whose kinds are n's, each behind a
// lookKind (n's runtime keeps its own host); it returns them by name.
func lookThrough(t *testing.T, n *testNode) map[string]*lookKind {
	h := host.New(host.Settings{})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Close(ctx)
	})
	ks := map[string]*lookKind{}
	for _, k := range n.h.Kinds() {
		lk := &lookKind{RemoteKind: k.(host.RemoteKind)}
		h.Register(lk)
		ks[k.Name()] = lk
	}
	n.r.SetHost(h)
	return ks
}

// leftView lists the members alive, but left, hosting counter and seq.
func leftView(alive []*testNode, left *testNode) []cluster.Member {
	ms := viewOf(alive...)
	ms = append(ms, cluster.Member{ID: left.id, Status: cluster.StatusLeft, ActorTypes: []string{"counter", "seq"}})
	return ms
}

// leaverOwns starts a, b and l, all seeing the three, and picks a key l
// owns and b owns once l is gone; b already sees l left, and a reaches l
// no more (what a sends it is never answered).
func leaverOwns(t *testing.T) (a, b, l *testNode, key string) {
	t.Helper()
	a, b, l, key, _ = leaverOwnsOn(t)
	return a, b, l, key
}

// leaverOwnsOn is leaverOwns, with the network.
func leaverOwnsOn(t *testing.T) (a, b, l *testNode, key string, net *transport.MemNetwork) {
	t.Helper()
	net = transport.NewMemNetwork()
	ns := newTestNodesOn(t, net, "a:1", "b:1", "l:1")
	a, b, l = ns[0], ns[1], ns[2]
	key = keyWhere(t, func(k string) bool { return ownerIn(k, a, b, l) == l.id && ownerIn(k, a, b) == b.id })
	for _, n := range ns {
		n.setView(a, b, l)
	}
	b.r.Update(b.id, true, leftView([]*testNode{a, b}, l))
	net.Partition(a.id.Addr, l.id.Addr)
	return a, b, l, key, net
}

func TestAskPlacedJustBeforeItsOwnerLeftGoesToTheNewOwner(t *testing.T) {
	a, b, l, key := leaverOwns(t)
	// l left: the view that says so reaches a while it places the ask,
	// after it read the view where l owns the key.
	ks := lookThrough(t, a)
	ks["counter"].arm(1, func() { a.r.Update(a.id, true, leftView([]*testNode{a, b}, l)) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	got, err := actor.Ask(ctx, counter.Ref(a, key), get{})
	if err != nil || got != 0 {
		t.Fatalf("expected the ask answered by b, the new owner (0), got %d, %v", got, err)
	}
	if n := a.r.waiting(); n != 0 {
		t.Fatalf("expected no ask left waiting, %d are", n)
	}
}

func TestKeyTakenJustAsItsPreviousOwnerLeftIsNotHeld(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1", "l:1")
	a, b, l := ns[0], ns[1], ns[2]
	key := keyWhere(t, func(k string) bool { return seqOwnerIn(k, a, b, l) == l.id && seqOwnerIn(k, a, b) == b.id })
	for _, n := range ns {
		n.r.cfg.Handoff = time.Minute
		n.setView(a, b, l)
	}
	// b takes the key while l leaves: l is still there to drain it.
	leaving := viewOf(a, b, l)
	leaving[2].Status = cluster.StatusLeaving
	b.r.Update(b.id, true, leaving)
	a.r.Update(a.id, true, leftView([]*testNode{a, b}, l))
	l.r.Close() // it would never answer the drain
	ks := lookThrough(t, b)
	// b looks at the kind twice to place the ask (Pinned, Replicas), then
	// twice to check for a hand-off: the fourth look comes after that
	// check read the view where l is leaving. Then l is left.
	ks["seq"].arm(4, func() { b.r.Update(b.id, true, leftView([]*testNode{a, b}, l)) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	got, err := actor.Ask(ctx, seq.Ref(a, key), seqList{})
	if err != nil || len(got) != 0 {
		t.Fatalf("expected the ask served by b at once ([]), got %v, %v", got, err)
	}
	if n := b.r.held(); n != 0 {
		t.Fatalf("expected nothing held for l, which left, %d keys held", n)
	}
}
