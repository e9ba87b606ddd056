package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/faultnet"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// waitEvent waits, within a generous bound, for an event matching want.
func waitEvent(t *testing.T, events <-chan PeerEvent, what string, want func(PeerEvent) bool) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e := <-events:
			if want(e) {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event", what)
		}
	}
}

func TestASendDuringRedialBackoffRedialsAtOnce(t *testing.T) {
	fp := newFaultPair(t, 21, nil, func(c *wire.Config) { c.RedialMin, c.RedialMax = time.Hour, time.Hour })
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	eventsA, eventsB := make(chan PeerEvent, 64), make(chan PeerEvent, 64)
	a.OnPeerEvent(func(e PeerEvent) { eventsA <- e })
	b.OnPeerEvent(func(e PeerEvent) { eventsB <- e })
	r, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 0, 10))
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Refuse)
	fp.fn.CutAll()
	// Both sides' redials after the cut fail: each loop now waits half an
	// hour or more before the next.
	waitEvent(t, eventsA, "suspect", func(e PeerEvent) bool { return e.Suspect && e.Peer == b.Self() })
	waitEvent(t, eventsB, "suspect", func(e PeerEvent) bool { return e.Suspect && e.Peer == a.Self() })
	fp.fn.HealAll()
	r, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 1, 10))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, r); err != nil {
		t.Fatalf("send during the backoff: %v", err)
	}
}

func TestSendsToAnAddressNeverReachedFailAfterTheGraceAndItIsForgotten(t *testing.T) {
	fp := newFaultPair(t, 22, nil, keepalive(30*time.Millisecond))
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Refuse)
	var rs []*Receipt
	for i := range 3 {
		r, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, uint32(i), 10))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	for i, r := range rs {
		err := waitReceipt(t, r)
		if !errors.Is(err, wire.ErrNeverConnected) || !errors.Is(err, wire.ErrPeerDead) {
			t.Fatalf("send %d to a peer never reached: want wire.ErrNeverConnected and wire.ErrPeerDead, got %v", i, err)
		}
	}
	if s, _ := a.sessionFor(b.Self(), false); s != nil {
		t.Fatal("the session of a peer never reached is still held")
	}
	fp.fn.HealAll()
	r, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 3, 10))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, r); err != nil {
		t.Fatalf("a later send to the address: %v", err)
	}
}

func TestMemSendToANewerIncarnationFailsWhatWasPendingAndStartsAfresh(t *testing.T) {
	n := NewMemNetwork()
	a, _ := n.Join(ring.NodeID{Addr: "a", Incarnation: 1})
	defer a.Close()
	b, _ := n.Join(ring.NodeID{Addr: "b", Incarnation: 1})
	r, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("first"))
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	n.Partition("a", "b")
	old, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("held"))
	b.Close()
	b2, _ := n.Join(ring.NodeID{Addr: "b", Incarnation: 2})
	defer b2.Close()
	r, err := a.Send(context.Background(), b2.Self(), StreamApplication, 1, []byte("new"))
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Err(); !errors.Is(err, wire.ErrPeerRestarted) {
		t.Fatalf("send held for the old incarnation: want wire.ErrPeerRestarted at once, got %v", err)
	}
	n.Heal("a", "b")
	if err := waitReceipt(t, r); err != nil {
		t.Fatalf("send to the newer incarnation: %v", err)
	}
}

func TestSendToANewerIncarnationFailsWhatWasPendingAndStartsAfresh(t *testing.T) {
	fp := newFaultPair(t, 23, nil, nil)
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	events := make(chan PeerEvent, 64)
	a.OnPeerEvent(func(e PeerEvent) { events <- e })
	r, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 0, 10))
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	// B crashes and comes back with a new incarnation; the membership
	// layer learns of it before the transport does.
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Refuse)
	fp.fn.CutAll()
	old, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 1, 10))
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	ln, err := fp.fn.Listen(context.Background(), fp.addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	b2, err := New(wire.Config{ClusterName: "test", Advertise: fp.addrs[1], Incarnation: 99, Dialer: fp.fn.Dialer(fp.addrs[1]),
		RedialMin: 5 * time.Millisecond, RedialMax: 50 * time.Millisecond, Limits: wire.Limits{MaxFrame: 64 << 10, Window: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	got := make(chan []byte, 1)
	b2.Handle(StreamApplication, HandlerFunc(func(_ ring.NodeID, p []byte) { got <- p }))
	go b2.Serve(ln)

	r, err = a.Send(context.Background(), b2.Self(), StreamApplication, 1, []byte("new"))
	if err != nil {
		t.Fatalf("send to the newer incarnation: %v", err)
	}
	// At once, before any connection to the new process.
	if err := old.Err(); !errors.Is(err, wire.ErrPeerRestarted) {
		t.Fatalf("send pending towards the old incarnation: want wire.ErrPeerRestarted at once, got %v", err)
	}
	waitEvent(t, events, "down", func(e PeerEvent) bool {
		return !e.Up && !e.Suspect && e.Peer == b.Self() && errors.Is(e.Err, wire.ErrPeerRestarted)
	})
	fp.fn.HealAll()
	if err := waitReceipt(t, r); err != nil {
		t.Fatalf("send to the newer incarnation: %v", err)
	}
	if p := <-got; string(p) != "new" {
		t.Fatalf("new incarnation got %q", p)
	}
	if _, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("x")); !errors.Is(err, wire.ErrPeerRestarted) {
		t.Fatalf("a send addressed to the old incarnation: want wire.ErrPeerRestarted, got %v", err)
	}
}

// listenersOf adds two listeners that record "1 <event>" and "2 <event>".
func listenersOf(ep Endpoint) (func() []string, chan struct{}) {
	var mu sync.Mutex
	var log []string
	sig := make(chan struct{}, 64)
	for i := range 2 {
		ep.OnPeerEvent(func(e PeerEvent) {
			mu.Lock()
			log = append(log, fmt.Sprintf("%d %v up=%v", i+1, e.Peer, e.Up))
			mu.Unlock()
			sig <- struct{}{}
		})
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}, sig
}

func checkListeners(t *testing.T, a, b Endpoint) {
	t.Helper()
	log, sig := listenersOf(a)
	r, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-sig:
		case <-time.After(20 * time.Second):
			t.Fatalf("listeners saw %q, want the up event twice", log())
		}
	}
	up := fmt.Sprintf("%v up=true", b.Self())
	if got := log(); len(got) != 2 || got[0] != "1 "+up || got[1] != "2 "+up {
		t.Fatalf("listeners saw %q, want the up event by listener 1 then 2", got)
	}
}

func TestEveryPeerEventListenerIsToldInTheOrderAdded(t *testing.T) {
	t.Run("transport", func(t *testing.T) {
		a, b := newTestNode(t, nil), newTestNode(t, nil)
		checkListeners(t, a.t, b.t)
		// The listener newTestNode added first is told too.
		a.waitFor(t, "the first listener's up event", func() bool { return len(a.ev) > 0 && a.ev[0].Up })
	})
	t.Run("mem", func(t *testing.T) {
		n := NewMemNetwork()
		a, _ := n.Join(ring.NodeID{Addr: "a", Incarnation: 1})
		b, _ := n.Join(ring.NodeID{Addr: "b", Incarnation: 1})
		defer a.Close()
		defer b.Close()
		checkListeners(t, a, b)
	})
}

func TestLastHeardNeverGoesBackwardsAcrossConnections(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	send := func(i int) {
		r, err := a.t.Send(context.Background(), b.t.Self(), StreamApplication, 1, []byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := waitReceipt(t, r); err != nil {
			t.Fatal(err)
		}
	}
	send(0)
	before, ok := a.t.LastHeard(b.t.Self())
	if !ok {
		t.Fatal("nothing heard from a peer that credited an envelope")
	}
	// A new connection of the pair fences the current one; until it is
	// the session's, the session has none.
	s, _ := a.t.sessionFor(b.t.Self(), false)
	s.mu.Lock()
	s.fenceLocked()
	s.mu.Unlock()
	if at, ok := a.t.LastHeard(b.t.Self()); !ok || at.Before(before) {
		t.Fatalf("LastHeard went back from %v to %v (ok=%v) when the connection was replaced", before, at, ok)
	}
	send(1)
	if at, ok := a.t.LastHeard(b.t.Self()); !ok || at.Before(before) {
		t.Fatalf("LastHeard went back from %v to %v (ok=%v) on the next connection", before, at, ok)
	}
}

func TestSendWaitWaitsForRoomInTheQueueUntilTheContextEnds(t *testing.T) {
	fp := newFaultPair(t, 24, nil, func(c *wire.Config) {
		c.Limits.MaxMessage = 128 << 10
		c.SendQueue = 128 << 10
	})
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Refuse)
	ctx := context.Background()
	big, err := a.Send(ctx, b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 0, 128<<10))
	if err != nil {
		t.Fatal(err)
	}
	small := tagged(0, StreamApplication, 2, 0, 10)
	if _, err := a.Send(ctx, b.Self(), StreamApplication, 2, small); !errors.Is(err, wire.ErrQueueFull) {
		t.Fatalf("Send with a full queue: want wire.ErrQueueFull, got %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = a.SendWait(short, b.Self(), StreamApplication, 2, small)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SendWait with a full queue until its context ends: want DeadlineExceeded, got %v", err)
	}
	type result struct {
		r   *Receipt
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := a.SendWait(ctx, b.Self(), StreamApplication, 2, small)
		done <- result{r, err}
	}()
	fp.fn.HealAll()
	if err := waitReceipt(t, big); err != nil {
		t.Fatal(err)
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("SendWait still waits after the queue drained")
	}
	if res.err != nil {
		t.Fatalf("SendWait: %v", res.err)
	}
	if err := waitReceipt(t, res.r); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownDeliversWhatWasSentThenLeaves(t *testing.T) {
	fp := newFaultPair(t, 25, nil, nil)
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	events := make(chan PeerEvent, 64)
	b.OnPeerEvent(func(e PeerEvent) { events <- e })
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Refuse)
	var rs []*Receipt
	for i := range 5 {
		r, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, uint32(i), 20<<10))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	done := make(chan error, 1)
	go func() { done <- a.Shutdown(context.Background()) }()
	// Once shutting down, new sends fail; what was sent still waits.
	for {
		_, err := a.Send(context.Background(), b.Self(), StreamApplication, 2, tagged(0, StreamApplication, 2, 0, 10))
		if errors.Is(err, wire.ErrClosed) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned %v while envelopes were pending", err)
		default:
		}
	}
	for i, r := range rs {
		if err := r.Err(); err != nil {
			t.Fatalf("pending send %d failed when Shutdown started: %v", i, err)
		}
	}
	fp.fn.HealAll()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Shutdown did not return after the envelopes were delivered")
	}
	for i, r := range rs {
		if err := r.Err(); err != nil || !isResolved(r) {
			t.Fatalf("send %d after Shutdown: resolved=%v err=%v, want delivered", i, isResolved(r), err)
		}
	}
	waitEvent(t, events, "goodbye", func(e PeerEvent) bool { return !e.Up && !e.Suspect && e.Peer == a.Self() })
}

func TestShutdownGivesUpWhenItsContextEnds(t *testing.T) {
	fp := newFaultPair(t, 26, nil, nil)
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Refuse)
	r, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 0, 10))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := a.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with an unreachable peer: want DeadlineExceeded, got %v", err)
	}
	if err := waitReceipt(t, r); !errors.Is(err, wire.ErrClosed) {
		t.Fatalf("send pending at the close: want wire.ErrClosed, got %v", err)
	}
}

func TestMemShutdownDeliversWhatWasSentThenLeaves(t *testing.T) {
	n := NewMemNetwork()
	a, _ := n.Join(ring.NodeID{Addr: "a", Incarnation: 1})
	b, _ := n.Join(ring.NodeID{Addr: "b", Incarnation: 1})
	defer b.Close()
	n.Partition("a", "b")
	r, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Shutdown(context.Background()) }()
	for {
		if _, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("late")); errors.Is(err, wire.ErrClosed) {
			break
		}
	}
	n.Heal("a", "b")
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Shutdown did not return")
	}
}

func TestMemShutdownGivesUpWhenItsContextEndsAndSendWaitSends(t *testing.T) {
	n := NewMemNetwork()
	a, _ := n.Join(ring.NodeID{Addr: "a", Incarnation: 1})
	b, _ := n.Join(ring.NodeID{Addr: "b", Incarnation: 1})
	defer b.Close()
	r, err := a.SendWait(context.Background(), b.Self(), StreamApplication, 1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, r); err != nil {
		t.Fatalf("SendWait on a MemEndpoint: %v", err)
	}
	n.Partition("a", "b")
	held, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("held"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := a.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a partitioned peer: want DeadlineExceeded, got %v", err)
	}
	if err := waitReceipt(t, held); !errors.Is(err, wire.ErrClosed) {
		t.Fatalf("send held at the close: want wire.ErrClosed, got %v", err)
	}
}

// countingDialer counts the dials that opened a connection.
type countingDialer struct {
	inner     wire.Dialer
	connected atomic.Int64
}

func (d *countingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.inner.DialContext(ctx, network, addr)
	if err == nil {
		d.connected.Add(1)
	}
	return c, err
}

// A redial that connects but whose handshake fails (a slow or swallowed
// peer, the losing half of a simultaneous dial) is no evidence that the
// peer is gone: only a dial that cannot connect makes it suspect.
func TestARedialThatConnectsButFailsItsHandshakeDoesNotSuspect(t *testing.T) {
	var dialer *countingDialer
	fp := newFaultPair(t, 23, nil, func(c *wire.Config) {
		if dialer == nil {
			dialer = &countingDialer{inner: c.Dialer}
			c.Dialer = dialer
		}
		c.HandshakeTimeout = 100 * time.Millisecond
	})
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	events := make(chan PeerEvent, 64)
	a.OnPeerEvent(func(e PeerEvent) { events <- e })
	r, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 0, 10))
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	base := dialer.connected.Load()
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Swallow)
	fp.fn.CutAll()
	deadline := time.Now().Add(20 * time.Second)
	for dialer.connected.Load() < base+3 {
		if time.Now().After(deadline) {
			t.Fatal("A did not redial three times")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		select {
		case e := <-events:
			if e.Suspect {
				t.Fatalf("suspect event after handshakes that timed out: %+v", e)
			}
			continue
		default:
		}
		break
	}
	fp.fn.HealAll()
	r, _ = a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 1, 10))
	if err := waitReceipt(t, r); err != nil {
		t.Fatalf("send after the heal: %v", err)
	}
}
