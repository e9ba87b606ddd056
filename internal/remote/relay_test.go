package remote

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
)

// heardEndpoint lets a test say when each peer was last heard.
type heardEndpoint struct {
	*transport.MemEndpoint
	mu    sync.Mutex
	heard map[ring.NodeID]time.Time
}

func (e *heardEndpoint) LastHeard(id ring.NodeID) (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.heard[id]
	return t, ok
}

func (e *heardEndpoint) set(id ring.NodeID, at time.Time) {
	e.mu.Lock()
	e.heard[id] = at
	e.mu.Unlock()
}

// silentLinkNodes starts members a, b and c, all in every view, cuts the
// link between a and b, and returns a key b owns, a key a owns and the
// endpoints, whose heard times the test sets.
func silentLinkNodes(t *testing.T) (net *transport.MemNetwork, ns []*testNode, eps []*heardEndpoint, atB, atA string) {
	t.Helper()
	net = transport.NewMemNetwork()
	ns = newTestNodesWith(t, net, func(ep *transport.MemEndpoint) transport.Endpoint {
		he := &heardEndpoint{MemEndpoint: ep, heard: map[ring.NodeID]time.Time{}}
		eps = append(eps, he)
		return he
	}, "a:1", "b:1", "c:1")
	for _, n := range ns {
		n.setView(ns...)
	}
	a, b, c := ns[0], ns[1], ns[2]
	atB = keyWhere(t, func(k string) bool { return ownerIn(k, a, b, c) == b.id })
	atA = keyWhere(t, func(k string) bool { return ownerIn(k, a, b, c) == a.id })
	net.Partition(a.id.Addr, b.id.Addr)
	return net, ns, eps, atB, atA
}

// silenceAtA has a (ns[0]) count its link to b (ns[1]) silent, not heard
// for two seconds, and its link to c (ns[2]) not, heard just now.
func silenceAtA(t *testing.T, ns []*testNode, eps []*heardEndpoint) {
	t.Helper()
	a, b, c := ns[0], ns[1], ns[2]
	now := time.Now()
	eps[0].set(b.id, now.Add(-2*time.Second))
	eps[0].set(c.id, now)
	a.r.markSilent(now, time.Second)
	if !a.r.isSilent(b.id) || a.r.isSilent(c.id) {
		t.Fatalf("expected a to count its link to b silent and to c not; b %v c %v", a.r.isSilent(b.id), a.r.isSilent(c.id))
	}
}

func TestAsksAndTellsAcrossASilentLinkGoThroughAnotherMember(t *testing.T) {
	_, ns, eps, atB, atA := silentLinkNodes(t)
	a, b, c := ns[0], ns[1], ns[2]
	now := time.Now()
	// a has not heard b for two seconds, c just now; b likewise for a.
	eps[0].set(b.id, now.Add(-2*time.Second))
	eps[0].set(c.id, now)
	eps[1].set(a.id, now.Add(-2*time.Second))
	eps[1].set(c.id, now)
	a.r.markSilent(now, time.Second)
	b.r.markSilent(now, time.Second)
	if !a.r.isSilent(b.id) || a.r.isSilent(c.id) || !b.r.isSilent(a.id) {
		t.Fatalf("expected a and b to count their link silent and c not; a: b %v c %v; b: a %v", a.r.isSilent(b.id), a.r.isSilent(c.id), b.r.isSilent(a.id))
	}
	for _, tc := range []struct {
		from *testNode
		key  string
	}{{a, atB}, {b, atA}} {
		for range 3 {
			if err := counter.Ref(tc.from, tc.key).Tell(ctxT(t), add{N: 2}); err != nil {
				t.Fatal(err)
			}
		}
		// The tells went through c as well, and c forwarded them before
		// the relayed ask: asks from one sender follow its tells.
		got, err := actor.Ask(ctxT(t), counter.Ref(tc.from, tc.key), get{})
		if err != nil || got != 6 {
			t.Fatalf("ask from %v for %s across the cut link: got %d, %v; want 6 through c", tc.from.id, tc.key, got, err)
		}
	}
	if n := c.r.servingN(); n != 0 {
		t.Errorf("expected the relay to forget the asks it relayed once answered, still serving %d", n)
	}
	// Heard again: a sends straight to b.
	eps[0].set(b.id, time.Now())
	a.r.markSilent(time.Now(), time.Second)
	if a.r.isSilent(b.id) {
		t.Fatal("expected b to count as heard again")
	}
}

func TestRelayedAskWithdrawnByTheAskerIsWithdrawnByTheRelay(t *testing.T) {
	net, ns, eps, atB, _ := silentLinkNodes(t)
	a, b, c := ns[0], ns[1], ns[2]
	silenceAtA(t, ns, eps)
	// c cannot reach b either: the ask c relays waits there, until the
	// asker gives up.
	net.Partition(c.id.Addr, b.id.Addr)
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctx, counter.Ref(a, atB), get{})
		done <- err
	}()
	pollUntil(t, "the relay to ask the owner itself", func() bool { return c.r.waiting() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("expected the asker's cancellation, got %v", err)
	}
	pollUntil(t, "the relay to withdraw its own ask", func() bool { return c.r.waiting() == 0 && c.r.servingN() == 0 })
}

func (r *Router) servingN() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.serving)
}

// pollUntil waits, up to ten seconds, for cond.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
