package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// Senders write inline while the writer is idle; a write the socket takes
// only in part leaves the rest, and the turn, to the writer. With every
// inline write cut short, envelopes of all sizes from several goroutines
// still arrive whole and in order per key.
func TestInlineWritesCutShortArriveWholeAndInOrder(t *testing.T) {
	tune := func(tn *tuning) { tn.shortInlineWrites = 7 }
	a, b := newTunedNode(t, tune, nil), newTunedNode(t, tune, nil)
	const senders, per = 4, 200
	var mu sync.Mutex
	next := map[uint64]int{} // key -> next sequence number expected
	var bad []string
	total := 0
	b.t.Handle(StreamApplication, HandlerFunc(func(from ring.NodeID, p []byte) {
		key, seq := binary.BigEndian.Uint64(p), int(binary.BigEndian.Uint64(p[8:]))
		mu.Lock()
		defer mu.Unlock()
		if seq != next[key] {
			bad = append(bad, fmt.Sprintf("key %d: got %d, want %d", key, seq, next[key]))
		}
		if !bytes.Equal(p[16:], filler(key, seq)) {
			bad = append(bad, fmt.Sprintf("key %d seq %d: payload corrupted", key, seq))
		}
		next[key] = seq + 1
		total++
		b.signal()
	}))
	if _, err := a.t.Send(context.Background(), b.t.Self(), StreamApplication, 1<<40, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "the first envelope", func() bool { mu.Lock(); defer mu.Unlock(); return total == 1 })
	gen := connGen(t, a)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			key := uint64(s + 1)
			for i := range per {
				p := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, key), uint64(i))
				p = append(p, filler(key, i)...)
				if _, err := a.t.SendWait(context.Background(), b.t.Self(), StreamApplication, key, p); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.waitFor(t, "every envelope", func() bool { mu.Lock(); defer mu.Unlock(); return total == senders*per+1 })
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d envelopes out of order or corrupted, first: %s", len(bad), bad[0])
	}
	// A garbled frame would break the connection, and the resume would
	// hide the damage: the connection must be the first one still.
	if g := connGen(t, a); g != gen {
		t.Fatalf("the connection was replaced (generation %d, was %d)", g, gen)
	}
}

// connGen returns the connection generation of n's only session.
func connGen(t *testing.T, n *testNode) uint64 {
	t.Helper()
	n.t.mu.Lock()
	defer n.t.mu.Unlock()
	if len(n.t.sessions) != 1 {
		t.Fatalf("%d sessions, want 1", len(n.t.sessions))
	}
	for _, s := range n.t.sessions {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.gen
	}
	return 0
}

// filler is the body of envelope seq of key: sizes from a few bytes to
// beyond what a sender writes inline.
func filler(key uint64, seq int) []byte {
	n := (seq*7919 + int(key)*31) % (inlineMax + inlineMax/2)
	return bytes.Repeat([]byte{byte(key), byte(seq)}, n/2)
}

// deferHandler adapts a function to DeferHandler; Receive runs the work
// on a goroutine of its own, so that it never holds the stream either.
type deferHandler func(from ring.NodeID, p []byte) (then func(relieve func()))

func (f deferHandler) ReceiveDefer(from ring.NodeID, p []byte) func(func()) { return f(from, p) }

func (f deferHandler) Receive(from ring.NodeID, p []byte) {
	if then := f(from, p); then != nil {
		go then(func() {})
	}
}

// The work a DeferHandler leaves runs after the envelope is released: the
// next envelope of the stream is delivered while it blocks (the reader is
// relieved meanwhile), so work that waits for a later envelope completes.
func TestDeferredWorkDoesNotHoldTheStream(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	unblocked, done := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var got []string
	b.t.Handle(StreamApplication, deferHandler(func(from ring.NodeID, p []byte) func(func()) {
		mu.Lock()
		got = append(got, string(p))
		mu.Unlock()
		b.signal()
		switch string(p) {
		case "block":
			return func(func()) {
				<-unblocked
				close(done)
			}
		case "unblock":
			close(unblocked)
		}
		return nil
	}))
	ctx := context.Background()
	send := func(s string) {
		t.Helper()
		if _, err := a.t.Send(ctx, b.t.Self(), StreamApplication, 1, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	send("warm")
	b.waitFor(t, "the first envelope", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	send("block")
	send("unblock")
	b.waitFor(t, "the deferred work", closed(done))
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"warm", "block", "unblock"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Deferred work that calls relieve before it waits hands reading over at
// once: with the watch's period made endless, only that lets the envelope
// it waits for in.
func TestDeferredWorkThatRelievesHandsReadingOverAtOnce(t *testing.T) {
	tune := func(tn *tuning) { tn.reliefAfter = time.Hour }
	a, b := newTunedNode(t, tune, nil), newTunedNode(t, tune, nil)
	arrived, done := make(chan struct{}), make(chan struct{})
	b.t.Handle(StreamApplication, deferHandler(func(from ring.NodeID, p []byte) func(func()) {
		switch string(p) {
		case "wait":
			return func(relieve func()) {
				relieve()
				<-arrived
				close(done)
			}
		case "arrive":
			close(arrived)
		}
		b.signal()
		return nil
	}))
	ctx := context.Background()
	for _, s := range []string{"warm", "wait", "arrive"} {
		if _, err := a.t.Send(ctx, b.t.Self(), StreamApplication, 1, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	b.waitFor(t, "the deferred work", closed(done))
}

// quickHandler is a deferHandler that calls envelopes starting with
// "quick" quick.
type quickHandler struct{ deferHandler }

func (quickHandler) Quick(p []byte) bool { return bytes.HasPrefix(p, []byte("quick")) }

// Quick envelopes are delivered without the relief watch, whose timer
// would fire every millisecond while they go on; the first envelope that
// is not quick starts it.
func TestQuickEnvelopesAreDeliveredWithoutTheReliefWatch(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	var mu sync.Mutex
	n := 0
	b.t.Handle(StreamApplication, quickHandler{func(from ring.NodeID, p []byte) func(func()) {
		mu.Lock()
		n++
		mu.Unlock()
		b.signal()
		return nil
	}})
	ctx := context.Background()
	const quick = 50
	for i := range quick {
		if _, err := a.t.SendWait(ctx, b.t.Self(), StreamApplication, 1, fmt.Appendf(nil, "quick %d", i)); err != nil {
			t.Fatal(err)
		}
		b.waitFor(t, "the quick envelope", func() bool { mu.Lock(); defer mu.Unlock(); return n == i+1 })
	}
	c := onlyConn(t, b)
	watched := func() bool { c.watchMu.Lock(); defer c.watchMu.Unlock(); return c.watch != nil }
	if watched() {
		t.Fatal("quick envelopes armed the relief watch")
	}
	if _, err := a.t.Send(ctx, b.t.Self(), StreamApplication, 1, []byte("slow")); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "the watch armed by the envelope that is not quick", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return n == quick+1 && watched()
	})
}

// onlyConn returns the connection of n's only session.
func onlyConn(t *testing.T, n *testNode) *liveConn {
	t.Helper()
	n.t.mu.Lock()
	defer n.t.mu.Unlock()
	for _, s := range n.t.sessions {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.conn == nil {
			t.Fatal("the session has no connection")
		}
		return s.conn
	}
	t.Fatal("no session")
	return nil
}

// Work that replies to a request takes the request's grant along with
// its data, so requests answered that way never arm the grant timer,
// which would otherwise fire for nothing every GrantDelay or so. Work that
// writes nothing leaves a grant below grantSlack to the next frames (no
// timer either); one that reaches the slack gets the timer. (Keepalive
// pings, whose pongs would carry grants, are an hour away.)
func TestRepliesTakeTheGrantAlongWithoutTheGrantTimer(t *testing.T) {
	quiet := func(c *wire.Config) { c.KeepaliveAfter = time.Hour }
	a, b := newTestNode(t, quiet), newTestNode(t, quiet)
	ctx := context.Background()
	var mu sync.Mutex
	replies, silent := 0, 0
	a.t.Handle(StreamApplication, HandlerFunc(func(from ring.NodeID, p []byte) {
		mu.Lock()
		replies++
		mu.Unlock()
		a.signal()
	}))
	b.t.Handle(StreamApplication, deferHandler(func(from ring.NodeID, p []byte) func(func()) {
		if bytes.HasPrefix(p, []byte("silent")) {
			mu.Lock()
			silent++
			mu.Unlock()
			b.signal()
			return nil
		}
		return func(func()) {
			if _, err := b.t.Send(ctx, from, StreamApplication, 1, []byte("reply")); err != nil {
				t.Error(err)
			}
		}
	}))
	const requests = 50
	for i := range requests {
		if _, err := a.t.Send(ctx, b.t.Self(), StreamApplication, 1, []byte("request")); err != nil {
			t.Fatal(err)
		}
		a.waitFor(t, "the reply", func() bool { mu.Lock(); defer mu.Unlock(); return replies == i+1 })
	}
	s := onlyConn(t, b).s
	arms := func() int { s.mu.Lock(); defer s.mu.Unlock(); return s.grantArms }
	// A reply written inline takes the grant along. Under load a reply
	// can still reach the writer after the handler ended (the writer was
	// busy) and leave its grant behind, which is slack: no timer either.
	if n := arms(); n != 0 {
		t.Fatalf("%d requests answered with data armed the grant timer %d times", requests, n)
	}
	granted := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		r := &s.recv[StreamApplication]
		return r.Consumed() == r.Received() && r.Granted().Consumed == r.Consumed()
	}
	b.waitFor(t, "the last reply's grant", granted)

	// An envelope left unanswered, below the slack: consumed, not
	// granted, no timer.
	if _, err := a.t.Send(ctx, b.t.Self(), StreamApplication, 1, []byte("silent")); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "the silent envelope", func() bool {
		mu.Lock()
		defer mu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		r := &s.recv[StreamApplication]
		return silent == 1 && !s.busy[StreamApplication] && r.Consumed() == r.Received()
	})
	s.mu.Lock()
	r := &s.recv[StreamApplication]
	waiting, deadline, armed := r.Consumed()-r.Granted().Consumed, r.Deadline(), s.grantArms
	s.mu.Unlock()
	if waiting == 0 || !deadline.IsZero() || armed != 0 {
		t.Fatalf("silent envelope below the slack: %d bytes waiting, deadline %v, timer armed %d times; want bytes waiting, no deadline, no timer", waiting, deadline, armed)
	}

	// Unanswered envelopes reaching the slack: the timer grants them.
	if _, err := a.t.Send(ctx, b.t.Self(), StreamApplication, 1, append([]byte("silent"), make([]byte, grantSlack)...)); err != nil {
		t.Fatal(err)
	}
	// (At once, if the first waited GrantDelay already.)
	b.waitFor(t, "the grant timer to grant the envelopes left unanswered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return silent == 2 && granted()
	})
}

// closed reports, when called, whether ch is closed.
func closed(ch <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}

// A large envelope of any stream is delivered by the reader when its
// deliverer is idle; a handler that blocks there is relieved by the
// watch, so other streams' envelopes still arrive, and the stream's next
// envelope waits for the blocked one.
func TestLargeEnvelopeOnTheReaderIsRelievedWhenItBlocks(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	unblock := make(chan struct{})
	var mu sync.Mutex
	var got []string
	b.t.Handle(StreamReplication, HandlerFunc(func(from ring.NodeID, p []byte) {
		if p[0] == 'b' {
			<-unblock
		}
		mu.Lock()
		got = append(got, fmt.Sprintf("%c%d", p[0], len(p)))
		mu.Unlock()
		b.signal()
	}))
	b.t.Handle(StreamMembership, HandlerFunc(func(from ring.NodeID, p []byte) {
		mu.Lock()
		got = append(got, string(p))
		mu.Unlock()
		b.signal()
	}))
	ctx := context.Background()
	large := func(c byte) []byte { p := make([]byte, 256<<10); p[0] = c; return p }
	for _, p := range [][]byte{large('w'), large('b'), large('n')} {
		if _, err := a.t.Send(ctx, b.t.Self(), StreamReplication, 0, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.t.Send(ctx, b.t.Self(), StreamMembership, 0, []byte("m")); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "the membership envelope", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(got, "m")
	})
	close(unblock)
	b.waitFor(t, "every envelope", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 4 })
	mu.Lock()
	defer mu.Unlock()
	var repl []string
	for _, s := range got {
		if s != "m" {
			repl = append(repl, s)
		}
	}
	if want := []string{"w262144", "b262144", "n262144"}; fmt.Sprint(repl) != fmt.Sprint(want) {
		t.Fatalf("replication got %q, want %q", repl, want)
	}
}

// The relief watch, driven look by look (its timer replaced): while
// looks find the deliveries over, each waits twice as many periods as the
// last, up to maxIdleLooks; with none since the last look it rests, and
// the next delivery starts it over. A delivery that blocks right after
// the longest wait is relieved by the look after the one that first sees
// it running: within maxIdleLooks+1 periods of its start.
func TestReliefWatchWaitsLongerOverShortDeliveriesAndStillRelieves(t *testing.T) {
	var armMu sync.Mutex
	arms := map[*liveConn][]int64{}
	hook := func(c *liveConn, periods int64) {
		armMu.Lock()
		arms[c] = append(arms[c], periods)
		armMu.Unlock()
	}
	tune := func(tn *tuning) { tn.watchArm = hook }
	a, b := newTunedNode(t, tune, nil), newTunedNode(t, tune, nil)
	release, blocked, delivered := blockingCounter(b)
	ctx := context.Background()
	send := func(st StreamID, p string) {
		t.Helper()
		if _, err := a.t.Send(ctx, b.t.Self(), st, 1, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	var c *liveConn
	deliver := func() {
		t.Helper()
		want := delivered() + 1
		send(StreamApplication, "short")
		b.waitFor(t, "the delivery", func() bool { return delivered() == want })
		if c == nil {
			c = onlyConn(t, b)
		}
		b.waitFor(t, "the delivery's end", func() bool { return c.dseq.Load()&1 == 0 })
	}
	armed := func() []int64 {
		armMu.Lock()
		defer armMu.Unlock()
		return slices.Clone(arms[c])
	}

	deliver() // arms the watch: one period
	for range 6 {
		c.look()
		deliver()
	}
	if got, want := armed(), []int64{1, 2, 4, 8, 8, 8, 8}; !slices.Equal(got, want) {
		t.Fatalf("periods armed over short deliveries = %v, want %v", got, want)
	}
	c.look()  // deliveries since: 8 again
	c.look()  // none since: rests
	deliver() // starts over
	c.look()
	if got, want := armed()[7:], []int64{8, 1, 2}; !slices.Equal(got, want) || !c.watchArmed.Load() {
		t.Fatalf("periods armed after a rest = %v, want %v", got, want)
	}
	for range 2 {
		deliver()
		c.look()
	}
	// Armed maxIdleLooks periods; the next delivery blocks.
	if got := armed(); got[len(got)-1] != maxIdleLooks {
		t.Fatalf("last period armed %d, want %d", got[len(got)-1], maxIdleLooks)
	}
	from := len(armed()) - 1
	send(StreamApplication, "block")
	<-blocked
	seq := c.dseq.Load()
	c.look() // first sight of it running
	if c.dseq.Load() != seq {
		t.Fatal("relieved at the first look that saw the delivery running")
	}
	c.look() // still running: relieved
	if c.dseq.Load() == seq {
		t.Fatal("not relieved at the second look that saw the delivery running")
	}
	var periods int64
	for _, p := range armed()[from : len(armed())-1] {
		periods += p
	}
	if periods > maxIdleLooks+1 {
		t.Fatalf("relieved %d periods after the last look before the delivery, want at most %d", periods, maxIdleLooks+1)
	}
	// The new reader reads: another stream's envelope arrives while the
	// handler still blocks.
	send(StreamMembership, "m")
	b.waitFor(t, "the membership envelope", func() bool { return len(b.got[StreamMembership]) == 1 })
	want := delivered() + 1
	close(release)
	b.waitFor(t, "the blocked delivery", func() bool { return delivered() == want })
}

// Envelopes queued behind a blocked handler are held, not consumed: once
// the bytes received and not granted reach the slack, the grant timer
// acknowledges them (the peer's estimator counts them as delivered) while
// the handler still blocks. (Keepalive pings, whose pongs would carry
// the grant, are an hour away.)
func TestEnvelopesHeldBehindABlockedHandlerAreAcknowledgedPastTheSlack(t *testing.T) {
	quiet := func(c *wire.Config) { c.KeepaliveAfter = time.Hour }
	a, b := newTestNode(t, quiet), newTestNode(t, quiet)
	release, blocked, delivered := blockingCounter(b)
	ctx := context.Background()
	send := func(p []byte) {
		t.Helper()
		if _, err := a.t.Send(ctx, b.t.Self(), StreamApplication, 1, p); err != nil {
			t.Fatal(err)
		}
	}
	send([]byte("block"))
	<-blocked
	for range 4 {
		send(make([]byte, grantSlack/2))
	}
	s := onlySession(t, b)
	b.waitFor(t, "the acknowledgement of the envelopes held", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		r := &s.recv[StreamApplication]
		return r.Received() >= 5+2*grantSlack && r.Granted().Received == r.Received()
	})
	s.mu.Lock()
	r := &s.recv[StreamApplication]
	consumed, granted := r.Consumed(), r.Granted().Consumed
	s.mu.Unlock()
	if consumed != 0 || granted != 0 {
		t.Fatalf("consumed %d, granted %d while the handler blocks; want 0", consumed, granted)
	}
	close(release)
	b.waitFor(t, "every envelope", func() bool { return delivered() == 5 })
}

// blockingCounter handles node b's application stream: it counts the
// envelopes delivered, and the one reading "block" closes blocked and
// waits for release to be closed.
func blockingCounter(b *testNode) (release, blocked chan struct{}, delivered func() int) {
	release, blocked = make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	n := 0
	b.t.Handle(StreamApplication, HandlerFunc(func(from ring.NodeID, p []byte) {
		if string(p) == "block" {
			close(blocked)
			<-release
		}
		mu.Lock()
		n++
		mu.Unlock()
		b.signal()
	}))
	return release, blocked, func() int { mu.Lock(); defer mu.Unlock(); return n }
}
