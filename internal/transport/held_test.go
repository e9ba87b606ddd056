package transport

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/transport/flow"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// A sender skips waking the writer for an envelope the stream's credit
// surely holds back (creditHeldLocked): with the peer's handler blocked,
// so that no grant for consumed bytes comes, an envelope that fits the
// rest of the window still arrives, one that does not waits, and both are
// delivered in order once the handler goes on.
func TestAnEnvelopeThatFitsTheRestOfAFullWindowIsWritten(t *testing.T) {
	// A window below the estimator's first congestion window, so that
	// the credit is what holds the sender; no keepalive pings, which would
	// wake a writer a wrongly held envelope waits for.
	const window, size = 64 << 10, 4 << 10
	small := func(c *wire.Config) {
		c.Limits = wire.Limits{MaxFrame: 16 << 10, Window: window}
		c.KeepaliveAfter = time.Hour
	}
	a, b := newTestNode(t, small), newTestNode(t, small)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the transports close: their deliverers must end
	var got [][]byte
	b.t.Handle(StreamReplication, HandlerFunc(func(_ ring.NodeID, p []byte) {
		if len(got) == 0 {
			<-release
		}
		b.mu.Lock()
		got = append(got, bytes.Clone(p))
		b.mu.Unlock()
		b.signal()
	}))
	send := func(n int, fill byte) {
		t.Helper()
		if _, err := a.t.Send(context.Background(), b.t.Self(), StreamReplication, 0, bytes.Repeat([]byte{fill}, n)); err != nil {
			t.Fatal(err)
		}
	}
	received := func() int64 {
		s, _ := b.t.sessionFor(a.t.Self(), false)
		if s == nil {
			return 0
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.recv[StreamReplication].Received()
	}
	full := window/size - 1 // leaves size bytes of the window
	for i := range full {
		send(size, byte(i))
	}
	send(size-100, 0xfe) // fits what is left
	send(size, 0xff)     // does not: waits for a grant
	want := int64(full*size + size - 100)
	b.waitFor(t, "the envelope that fits to arrive", func() bool { return received() == want })
	unblock()
	b.waitFor(t, "every envelope", func() bool { return len(got) == full+2 })
	for i, p := range got {
		fill := byte(i)
		switch i {
		case full:
			fill = 0xfe
		case full + 1:
			fill = 0xff
		}
		if p[0] != fill {
			t.Fatalf("envelope %d holds %#x, want %#x", i, p[0], fill)
		}
	}
}

// creditHeldLocked holds back exactly the envelopes flow's scheduler
// would not write with the credit left: those whose first frame does not
// fit, unless at least an eighth of the window is left for a frame cut
// short.
func TestCreditHeldMatchesWhatTheSchedulerWouldWrite(t *testing.T) {
	const window = 64 << 10
	s := connlessSession(t, wire.Config{ClusterName: "test", Limits: wire.Limits{MaxFrame: 16 << 10, Window: window}})
	st := StreamReplication
	cr := s.sched.Credit(flow.StreamID(st))
	for _, c := range []struct {
		avail, n int
		held     bool
	}{
		{window, 1 << 20, false},
		{10000, 1 << 20, false}, // an eighth of the window is left: cut short
		{10000, 20000, false},
		{4096, 4096, false},
		{4096, 4000, false},
		{4096, 4097, true},
		{4096, 1 << 20, true},
		{0, 1, true},
		{0, 0, false}, // an empty envelope needs no credit
	} {
		if err := cr.Spend(cr.Available() - int64(c.avail)); err != nil {
			t.Fatal(err)
		}
		if got := s.creditHeldLocked(st, c.n); got != c.held {
			t.Errorf("%d bytes with %d available: held %v, want %v", c.n, c.avail, got, c.held)
		}
	}
}

// connlessSession returns a session of a transport made from cfg, with no
// connection: for tests of its bookkeeping under s.mu.
func connlessSession(t *testing.T, cfg wire.Config) *session {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	s, err := newSession(tr, "peer", "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
