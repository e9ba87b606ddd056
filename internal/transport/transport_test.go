package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/transport/flow"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// testNode is a transport listening on loopback with recording handlers.
type testNode struct {
	t   *Transport
	ln  net.Listener
	mu  sync.Mutex
	got map[StreamID][][]byte
	ev  []PeerEvent
	sig chan struct{}
}

func newTestNode(t *testing.T, mutate func(*wire.Config)) *testNode {
	t.Helper()
	return newTunedNode(t, nil, mutate)
}

// newTunedNode is newTestNode with the engine's tuning changed by tune.
func newTunedNode(t *testing.T, tune func(*tuning), mutate func(*wire.Config)) *testNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := wire.Config{ClusterName: "test", Advertise: ln.Addr().String()}
	if mutate != nil {
		mutate(&cfg)
	}
	tr, err := newTuned(cfg, tune)
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{t: tr, ln: ln, got: map[StreamID][][]byte{}, sig: make(chan struct{}, 1)}
	for st := range StreamID(NumStreams) {
		tr.Handle(st, HandlerFunc(func(from ring.NodeID, p []byte) {
			n.mu.Lock()
			n.got[st] = append(n.got[st], p)
			n.mu.Unlock()
			n.signal()
		}))
	}
	tr.OnPeerEvent(func(e PeerEvent) {
		n.mu.Lock()
		n.ev = append(n.ev, e)
		n.mu.Unlock()
		n.signal()
	})
	go tr.Serve(ln)
	t.Cleanup(func() { tr.Close() })
	return n
}

func (n *testNode) signal() {
	select {
	case n.sig <- struct{}{}:
	default:
	}
}

// waitFor polls cond on every signal, failing after a generous bound.
func (n *testNode) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		n.mu.Lock()
		ok := cond()
		n.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-n.sig:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func waitReceipt(t *testing.T, r *Receipt) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := r.Wait(ctx)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		t.Fatal("receipt did not resolve")
	}
	return err
}

func TestTransportDeliversEnvelopesInOrderAndResolvesReceipts(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	ctx := context.Background()
	var last *Receipt
	for i := range 100 {
		r, err := a.t.Send(ctx, b.t.Self(), StreamApplication, 7, []byte(fmt.Sprintf("msg %03d", i)))
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	if err := waitReceipt(t, last); err != nil {
		t.Fatalf("last receipt: %v", err)
	}
	b.waitFor(t, "100 envelopes", func() bool { return len(b.got[StreamApplication]) == 100 })
	for i, p := range b.got[StreamApplication] {
		if want := fmt.Sprintf("msg %03d", i); string(p) != want {
			t.Fatalf("envelope %d: got %q, want %q", i, p, want)
		}
	}
}

func TestTransportCarriesEnvelopesLargerThanTheWindowBothWays(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	big := bytes.Repeat([]byte("0123456789abcdef"), (wire.DefaultMaxMessage)/16)
	ra, err := a.t.Send(context.Background(), b.t.Self(), StreamReplication, 1, big)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.t.Send(context.Background(), a.t.Self(), StreamReplication, 1, big[:1<<20])
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, ra); err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, rb); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.got[StreamReplication]) != 1 || !bytes.Equal(b.got[StreamReplication][0], big) {
		t.Fatalf("the 4 MiB envelope did not arrive intact")
	}
}

func TestTransportReportsPeerUp(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	r, _ := a.t.Send(context.Background(), b.t.Self(), StreamControl, 0, []byte("hi"))
	waitReceipt(t, r)
	a.waitFor(t, "peer up", func() bool { return len(a.ev) > 0 && a.ev[0].Up && a.ev[0].Peer == b.t.Self() })
	if heard, ok := a.t.LastHeard(b.t.Self()); !ok || time.Since(heard) > time.Minute {
		t.Fatalf("LastHeard: %v %v", heard, ok)
	}
}

func TestTransportOverMutualTLSDeliversAndRefusesStrangers(t *testing.T) {
	ca, other := newTestCA(t, "cluster"), newTestCA(t, "intruder")
	a := newTestNode(t, func(c *wire.Config) { c.TLS = ca.node(t, "a") })
	b := newTestNode(t, func(c *wire.Config) { c.TLS = ca.node(t, "b") })
	big := bytes.Repeat([]byte("x"), 300<<10)
	r, err := a.t.Send(context.Background(), b.t.Self(), StreamApplication, 1, big)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, r); err != nil {
		t.Fatalf("send over mTLS: %v", err)
	}
	stranger := newTestNode(t, func(c *wire.Config) {
		c.TLS = other.node(t, "s")
		c.TLS.CA = ca.pool
	})
	r, err = stranger.t.Send(context.Background(), b.t.Self(), StreamApplication, 1, []byte("let me in"))
	if err != nil {
		t.Fatal(err)
	}
	var ref *wire.Refused
	if err := waitReceipt(t, r); !errors.As(err, &ref) || ref.Reason != wire.RefusedTLS {
		t.Fatalf("a node with a certificate from another CA: want *wire.Refused{tls}, got %v", err)
	}
}

func TestSendBeyondTheQueueBoundFailsWithErrQueueFull(t *testing.T) {
	a := newTestNode(t, func(c *wire.Config) { c.SendQueue = wire.DefaultMaxMessage })
	// The peer does not exist, so nothing drains.
	to := ring.NodeID{Addr: "127.0.0.1:1"}
	if _, err := a.t.Send(context.Background(), to, StreamApplication, 1, make([]byte, wire.DefaultMaxMessage-10)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.t.Send(context.Background(), to, StreamApplication, 1, make([]byte, 11)); !errors.Is(err, wire.ErrQueueFull) {
		t.Fatalf("want wire.ErrQueueFull, got %v", err)
	}
}

// The reader delivers an application envelope itself when the stream is
// idle; a handler that blocks must not keep the reader from the other
// streams (it is relieved), and what arrives meanwhile on the blocked
// stream waits behind it, in order.
func TestABlockedApplicationHandlerHoldsNeitherOtherStreamsNorOrder(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	release, blocked := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var got []string
	b.t.Handle(StreamApplication, HandlerFunc(func(from ring.NodeID, p []byte) {
		if string(p) == "block" {
			close(blocked)
			<-release
		}
		mu.Lock()
		got = append(got, string(p))
		mu.Unlock()
		b.signal()
	}))
	b.t.Handle(StreamMembership, HandlerFunc(func(from ring.NodeID, p []byte) { close(release) }))
	ctx := context.Background()
	send := func(st StreamID, s string) {
		t.Helper()
		if _, err := a.t.Send(ctx, b.t.Self(), st, 1, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	send(StreamApplication, "warm")
	b.waitFor(t, "first envelope", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	send(StreamApplication, "block")
	<-blocked
	for i := range 5 {
		send(StreamApplication, fmt.Sprintf("after %d", i))
	}
	eventually(t, "five envelopes queued behind \"block\"", func() bool {
		s := onlySession(t, b)
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.inbox[StreamApplication]) == 5
	})
	start := time.Now()
	send(StreamMembership, "unblock")
	b.waitFor(t, "all envelopes", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 7 })
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the membership envelope took %v past a blocked application handler", d)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"warm", "block", "after 0", "after 1", "after 2", "after 3", "after 4"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// A stream of large envelopes over plain TCP, whose chunks are granted
// when the receiver drains its socket (or per a quarter of the window)
// and whose consumption grants are written by the deliverer, arrives
// whole and in order, and every byte is credited back: no grant is left
// waiting for a drain that never comes.
func TestBulkOverTCPArrivesInOrderAndIsCreditedBack(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	ctx := context.Background()
	const n, size = 24, 1 << 20
	var rs []*Receipt
	for i := range n {
		p := bytes.Repeat([]byte{byte(i)}, size)
		r, err := a.t.Send(ctx, b.t.Self(), StreamReplication, 1, p)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	for i, r := range rs {
		if err := waitReceipt(t, r); err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
	}
	b.mu.Lock()
	got := b.got[StreamReplication]
	b.mu.Unlock()
	if len(got) != n {
		t.Fatalf("got %d envelopes, want %d", len(got), n)
	}
	for i, p := range got {
		if len(p) != size || p[0] != byte(i) || p[size-1] != byte(i) {
			t.Fatalf("envelope %d: %d bytes starting %d, want %d bytes of %d", i, len(p), p[0], size, i)
		}
	}
	s, _ := a.t.sessionFor(b.t.Self(), false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if cr := s.sched.Credit(flow.StreamID(StreamReplication)); cr.Consumed() != cr.Sent() {
		t.Fatalf("sender's credit: %d consumed of %d sent, want all", cr.Consumed(), cr.Sent())
	}
}

// waitBound is how long eventually waits for a condition: far above any
// scheduling delay, so only a condition that never comes fails.
const waitBound = 20 * time.Second

// eventually polls cond until it holds, failing the test with what after
// waitBound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyf(t, cond, func() string { return what + ": not after " + waitBound.String() })
}

// eventuallyf is eventually with a failure message built when it fails.
func eventuallyf(t *testing.T, cond func() bool, msg func() string) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg())
		}
		<-tick.C
	}
}

// An envelope sent with SendAfter starts only once what its after key
// held is written, and that key's later envelopes do not wait for it.
// The envelopes are all queued before the peer serves, so the scheduler
// alone orders them.
func TestSendAfterFollowsWhatTheKeyHeldAndHoldsNothingBackOnIt(t *testing.T) {
	order := func(t *testing.T, send func(a *Transport, to ring.NodeID)) []int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(wire.Config{ClusterName: "test", Advertise: ln.Addr().String()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		var mu sync.Mutex
		var got []int
		b.Handle(StreamApplication, HandlerFunc(func(_ ring.NodeID, p []byte) {
			mu.Lock()
			got = append(got, int(p[0]))
			mu.Unlock()
		}))
		a := newTestNode(t, nil)
		send(a.t, b.Self())
		go b.Serve(ln)
		eventually(t, "three envelopes", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == 3
		})
		return got
	}
	env := func(tag byte, n int) []byte { p := make([]byte, n); p[0] = tag; return p }
	ctx := context.Background()
	// A small envelope after a large one's key waits for it, though
	// small envelopes go first.
	got := order(t, func(a *Transport, to ring.NodeID) {
		a.Send(ctx, to, StreamApplication, 1, env(1, 100<<10))
		a.SendAfter(ctx, to, StreamApplication, 9, 1, env(2, 10))
		a.Send(ctx, to, StreamApplication, 5, env(3, 10))
	})
	if fmt.Sprint(got) != "[3 1 2]" {
		t.Fatalf("arrival order %v; want [3 1 2]: the envelope sent after key 1 only once key 1's large one is in", got)
	}
	// A large one after a key holds back none of the key's later ones.
	got = order(t, func(a *Transport, to ring.NodeID) {
		a.Send(ctx, to, StreamApplication, 1, env(1, 10))
		a.SendAfter(ctx, to, StreamApplication, 9, 1, env(2, 200<<10))
		a.Send(ctx, to, StreamApplication, 1, env(3, 10))
	})
	if fmt.Sprint(got) != "[1 3 2]" {
		t.Fatalf("arrival order %v; want [1 3 2]: key 1's later small envelope ahead of the large one that followed key 1", got)
	}
}
