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

// A retired member relays nothing: an ask that would cross it to the
// owner is refused, so that the asker, which may read the retirement
// first, never has it run twice.
func TestARetiredMemberRelaysNoAsk(t *testing.T) {
	_, ns, eps, atB, _ := silentLinkNodes(t)
	a, b, c := ns[0], ns[1], ns[2]
	silenceAtA(t, ns, eps)
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	if err := c.r.Retire(ctx); err != nil {
		t.Fatal(err)
	}
	// a's view still names c: the ask goes to c, which refuses it, and
	// fails once a has asked too often (the link to b stays cut).
	actx, acancel := context.WithTimeout(ctx, 2*time.Second)
	defer acancel()
	if got, err := actor.Ask(actx, counter.Ref(a, atB), incr{}); err == nil {
		t.Fatalf("an ask relayed by a retired member ran: %d", got)
	}
	if n, err := actor.Ask(ctx, counter.Ref(b, atB), get{}); err != nil || n != 0 {
		t.Fatalf("b counted %d (%v): a retired member relayed the ask", n, err)
	}
}

// A ReadOnly ask waiting on a member that left in order is placed again
// at once, whether or not an unsafe ask to the same member started the
// wait for its retirement (in one view change or the next).
func TestAReadOnlyAskDoesNotWaitForARetirement(t *testing.T) {
	for range 4 { // the pending asks are looked at in map order
		a, b, l, key := leaverOwns(t)
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		unsafe := async(func() (int, error) { return actor.Ask(ctx, counter.Ref(a, key), incr{}) })
		read := async(func() (string, error) { return actor.Ask(ctx, counter.Ref(a, key), whoAsks{}) })
		pollUntil(t, "both asks to wait on l", func() bool { return a.r.waiting() == 2 })
		a.r.Update(a.id, true, leftView([]*testNode{a, b}, l))
		select {
		case got := <-read:
			if got.err != nil {
				t.Fatalf("a ReadOnly ask whose owner left: %v, want it answered by b", got.err)
			}
		case got := <-unsafe:
			t.Fatalf("the unsafe ask ended (%v) before the ReadOnly one: that one waited for the retirement grace", got.err)
		}
		if got := <-unsafe; !errors.Is(got.err, actor.ErrOutcomeUnknown) {
			t.Fatalf("the unsafe ask whose owner left without retiring: %v, want ErrOutcomeUnknown", got.err)
		}
		cancel()
	}
}

// Retire waits for the asks of other nodes it serves: it returns once
// the last is answered, once a new endpoint (the member rejoined)
// cancelled the ones it served, and with ErrSystemClosed when its router
// closes while it waits.
func TestRetireWaitsForTheAsksItServes(t *testing.T) {
	for _, end := range []string{"answered", "rejoined", "closed"} {
		t.Run(end, func(t *testing.T) {
			mn := transport.NewMemNetwork()
			ns := newTestNodesOn(t, mn, "a:1", "l:1")
			a, l := ns[0], ns[1]
			for _, n := range ns {
				n.setView(a, l)
			}
			key := keyWhere(t, func(k string) bool {
				o, _ := ring.New([]ring.NodeID{a.id, l.id}).Owner(ring.KeyToken("blob", k), 2, nil)
				return o == l.id
			})
			actx, stopAsk := context.WithCancel(ctxT(t))
			defer stopAsk()
			asked := async(func() ([]byte, error) { return actor.Ask(actx, blob.Ref(a, key), blobWait{Size: 1}) })
			pollUntil(t, "l to serve the ask", func() bool {
				l.r.mu.Lock()
				defer l.r.mu.Unlock()
				return len(l.r.serving) == 1
			})
			retired := async(func() (bool, error) { return true, l.r.Retire(ctxT(t)) })
			pollUntil(t, "Retire to wait", func() bool {
				l.r.mu.Lock()
				defer l.r.mu.Unlock()
				return l.r.idle != nil
			})
			select {
			case got := <-retired:
				t.Fatalf("Retire returned (%v) while an ask it serves runs", got.err)
			default:
			}
			if end == "answered" {
				stopAsk() // the handler returns, its answer goes
				if got := <-retired; got.err != nil {
					t.Fatalf("Retire once the served ask ended: %v", got.err)
				}
				<-asked
				return
			}
			if end == "rejoined" {
				old, _ := l.r.endpoint().(*transport.MemEndpoint)
				old.Close()
				ep, err := mn.Join(ring.NodeID{Addr: l.id.Addr, Incarnation: l.id.Incarnation + 1})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ep.Close() })
				l.r.SetEndpoint(ep) // cancels the served ask, which wakes Retire
				if got := <-retired; got.err != nil {
					t.Fatalf("Retire once a new endpoint dropped the served ask: %v", got.err)
				}
				stopAsk()
				<-asked
				return
			}
			l.r.Close()
			if got := <-retired; !errors.Is(got.err, actor.ErrSystemClosed) {
				t.Fatalf("Retire when its router closed: %v, want ErrSystemClosed", got.err)
			}
		})
	}
}

// stalledPosts holds the next Post to one peer, once armed, until
// released, and then fails it: a send that waited on a slow link while
// the world moved on.
type stalledPosts struct {
	transport.Endpoint
	mu      sync.Mutex
	to      ring.NodeID
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// arm stalls the next Post to to; the test's end releases it, if the test
// did not.
func (s *stalledPosts) arm(t *testing.T, to ring.NodeID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.to, s.entered, s.release, s.once = to, make(chan struct{}), make(chan struct{}), sync.Once{}
	t.Cleanup(s.free)
}

func (s *stalledPosts) free() {
	s.mu.Lock()
	release := s.release
	s.mu.Unlock()
	s.once.Do(func() { close(release) })
}

func (s *stalledPosts) Post(to ring.NodeID, st transport.StreamID, key uint64, p []byte) error {
	s.mu.Lock()
	armed := !s.to.IsZero() && to == s.to
	entered, release := s.entered, s.release
	if armed {
		s.to = ring.NodeID{}
	}
	s.mu.Unlock()
	if !armed {
		return s.Endpoint.Post(to, st, key, p)
	}
	close(entered)
	<-release
	return errors.New("test: the link broke while the ask waited to be written")
}

// An ask whose first send is stalled while its owner retires on the ask's
// lane is placed again on the new owner, and that placement answers it:
// the stalled send failing, while the ask waits to be placed again or
// once it was, neither fails the ask nor takes it from the placement that
// serves it (it did, and the asker got a transport error for an ask that
// ran).
func TestAStalledSendThatFailsAfterTheAskMovedOnLeavesItToTheNewPlacement(t *testing.T) {
	for _, released := range []string{"while the ask waits", "once the new owner answered"} {
		t.Run(released, func(t *testing.T) { stalledSendFails(t, released == "while the ask waits") })
	}
}

func stalledSendFails(t *testing.T, early bool) {
	net := transport.NewMemNetwork()
	var stalls []*stalledPosts
	ns := newTestNodesWith(t, net, func(ep *transport.MemEndpoint) transport.Endpoint {
		s := &stalledPosts{Endpoint: ep}
		stalls = append(stalls, s)
		return s
	}, "a:1", "b:1", "l:1")
	a, b, l := ns[0], ns[1], ns[2]
	key := keyWhere(t, func(k string) bool { return ownerIn(k, a, b, l) == l.id && ownerIn(k, a, b) == b.id })
	for _, n := range ns {
		n.setView(a, b, l)
	}
	ctx := ctxT(t)
	stall := stalls[0]
	stall.arm(t, l.id)
	asked := async(func() (int, error) { return actor.Ask(ctx, counter.Ref(a, key), incr{}) })
	select {
	case <-stall.entered: // placed on l, and being written out
	case <-ctx.Done():
		t.Fatal("the ask was never sent")
	}
	if err := l.r.Retire(ctx); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "l's retirement to reach a and take the ask back", func() bool {
		a.r.mu.Lock()
		defer a.r.mu.Unlock()
		for _, p := range a.r.pending {
			return p.retries >= 1
		}
		return false
	})
	if early {
		stall.free()
	}
	b.r.Update(b.id, true, leftView([]*testNode{a, b}, l))
	a.r.Update(a.id, true, leftView([]*testNode{a, b}, l)) // the retry goes to b now
	if !early {
		pollUntil(t, "b to answer the ask", func() bool { return a.r.waiting() == 0 })
		stall.free()
	}
	var got answer[int]
	select {
	case got = <-asked:
	case <-ctx.Done():
		t.Fatal("the ask never returned")
	}
	if got.err != nil || got.v != 1 {
		t.Fatalf("the ask that b served: %d, %v; want 1, nil", got.v, got.err)
	}
	if n, err := actor.Ask(ctx, counter.Ref(b, key), get{}); err != nil || n != 1 {
		t.Fatalf("b counted %d (%v), want 1", n, err)
	}
}

// A send that fails while its ask waits to be placed again (taken back by
// a retirement or a view change, at no member yet) leaves the ask to that
// placement; the send that still holds the current placement gives it up.
func TestAFailedSendGivesUpItsAskOnlyWhileItHoldsItsPlacement(t *testing.T) {
	r := newTestNodes(t, "a:1")[0].r
	l := ring.NodeID{Addr: "l:1", Incarnation: 1}
	p := &pending{id: 7, r: r}
	r.mu.Lock()
	p.to, p.placed = l, 1
	r.pending[p.id] = p
	p.to = ring.NodeID{} // taken back: waiting to be placed again
	r.mu.Unlock()
	if r.takePlaced(p.id, p, l, 1) {
		t.Fatal("a failed send took back an ask that waits to be placed again")
	}
	r.mu.Lock()
	p.to, p.placed = l, 2 // placed again, at the same member
	r.mu.Unlock()
	if r.takePlaced(p.id, p, l, 1) {
		t.Fatal("a failed send took back an ask placed again since")
	}
	if !r.takePlaced(p.id, p, l, 2) || r.waiting() != 0 {
		t.Fatal("the send that holds the ask's placement could not give it up")
	}
}
