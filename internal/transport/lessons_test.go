package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/faultnet"
	"github.com/troupe-go/troupe/internal/transport/flow"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// Tests for lessons other multiplexers learned in production
// (docs/lessons.md): keepalives stuck behind data, resend buffers that
// grow without bound, cancelled envelopes that a resume cannot drop.

// sessionState reads, under the session lock, what the tests below
// check: the pings the session sent, whether application envelopes
// wait for credit, and the bytes of its resend buffer.
type sessionState struct {
	pings      uint64
	queued     int   // bytes queued and not yet fully written
	available  int64 // application stream credit left
	window     int64 // application stream window
	resendSize int   // application bytes written and not yet credited
}

func stateOf(t *testing.T, tr *Transport, peer ring.NodeID) sessionState {
	t.Helper()
	s, _ := tr.sessionFor(peer, false)
	if s == nil {
		t.Fatalf("%v holds no session for %v", tr.Self(), peer)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := sessionState{pings: s.pingToken, queued: s.queuedBytes}
	cr := s.sched.Credit(flow.StreamID(StreamApplication))
	st.available, st.window = cr.Available(), cr.Window()
	for _, f := range s.resend[StreamApplication].items() {
		st.resendSize += len(f.payload)
	}
	return st
}

// waitState polls the session until cond holds, failing after a
// generous bound.
func waitState(t *testing.T, tr *Transport, peer ring.NodeID, what string, cond func(sessionState) bool) sessionState {
	t.Helper()
	var st sessionState
	eventuallyf(t, func() bool { st = stateOf(t, tr, peer); return cond(st) }, func() string {
		return fmt.Sprintf("%s: not after %v; session %+v", what, waitBound, st)
	})
	return st
}

// Keepalive pings queued behind data killed congested yamux sessions.
// Here the application stream is out of credit with megabytes queued
// behind it and the receiver's handler blocked, yet pings and pongs keep
// crossing both ways on the same connection, which is never given up.
// Were a ping to wait for credit or behind the data queue, no pong would
// come back, the pings would stop counting up, and the silent connection
// would be replaced after KeepaliveTimeout.
func TestKeepalivesCrossAConnectionWhoseDataIsOutOfCredit(t *testing.T) {
	ka := func(c *wire.Config) {
		c.KeepaliveAfter = 10 * time.Millisecond
		// Generous: a ping stuck behind data is never answered, so the
		// wait below fails anyway; a loaded machine must not time out.
		c.KeepaliveTimeout = 5 * time.Second
	}
	a, b := newTestNode(t, ka), newTestNode(t, ka)
	blocked, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the transports close: a failure must not hang
	var first atomic.Bool
	b.t.Handle(StreamApplication, HandlerFunc(func(ring.NodeID, []byte) {
		if first.CompareAndSwap(false, true) {
			close(blocked)
			<-release
		}
	}))
	ctx := context.Background()
	var rs []*Receipt
	const n, size = 64, 16 << 10 // 1 MiB: four windows
	for i := range n {
		r, err := a.t.Send(ctx, b.t.Self(), StreamApplication, uint64(i%4), make([]byte, size))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	<-blocked
	st := waitState(t, a.t, b.t.Self(), "the application stream to run out of credit with data queued", func(s sessionState) bool {
		return s.available < size && s.queued > 0
	})
	la, ra, _ := activeConn(a.t, b.t.Self())
	startA, startB := st.pings, stateOf(t, b.t, a.t.Self()).pings
	// Each ping needs a pong (or any bytes) back before the next is sent.
	waitState(t, a.t, b.t.Self(), "a's pings to be answered", func(s sessionState) bool { return s.pings >= startA+5 })
	waitState(t, b.t, a.t.Self(), "b's pings to be answered", func(s sessionState) bool { return s.pings >= startB+5 })
	if s := stateOf(t, a.t, b.t.Self()); s.queued == 0 {
		t.Fatalf("the data queue drained while the handler was blocked (%+v): the test did not hold the stream", s)
	}
	if la2, ra2, ok := activeConn(a.t, b.t.Self()); !ok || la2 != la || ra2 != ra {
		t.Fatalf("the connection was replaced while its data waited for credit: %s->%s then %s->%s (%v)", la, ra, la2, ra2, ok)
	}
	unblock()
	for i, r := range rs {
		if err := waitReceipt(t, r); err != nil {
			t.Fatalf("receipt %d after the handler resumed: %v", i, err)
		}
	}
}

// The resend buffer (frames written and not yet credited, kept for a
// resume) must be bounded, and the sender pushed back beyond it. While
// the peer is unreachable a sender may keep writing only within its
// stream's window; the rest stays queued, a Send beyond the queue bound
// fails with ErrQueueFull, and after the heal everything arrives exactly
// once.
func TestTheResendBufferStaysWithinTheWindowAndTheQueueBoundPushesBack(t *testing.T) {
	const queueBound = 1 << 20
	fp := newFaultPair(t, 21, nil, func(c *wire.Config) {
		c.Limits.MaxMessage = wire.MinMaxMessage
		c.SendQueue = queueBound
	})
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	warm, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 0, 10))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, warm); err != nil {
		t.Fatal(err)
	}
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Blackhole) // the open connection stalls
	all := []sent{{from: 0, tag: "0/2/1#0", r: warm}}
	const size = 32 << 10
	queued := 0
	for i := 1; ; i++ {
		p := tagged(0, StreamApplication, 1, uint32(i), size)
		r, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, p)
		if errors.Is(err, wire.ErrQueueFull) {
			break
		}
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		_, _, tag := tagOf(p)
		all = append(all, sent{from: 0, tag: tag, r: r})
		if queued += size; queued > 4*queueBound {
			t.Fatalf("%d bytes accepted past a stalled connection and a %d-byte queue bound: no push-back", queued, queueBound)
		}
	}
	st := stateOf(t, a, b.Self())
	if st.resendSize > int(st.window) {
		t.Fatalf("resend buffer %d bytes with a window of %d: want it within the window", st.resendSize, st.window)
	}
	if st.queued == 0 || st.queued > queueBound {
		t.Fatalf("%d bytes queued when a Send was refused, want some and at most the bound %d", st.queued, queueBound)
	}
	fp.fn.HealAll()
	fp.fn.CutAll() // the stalled connection is replaced by a resumed one
	checkDelivered(t, fp, all)
}

// RSocket's resume gives a frame its position when it is written, so an
// envelope still queued can be dropped when its sender gives up. Here
// envelopes queue while the connection is down; cancelling the middle one
// drops it, and the resume carries the others, in order, exactly once.
func TestAnEnvelopeCancelledWhileTheSessionWaitsToResumeIsDropped(t *testing.T) {
	fp := newFaultPair(t, 22, nil, nil)
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	send := func(ctx context.Context, seq uint32, size int) sent {
		t.Helper()
		p := tagged(0, StreamApplication, 1, seq, size)
		r, err := a.Send(ctx, b.Self(), StreamApplication, 1, p)
		if err != nil {
			t.Fatal(err)
		}
		_, _, tag := tagOf(p)
		return sent{from: 0, tag: tag, r: r}
	}
	first := send(context.Background(), 0, 10)
	if err := waitReceipt(t, first.r); err != nil {
		t.Fatal(err)
	}
	// An envelope in flight when the connection breaks, so the resume
	// has something to rewrite, then an outage that refuses redials.
	inFlight := send(context.Background(), 1, 100<<10)
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Refuse)
	fp.fn.CutAll()
	eventually(t, "the session gives up its connection after the cut", func() bool {
		_, _, up := activeConn(a, b.Self())
		return !up
	})
	before := send(context.Background(), 2, 5000)
	ctx, cancel := context.WithCancel(context.Background())
	dropped := send(ctx, 3, 5000)
	after := send(context.Background(), 4, 5000)
	cancel()
	if err := waitReceipt(t, dropped.r); !errors.Is(err, context.Canceled) {
		t.Fatalf("the envelope cancelled while queued: want context.Canceled, got %v", err)
	}
	fp.fn.HealAll()
	checkDelivered(t, fp, []sent{first, inFlight, before, after})
	if n := fp.books[1].seen[dropped.tag]; n != 0 {
		t.Fatalf("the cancelled envelope %s arrived %d times", dropped.tag, n)
	}
	if conns := len(fp.fn.Conns()); conns < 2 {
		t.Fatalf("%d connections: the session did not resume", conns)
	}
}
